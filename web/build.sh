#!/bin/sh
# Bundles the dashboard into OUT for gpulane-web (web/CMakeLists.txt runs it): esbuild from
# web/node_modules, offline. Missing packages are installed from npm's cache (npm ci --offline)
# when Node.js and npm are there; when that fails, OUT/index.html says the dashboard was not built
# (and app.js is left out, so the next build tries again) and the build goes on.
set -u
out=$1
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
not_built() {
  echo "gpulane: warning: the dashboard was not built: $1 (scripts/setup.sh installs Node.js, npm and web/node_modules)" >&2
  rm -f "$out/app.js"
  cat >"$out/index.html" <<PAGE
<!doctype html><html lang="en"><head><meta charset="utf-8"><title>gpulane</title></head><body>
<h1>gpulane</h1><p>The dashboard was not built: $1. Run <code>scripts/setup.sh</code> (it installs Node.js, npm and
the dashboard's packages), then build again. <a href="/metrics">/metrics</a> and the JSON API
(<a href="/api/v1/status">/api/v1/status</a>) work without it.</p></body></html>
PAGE
  exit 0
}
command -v node >/dev/null 2>&1 || not_built "node was not found"
cd "$here" || not_built "no folder $here"
if [ ! -x node_modules/.bin/esbuild ] || [ ! -f node_modules/uplot/package.json ]; then
  command -v npm >/dev/null 2>&1 || not_built "npm was not found"
  npm ci --offline --no-audit --no-fund >/dev/null 2>&1 || not_built "web/node_modules is missing and npm ci --offline failed"
fi
node bundle.mjs "$out/app.js.tmp" || not_built "esbuild failed"
# One stylesheet: uPlot's, then the page's (the order of the cascade that two links would give).
rm -f "$out/uPlot.min.css"
cp index.html "$out/index.html" && { cat node_modules/uplot/dist/uPlot.min.css; echo; cat app.css; } >"$out/app.css" \
  || not_built "cannot copy the page into $out"
mv "$out/app.js.tmp" "$out/app.js"
