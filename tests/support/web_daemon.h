#pragma once
// Shared by the gpulane-web tests (tests/integration/web_*_test.cc): a daemon that
// starts gpulane-web on a free loopback port, and what its log says about it.
#include <sys/types.h>

#include <string>

#include "support/daemon_fixture.h"

namespace gpulane::test {

/// [web] on a free loopback port (gpulane-web prints the one it took) and a fast sampler.
inline constexpr const char* kWebConfig = "[web]\nlisten = \"127.0.0.1:0\"\n[telemetry]\ninterval = \"200ms\"\n";

/// The port of the `nth` (1-based) gpulane-web the daemon started, once its "listening on" line is
/// in the daemon's log (up to `timeout_s`); 0 (and a test failure) when it is not.
int WebPort(const TestDaemon& d, int nth = 1, double timeout_s = 30);

/// The pid of the `nth` gpulane-web the daemon started (its "started gpulane-web (pid N)" line); -1
/// when there is no such line yet.
pid_t WebPid(const TestDaemon& d, int nth = 1);

}  // namespace gpulane::test
