#pragma once
// A check for the fuzz targets: a property that must hold whatever the input. A failed one aborts,
// which libFuzzer reports as a crash and saves the input (crash-<sha1>) for a regression test.
#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond, ...)                                              \
  do {                                                                     \
    if (!(cond)) {                                                         \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                   \
      std::fprintf(stderr, "\n");                                          \
      std::abort();                                                        \
    }                                                                      \
  } while (0)
