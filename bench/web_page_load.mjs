// Page loads of the dashboard in Debian's headless Chromium (bench/web_bench.py runs it): for each of
// N rounds, a fresh page (new context: no cache) navigates to the dashboard and waits until it has
// drawn every GPU's card and chart; then a fresh page navigates to /app.css (the baseline). Prints
// {"browser", "page_ms", "baseline_ms" (goto until drawn, resp. loaded: this script's clock, with
// Playwright's own round trips), "page_painted_ms", "baseline_painted_ms" (navigation start until
// the page's mark 'painted': the page's clock)} on stdout, each a list of the rounds' ms.
//   node bench/web_page_load.mjs URL N GPUS
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const require = createRequire(fileURLToPath(new URL('../web/package.json', import.meta.url)));
const { chromium } = require('playwright-core');
const [url, rounds, gpus] = [process.argv[2], Number(process.argv[3]), Number(process.argv[4])];

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium', headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
         '--disable-sync', '--no-first-run', '--disable-quic'],
});
// The page's own clock: `painted` is the mark web/src/app.js sets once the frame after its ready has
// been painted (its requestAnimationFrame callback, then the next task); the baseline page (a
// stylesheet, no script of its own) gets the same mark the same way after its load event, from an
// init script. Both are ms since that page's navigation started (performance.mark's startTime).
const PAINTED_AFTER_LOAD = `addEventListener('load', () => requestAnimationFrame(() => {
  const c = new MessageChannel(); c.port1.onmessage = () => performance.mark('painted'); c.port2.postMessage(null); }));`;
const painted = () => performance.getEntriesByName('painted').length > 0;
const out = { browser: browser.version(), page_ms: [], baseline_ms: [], page_painted_ms: [], baseline_painted_ms: [] };
async function timed(target, ready, initScript) {
  const context = await browser.newContext({ viewport: { width: 1500, height: 1100 } });
  if (initScript) await context.addInitScript(initScript);
  const page = await context.newPage();
  const t = performance.now();
  await page.goto(target);
  if (ready) await page.waitForFunction(ready, gpus, { polling: 'raf', timeout: 30000 });
  const ms = performance.now() - t;
  // Not part of `ms`: the page's own mark, read once it is there.
  await page.waitForFunction(painted, null, { polling: 'raf', timeout: 30000 });
  const pageMs = await page.evaluate(() => performance.getEntriesByName('painted')[0].startTime);
  await context.close();
  return [ms, pageMs];
}
const drawn = (n) => document.body.dataset.ready === 'true' &&
  document.querySelectorAll('.gpu-chart[data-points]').length === n;
await timed(url, drawn);  // warm-up: the first start of a renderer
for (let i = 0; i < rounds; i++) {
  const [page, pagePainted] = await timed(url, drawn);
  const [base, basePainted] = await timed(new URL('app.css', url).href, null, PAINTED_AFTER_LOAD);
  out.page_ms.push(page);
  out.page_painted_ms.push(pagePainted);
  out.baseline_ms.push(base);
  out.baseline_painted_ms.push(basePainted);
}
await browser.close();
console.log(JSON.stringify(out));
