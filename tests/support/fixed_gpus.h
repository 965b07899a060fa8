#pragma once
// GPU sources for os::Env in tests (gpu/opener.h): FixedGpus opens backends that read one fixed
// snapshot; LiveGpus backends that read the GPUs as the test sets them now, from any thread (the
// daemon's sampler reads beside its loop), Xid errors included; NoGpus refuses, for code that must
// not read GPUs at all.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

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

/// The machine's GPUs as a test changes them: every backend opened (the daemon's loop's, its
/// sampler's) reads what Set or Edit last left, whenever it reads. An Xid error raised by RaiseXid
/// is reported once, by the next telemetry read (ReadOptions::telemetry: the sampler's), as NVML's
/// events are; other reads say nothing of Xids. Safe to change while another thread reads.
class LiveGpus final : public GpuOpener {
 public:
  Result<std::unique_ptr<GpuBackend>> Open() override {
    std::lock_guard lock(state_->mu);
    ++state_->opens;
    return std::unique_ptr<GpuBackend>(new Backend(state_));
  }
  /// The GPUs from now on.
  void Set(GpuSnapshot snapshot) {
    std::lock_guard lock(state_->mu);
    state_->snapshot = std::move(snapshot);
    state_->set = true;
  }
  /// Changes the GPUs as `edit` does.
  void Edit(const std::function<void(GpuSnapshot&)>& edit) {
    std::lock_guard lock(state_->mu);
    edit(state_->snapshot);
  }
  /// GPU `pci_index` raises Xid `xid` (reported by the next telemetry read).
  void RaiseXid(unsigned pci_index, std::uint64_t xid) {
    std::lock_guard lock(state_->mu);
    state_->xids[pci_index].push_back(xid);
  }
  /// The GPUs as they are now.
  GpuSnapshot Current() const {
    std::lock_guard lock(state_->mu);
    return state_->snapshot;
  }
  /// Whether Set was called.
  bool set() const {
    std::lock_guard lock(state_->mu);
    return state_->set;
  }
  /// How many backends were opened.
  int opens() const {
    std::lock_guard lock(state_->mu);
    return state_->opens;
  }

 private:
  struct State {
    mutable std::mutex mu;
    GpuSnapshot snapshot;
    std::map<unsigned, std::vector<std::uint64_t>> xids;  ///< raised, not yet read, by PCI index
    bool set = false;
    int opens = 0;
  };
  class Backend final : public GpuBackend {
   public:
    explicit Backend(std::shared_ptr<State> state) : state_(std::move(state)) {}
    Result<GpuSnapshot> Read(const ReadOptions& options) override {
      std::lock_guard lock(state_->mu);
      GpuSnapshot s = state_->snapshot;
      if (options.telemetry)
        for (GpuDevice& d : s.devices) d.xid_errors = std::exchange(state_->xids[d.pci_index], {});
      return s;
    }
    using GpuBackend::Read;

   private:
    std::shared_ptr<State> state_;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

class NoGpus final : public GpuOpener {
 public:
  Result<std::unique_ptr<GpuBackend>> Open() override {
    return MakeError(ErrorKind::kNvml, "no GPUs in this test (NoGpus)");
  }
};

}  // namespace gpulane::test
