// Page loads of the dashboard in Debian's headless Chromium (bench/web_bench.py runs it): for each of
// N rounds, a fresh page (new context: no cache) navigates to the dashboard and waits until it has
// drawn every GPU's card and chart; then a fresh page navigates to /app.css (the baseline). Prints
// {"browser", "page_ms": [...], "baseline_ms": [...]} on stdout.
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
const out = { browser: browser.version(), page_ms: [], baseline_ms: [] };
async function timed(target, ready) {
  const context = await browser.newContext({ viewport: { width: 1500, height: 1100 } });
  const page = await context.newPage();
  const t = performance.now();
  await page.goto(target);
  if (ready) await page.waitForFunction(ready, gpus, { polling: 'raf', timeout: 30000 });
  const ms = performance.now() - t;
  await context.close();
  return ms;
}
const drawn = (n) => document.body.dataset.ready === 'true' &&
  document.querySelectorAll('.gpu-chart[data-points]').length === n;
await timed(url, drawn);  // warm-up: the first start of a renderer
for (let i = 0; i < rounds; i++) {
  out.page_ms.push(await timed(url, drawn));
  out.baseline_ms.push(await timed(new URL('app.css', url).href, null));
}
await browser.close();
console.log(JSON.stringify(out));
