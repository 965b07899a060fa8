#include "cli/gpu_options.h"

#include <fmt/format.h>

#include "util/units.h"

namespace gpulane::cli {

void GpuOptions::Register(CLI::App* sub) {
  sub->add_option("-g,--gpu-count", count, "How many GPUs (default 1)");
  sub->add_option("--mem", mem, "Share GPUs: declare this much GPU memory per GPU (e.g. 30GiB) instead of whole GPUs")
      ->type_name("SIZE");
  sub->add_option("--min-free", min_free, "Each GPU needs at least this much free memory")->type_name("SIZE");
  sub->add_option("--max-util", max_util, "Each GPU at most this busy, in percent")
      ->check(CLI::Range(0, 100))
      ->type_name("PCT");
  sub->add_option("--gpus", gpus, "Only these GPUs: indices or UUIDs, comma-separated")->type_name("LIST");
  sub->add_flag("--share-foreign", share_foreign, "Allow GPUs that run compute processes outside gpulane");
}

Result<store::GpuSpec> GpuOptions::ToSpec() const {
  auto usage = [](std::string m) { return MakeError(ErrorKind::kInvalidArgument, std::move(m)); };
  store::GpuSpec g;
  if (count < 1) return usage(fmt::format("-g {}: ask for at least 1 GPU", count));
  g.count = static_cast<unsigned>(count);
  if (!mem.empty()) {
    auto bytes = ParseSizeBytes(mem);
    if (!bytes) return usage("--mem: " + bytes.error().message);
    if (*bytes == 0) return usage("--mem 0: declare the GPU memory the job needs, e.g. --mem 30GiB");
    g.mem_bytes = *bytes;
  }
  if (!min_free.empty()) {
    auto bytes = ParseSizeBytes(min_free);
    if (!bytes) return usage("--min-free: " + bytes.error().message);
    g.min_free_bytes = *bytes;
  }
  if (max_util >= 0) g.max_util_pct = static_cast<unsigned>(max_util);
  g.gpu_list = gpus;
  g.share_foreign = share_foreign;
  return g;
}

}  // namespace gpulane::cli
