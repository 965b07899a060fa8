// Where a dashboard page load's time goes (issue 11's 300 ms target): for each of N rounds, a fresh
// page (new context: no cache, as bench/web_page_load.mjs) loads the dashboard until every GPU's card
// and chart is drawn; then the page's own Resource and Navigation Timing entries, its marks
// (performance.mark in web/src/app.js) and the ready time, all in ms since the navigation started.
// Prints the median of each across rounds as a table on stdout; --trace FILE also writes one
// round's Chromium trace (chrome://tracing, Perfetto) for the main thread's script, layout and paint.
//   node bench/web_page_profile.mjs URL N GPUS [--trace FILE]
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const require = createRequire(fileURLToPath(new URL('../web/package.json', import.meta.url)));
const { chromium } = require('playwright-core');
const [url, rounds, gpus] = [process.argv[2], Number(process.argv[3]), Number(process.argv[4])];
const traceAt = process.argv.indexOf('--trace');
const traceFile = traceAt > 0 ? process.argv[traceAt + 1] : null;

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium', headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
         '--disable-sync', '--no-first-run', '--disable-quic'],
});
const drawn = (n) => document.body.dataset.ready === 'true' &&
  document.querySelectorAll('.gpu-chart[data-points]').length === n;

async function once(trace) {
  const context = await browser.newContext({ viewport: { width: 1500, height: 1100 } });
  const page = await context.newPage();
  if (trace) await browser.startTracing(page, { path: traceFile, screenshots: false });
  const t = performance.now();
  await page.goto(url);
  await page.waitForFunction(drawn, gpus, { polling: 'raf', timeout: 30000 });
  const outside = performance.now() - t;
  await page.waitForFunction(() => performance.getEntriesByName('painted').length > 0, null, { polling: 'raf', timeout: 30000 });
  const rows = await page.evaluate(() => {
    const out = { 'ready (performance.now in the page)': performance.now() };
    const nav = performance.getEntriesByType('navigation')[0];
    for (const k of ['requestStart', 'responseStart', 'responseEnd', 'domInteractive', 'domContentLoadedEventEnd', 'loadEventEnd'])
      out[`document ${k}`] = nav[k];
    for (const r of performance.getEntriesByType('resource')) {
      const name = new URL(r.name).pathname + new URL(r.name).search;
      out[`${name} start`] = r.startTime;
      out[`${name} requestStart`] = r.requestStart;
      out[`${name} responseStart`] = r.responseStart;
      out[`${name} end`] = r.responseEnd;
      out[`${name} bytes on the wire`] = r.transferSize;
    }
    for (const m of performance.getEntriesByType('mark')) out[`mark ${m.name}`] = m.startTime;
    for (const m of performance.getEntriesByType('measure')) out[`measure ${m.name} (duration)`] = m.duration;
    return out;
  });
  rows['ready as the benchmark sees it (goto to drawn)'] = outside;
  if (trace) await browser.stopTracing();
  await context.close();
  return rows;
}

await once(false);  // warm-up: the first start of a renderer
const all = [];
for (let i = 0; i < rounds; i++) all.push(await once(traceFile && i === 0));
await browser.close();
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor((s.length - 1) / 2)]; };
const keys = [...new Set(all.flatMap((r) => Object.keys(r)))];
console.log(`| what (ms since the navigation started, median of ${rounds}) | ms |\n|---|---|`);
const order = keys.map((k) => [k, median(all.map((r) => r[k]).filter((v) => v !== undefined))]);
for (const [k, v] of order.sort((a, b) => (a[0].includes('bytes') - b[0].includes('bytes')) || a[1] - b[1]))
  console.log(`| ${k} | ${k.includes('bytes') ? v : v.toFixed(1)} |`);
