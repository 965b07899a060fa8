// The rhythm of an idle daemon's loop, in-process (tests/support/inproc_daemon.h) on the real
// clock: with no connection and nothing loading, a turn waits for the next tick (one second), so
// the loop wakes once a tick, not four times a second (poll's 250 ms cap for connections' time-outs;
// bench/results/sampler-floor-2026-12-06.md). Was DaemonLifecycle.AnIdleDaemonWakesOnceATickNotFourTimesASecond
// through the binary, which counted the daemon process's context switches over five seconds; here
// the loop's own turns are counted (Daemon::Step returns after each), with no stray wake-up of a
// fixture's ping connection to allow for.
#include <chrono>

#include <gtest/gtest.h>

#include "support/inproc_daemon.h"

namespace gpulane::test {
namespace {

class DaemonInProcLoop : public InProcDaemonTest {};

TEST_F(DaemonInProcLoop, AnIdleDaemonWakesOnceATickNotFourTimesASecond) {
  real_clock_ = true;  // the tick's second is the real one: the turns are counted over real time
  StartDaemon();       // telemetry off, no gpulane-web, the default tick of one second
  ASSERT_EQ(settings_.tick_s, 1);
  Turn(1);  // the first turn's tick (nothing done before it)
  const auto start = std::chrono::steady_clock::now();
  const auto period = std::chrono::seconds(3);  // the period measured, not a wait for an event
  int turns = 0;
  // Each turn may wait 10 s: the daemon alone decides how long (turns end at its ticks).
  for (; std::chrono::steady_clock::now() - start < period; ++turns) daemon_->Step(10);
  // The turns ending at the ticks 1, 2 and 3 s on (a 4th when the third ended a hair before 3 s:
  // the first tick was a little before the start); at 250 ms a turn it was 12.
  EXPECT_LE(turns, 4) << "an idle daemon's loop turned " << turns << " times in 3 s";
  // And it still wakes for the ticks (not waiting its 10 s): 2 at least where a loaded machine
  // (a sanitizer build) delays each turn.
  EXPECT_GE(turns, 2) << "it still wakes for the ticks";
}

}  // namespace
}  // namespace gpulane::test
