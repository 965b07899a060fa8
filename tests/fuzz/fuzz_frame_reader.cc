// proto::FrameReader as the daemon drives it (daemon/server.cc ReadFrom): bytes arrive in pieces of
// any size, complete frames are taken out one by one, an announced length over the limit stops the
// connection; each payload goes through the nesting check and the JSON parser like a request.
//
// Input: byte 0 picks the limit (a small one, so that oversized frames are reached, or the real
// kMaxRequestBytes); byte 1 seeds the sizes of the pieces; the rest is the stream.
// Properties: the frames taken out, re-framed, are exactly the stream's prefix; none exceeds the
// limit; too_big is reported exactly when the next announced length exceeds it; partial() is true
// exactly while bytes are buffered.
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "proto/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using gpulane::proto::FrameReader;
  if (size < 2) return 0;
  const std::size_t limits[] = {0, 1, 16, 255, 4096, gpulane::proto::kMaxRequestBytes};
  const std::size_t max_bytes = limits[data[0] % 6];
  unsigned piece_seed = data[1];
  const char* stream = reinterpret_cast<const char*>(data + 2);
  const std::size_t n = size - 2;

  FrameReader reader(max_bytes);
  std::string reframed;
  std::size_t fed = 0;
  bool stopped = false;
  while (fed < n && !stopped) {
    piece_seed = piece_seed * 1103515245u + 12345u;
    std::size_t piece = 1 + (piece_seed >> 16) % 64;
    if (piece > n - fed) piece = n - fed;
    reader.Feed(stream + fed, piece);
    fed += piece;
    while (true) {
      bool too_big = true;
      auto frame = reader.Next(&too_big);
      if (frame) {
        FUZZ_CHECK(!too_big, "a frame and too_big at once");
        FUZZ_CHECK(frame->size() <= max_bytes, "frame of %zu bytes over the limit %zu", frame->size(), max_bytes);
        const std::uint32_t len = static_cast<std::uint32_t>(frame->size());
        reframed += static_cast<char>(len >> 24);
        reframed += static_cast<char>(len >> 16);
        reframed += static_cast<char>(len >> 8);
        reframed += static_cast<char>(len);
        reframed += *frame;
        // What the daemon does next with a payload.
        if (gpulane::proto::NestingDepth(*frame) <= gpulane::proto::kMaxRequestDepth) {
          auto j = nlohmann::json::parse(*frame, nullptr, false);
          if (!j.is_discarded()) (void)j.dump();
        }
        continue;
      }
      if (too_big) {
        // The announced length is what follows the frames taken out.
        const std::size_t at = reframed.size();
        FUZZ_CHECK(at + 4 <= fed, "too_big before a whole header");
        const auto* h = reinterpret_cast<const unsigned char*>(stream + at);
        const std::size_t announced = (std::size_t{h[0]} << 24) | (std::size_t{h[1]} << 16) | (std::size_t{h[2]} << 8) | h[3];
        FUZZ_CHECK(announced > max_bytes, "too_big for %zu bytes under the limit %zu", announced, max_bytes);
        stopped = true;  // the daemon answers and closes
      }
      break;
    }
    FUZZ_CHECK(reframed.compare(0, std::string::npos, stream, reframed.size()) == 0, "frames are not the stream's prefix");
    FUZZ_CHECK(reader.partial() == (reframed.size() < fed), "partial() is %d with %zu of %zu bytes taken out",
               reader.partial(), reframed.size(), fed);
  }
  return 0;
}
