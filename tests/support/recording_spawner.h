#pragma once
// A spawner (os/spawn.h) that starts nothing: it counts what it was asked to start, so a test sees
// that the code under test starts its processes through the Env it was given, and no process of
// the test's appears. Start answers with an error (there is no pid to hand out: a made-up one
// could name a real process the caller would then signal or wait for).
#include "os/spawn.h"

namespace gpulane::test {

class RecordingSpawner final : public os::Spawner {
 public:
  Result<pid_t> Start(os::InChild) override {
    ++starts;
    return MakeError(ErrorKind::kIo, "fork: not in this test (RecordingSpawner)");
  }
  Status StartDetached(os::InChild, os::InChild) override {
    ++detached_starts;
    return Status::Ok();
  }
  int starts = 0;
  int detached_starts = 0;
};

}  // namespace gpulane::test
