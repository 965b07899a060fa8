#pragma once
// Where gpulane-web finds the dashboard's bundled files (index.html, app.js, app.css: made from
// web/ at build time, docs/web.md): --static DIR, else `web/` next to its binary (the build
// tree), else `../share/gpulane/web` from it (an install).
#include <string>

namespace gpulane::web {

/// The folder holding index.html: `explicit_dir` when given (even without index.html: then ""),
/// else the first of the places above that has one; "" when none has (the dashboard was not built).
std::string FindStaticDir(const std::string& explicit_dir, const std::string& exe_path);

/// The page served at / when the dashboard was not built: /metrics and the API still work.
std::string NotBuiltPage();

}  // namespace gpulane::web
