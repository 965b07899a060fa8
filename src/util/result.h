#pragma once
// Errors as values at module boundaries (after leveldb's Status).
#include <string>
#include <utility>
#include <variant>

namespace gpulane {

/// Why an operation failed. Each kind maps to one documented exit code (util/exit_codes.h).
enum class ErrorKind {
  kInvalidArgument,  ///< bad user input: unparsable size, unknown GPU, bad option value
  kNoDriver,         ///< libnvidia-ml.so.1 could not be loaded
  kNvml,             ///< NVML loaded but failed (driver not loaded, version mismatch, permission)
  kNotEnoughGpus,    ///< the request cannot be met by the GPUs there are now
  kTimeout,          ///< waited as long as allowed
  kUnsafe,           ///< a file or folder fails an ownership or permission check
  kIo,               ///< the operating system refused (open, read, fork ...)
  kNotFound,         ///< no such job
  kPermission,       ///< not allowed: another user's job
  kWrongState,       ///< the job is not in a state the command applies to (release of a running job)
  kUnavailable,      ///< the daemon cannot be reached or started
  kStore,            ///< the job store cannot be trusted: damaged, read-only, emptier than it was
  kOverLimit,        ///< a configured limit ([limits], docs/config.md) refuses it now: e.g. too many queued jobs
  kInternal,         ///< anything else
};

/// An error: a kind for the exit code and a one-line message naming problem and fix.
struct Error {
  ErrorKind kind = ErrorKind::kInternal;
  std::string message;
};

/// Either a T or an Error. Small on purpose: std::expected is C++23.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}          // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}      // NOLINT(google-explicit-constructor)
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

/// Result of an operation with no value.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT(google-explicit-constructor)
  static Status Ok() { return {}; }
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return error_; }

 private:
  Error error_;
  bool ok_ = true;
};

inline Error MakeError(ErrorKind kind, std::string message) { return Error{kind, std::move(message)}; }

}  // namespace gpulane
