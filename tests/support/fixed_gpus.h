#pragma once
// GPU sources for os::Env in tests (gpu/opener.h): FixedGpus opens backends that read one fixed
// snapshot; NoGpus refuses, for code that must not read GPUs at all.
#include <memory>
#include <string>

#include "gpu/opener.h"

namespace gpulane::test {

class FixedGpus final : public GpuOpener {
 public:
  Result<std::unique_ptr<GpuBackend>> Open() override {
    ++opens;
    return std::unique_ptr<GpuBackend>(new Backend(snapshot));
  }
  GpuSnapshot snapshot;  ///< what backends opened from now on read
  int opens = 0;         ///< how many backends were opened

 private:
  class Backend final : public GpuBackend {
   public:
    explicit Backend(GpuSnapshot snapshot) : snapshot_(std::move(snapshot)) {}
    Result<GpuSnapshot> Read(const ReadOptions&) override { return snapshot_; }
    using GpuBackend::Read;

   private:
    GpuSnapshot snapshot_;
  };
};

class NoGpus final : public GpuOpener {
 public:
  Result<std::unique_ptr<GpuBackend>> Open() override {
    return MakeError(ErrorKind::kNvml, "no GPUs in this test (NoGpus)");
  }
};

}  // namespace gpulane::test
