#pragma once
// Time as code that waits for things reads it: the wall clock (timestamps people see and that are
// stored) and a monotonic clock (how long something has taken; never jumps when the wall clock is
// set). SystemClock reads the real ones; FakeClock is moved by hand, so tests of time-outs and
// grace periods run without sleeping.
#include <atomic>
#include <chrono>
#include <cstdint>

namespace gpulane {

/// A source of the current time.
class Clock {
 public:
  virtual ~Clock() = default;
  /// Seconds since the Unix epoch (the wall clock; may jump when the system time is set).
  virtual double WallS() const = 0;
  /// Seconds since an arbitrary fixed point (never goes back); only differences mean anything.
  virtual double MonotonicS() const = 0;
  /// The wall clock in whole nanoseconds since the epoch (a ticket's place in line is one:
  /// lease/lease_dir.h); WallS() rounded down unless a clock reads finer.
  virtual std::uint64_t WallNs() const { return static_cast<std::uint64_t>(WallS() * 1e9); }
  /// The monotonic clock in whole nanoseconds (timing splits: exec/device_isolation.h);
  /// MonotonicS() rounded down unless a clock reads finer. Async-signal-safe for SystemClock.
  virtual std::int64_t MonotonicNs() const { return static_cast<std::int64_t>(MonotonicS() * 1e9); }
};

/// The operating system's clocks (std::chrono::system_clock and steady_clock).
class SystemClock final : public Clock {
 public:
  double WallS() const override {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  }
  double MonotonicS() const override {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }
  std::int64_t MonotonicNs() const override {  // CLOCK_MONOTONIC (clock_gettime: async-signal-safe)
    return static_cast<std::int64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  }
  std::uint64_t WallNs() const override {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
  }
};

/// A clock that stands still until Advance() moves it; both readings move together. Starts at
/// `wall_s` on the wall clock and `monotonic_s` on the monotonic one (binary-exact defaults, so
/// that sums of advances such as 9.5 + 0.5 compare exactly). May be read from other threads while
/// a test moves it (the daemon's sampler thread reads the Env's clock beside its loop): each
/// reading is atomic, the pair is not (a reader between the two moves sees the wall clock moved
/// first).
class FakeClock final : public Clock {
 public:
  explicit FakeClock(double wall_s = 1'700'000'000.0, double monotonic_s = 1000.0)
      : wall_s_(wall_s), monotonic_s_(monotonic_s) {}
  double WallS() const override { return wall_s_.load(); }
  double MonotonicS() const override { return monotonic_s_.load(); }
  /// Moves both clocks forward by `seconds` (>= 0).
  void Advance(double seconds) {
    wall_s_.fetch_add(seconds);
    monotonic_s_.fetch_add(seconds);
  }

 private:
  std::atomic<double> wall_s_;
  std::atomic<double> monotonic_s_;
};

}  // namespace gpulane
