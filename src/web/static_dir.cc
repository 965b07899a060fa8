#include "web/static_dir.h"

#include <unistd.h>

namespace gpulane::web {
namespace {

bool HasIndex(const std::string& dir) { return access((dir + "/index.html").c_str(), R_OK) == 0; }

}  // namespace

std::string FindStaticDir(const std::string& explicit_dir, const std::string& exe_path) {
  if (!explicit_dir.empty()) return HasIndex(explicit_dir) ? explicit_dir : "";
  const std::string exe_dir = exe_path.substr(0, exe_path.rfind('/'));
  for (const std::string& dir : {exe_dir + "/web", exe_dir + "/../share/gpulane/web"})
    if (HasIndex(dir)) return dir;
  return "";
}

std::string NotBuiltPage() {
  return "<!doctype html><html lang=en><head><meta charset=utf-8><title>gpulane</title></head><body>"
         "<h1>gpulane</h1><p>The dashboard was not built: Node.js and npm were missing, or web/node_modules was, when "
         "gpulane was built. Install them and build again (<code>scripts/setup.sh</code> does both).</p>"
         "<p><a href=\"/metrics\">/metrics</a> and the JSON API (<a href=\"/api/v1/status\">/api/v1/status</a>) "
         "work without it.</p></body></html>\n";
}

}  // namespace gpulane::web
