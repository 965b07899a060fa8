// fuzz_replay TARGET PATH...: runs every file (of every folder) named through the fuzz target
// TARGET, as libFuzzer runs one input; for ctest over the committed corpora (tests/CMakeLists.txt),
// built with whatever compiler builds the project. Exit 0 when every input passed (a failed check
// aborts), 2 on a bad command line or an unreadable input.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#define GPULANE_FUZZ_TARGET(name) extern "C" int FuzzTarget_##name(const std::uint8_t* data, std::size_t size);
GPULANE_FUZZ_TARGET(frame_reader)
GPULANE_FUZZ_TARGET(request)
GPULANE_FUZZ_TARGET(config)
GPULANE_FUZZ_TARGET(units)
GPULANE_FUZZ_TARGET(visible_devices)
GPULANE_FUZZ_TARGET(records)
GPULANE_FUZZ_TARGET(job_id)

int main(int argc, char** argv) {
  using Target = int (*)(const std::uint8_t*, std::size_t);
  const std::map<std::string, Target> targets = {
      {"frame_reader", FuzzTarget_frame_reader}, {"request", FuzzTarget_request}, {"config", FuzzTarget_config},
      {"units", FuzzTarget_units}, {"visible_devices", FuzzTarget_visible_devices}, {"records", FuzzTarget_records},
      {"job_id", FuzzTarget_job_id}};
  if (argc < 3 || !targets.count(argv[1])) {
    std::fprintf(stderr, "usage: fuzz_replay TARGET PATH... (targets: frame_reader request config units "
                         "visible_devices records job_id)\n");
    return 2;
  }
  const Target target = targets.at(argv[1]);
  std::vector<std::filesystem::path> files;
  for (int i = 2; i < argc; ++i) {
    std::filesystem::path p = argv[i];
    if (std::filesystem::is_directory(p)) {
      for (const auto& e : std::filesystem::directory_iterator(p))
        if (e.is_regular_file()) files.push_back(e.path());
    } else {
      files.push_back(p);
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "fuzz_replay: no inputs\n");
    return 2;
  }
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "fuzz_replay: cannot read %s\n", f.c_str());
      return 2;
    }
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    target(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("%s: %zu inputs passed\n", argv[1], files.size());
  return 0;
}
