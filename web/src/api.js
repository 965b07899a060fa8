// The JSON API of docs/web.md, on the server that served this page.
// `preloaded`: the page's <link rel="preload"> fetched it already: asked the same way, so that the
// browser hands over that answer instead of asking again.
export async function getJson(path, preloaded = false) {
  const res = await fetch(path, preloaded ? {} : { cache: 'no-store', headers: { Accept: 'application/json' } });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(body.error || `${path}: HTTP ${res.status}`);
  return body;
}
