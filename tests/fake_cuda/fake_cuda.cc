// A stand-in libcuda.so.1 for the Python package's tests (python/tests/test_lease.py): the two
// CUDA driver calls gpulane.lease()'s check uses, behaving as the real driver's do: before cuInit
// cuDeviceGetCount returns CUDA_ERROR_NOT_INITIALIZED (3), after it CUDA_SUCCESS (0) and a count.
namespace {
bool initialized = false;
}

extern "C" __attribute__((visibility("default"))) int cuInit(unsigned int /*flags*/) {
  initialized = true;
  return 0;
}

extern "C" __attribute__((visibility("default"))) int cuDeviceGetCount(int* count) {
  if (!initialized) return 3;
  *count = 1;
  return 0;
}
