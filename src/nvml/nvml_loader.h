#pragma once
// Loads libnvidia-ml.so.1 with dlopen and resolves the entry table of nvml_api.h.
#include <memory>
#include <string>
#include <vector>

#include "nvml/nvml_api.h"
#include "util/result.h"

namespace gpulane::nvml {

/// The library's default name, found through the dynamic loader's cache as the driver installs it.
inline constexpr const char* kDefaultLibrary = "libnvidia-ml.so.1";
/// Environment variable that names another library file (tests point it at the fake NVML).
inline constexpr const char* kLibraryEnv = "GPULANE_NVML_LIBRARY";

/// A loaded and initialised NVML. Construct with Open(); the handle stays loaded for the life of
/// the process. NVML is deliberately not shut down on destruction: nvmlShutdown costs about 15 ms
/// (shared/notes/nvml-facts.md) and process exit releases everything anyway.
class Library {
 public:
  /// dlopen()s `path` (or $GPULANE_NVML_LIBRARY, else libnvidia-ml.so.1 when `path` is empty),
  /// resolves every entry (newest symbol first), and calls nvmlInit.
  /// Errors: kNoDriver when the library cannot be loaded; kNvml when a required entry is missing
  /// ("function missing") or nvmlInit fails (driver not loaded, version mismatch, no permission).
  static Result<std::unique_ptr<Library>> Open(const std::string& path = "");

  const Api& api() const { return api_; }
  /// The symbol each entry was bound to ("" where none): member name -> symbol, for diagnostics.
  const std::vector<std::pair<std::string, std::string>>& bindings() const { return bindings_; }
  /// The file that was loaded.
  const std::string& path() const { return path_; }
  /// Milliseconds spent in dlopen, in resolving the entry table, and in nvmlInit (for GPULANE_TIMING).
  double dlopen_ms() const { return dlopen_ms_; }
  double resolve_ms() const { return resolve_ms_; }
  double init_ms() const { return init_ms_; }

  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

 private:
  Library() = default;
  Api api_;
  std::vector<std::pair<std::string, std::string>> bindings_;
  std::string path_;
  void* handle_ = nullptr;
  double dlopen_ms_ = 0, resolve_ms_ = 0, init_ms_ = 0;
};

/// Message for an nvmlInit failure, naming the cause and the fix.
std::string DescribeInitError(nvmlReturn_t code);

}  // namespace gpulane::nvml
