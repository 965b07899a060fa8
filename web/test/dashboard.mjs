// The dashboard in real headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core):
// run by the ctest test WebDashboard.* (tests/integration/web_dashboard_test.cc) against a daemon on
// the fake NVML. Checks, each printed as "ok ..." (or "FAIL ...", exit 1): the page loads with no
// console error, shows a card per GPU, the queue shows job `--job`, history on demand draws a chart,
// and GPU `--change-gpu`'s chart and card follow a change of the fake NVML state file. Polls for every condition; never sleeps.
//
//   node web/test/dashboard.mjs --url http://127.0.0.1:PORT/ --gpus N --job ID --state nvml.json
//        [--change-gpu 1] [--screenshot out.png]
import { chromium } from 'playwright-core';
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

const { values: opt } = parseArgs({
  options: {
    url: { type: 'string' }, gpus: { type: 'string' }, job: { type: 'string' }, state: { type: 'string' },
    'change-gpu': { type: 'string', default: '1' }, screenshot: { type: 'string' },
    chromium: { type: 'string', default: '/usr/bin/chromium' },
  },
});
const TIMEOUT_MS = 20000;
const errors = [];

function fail(what, e) {
  console.log(`FAIL ${what}: ${e?.message ?? e}`);
  if (errors.length) console.log(`console errors: ${JSON.stringify(errors)}`);
  process.exit(1);
}

async function check(what, fn) {
  try {
    await fn();
    console.log(`ok ${what}`);
  } catch (e) {
    fail(what, e);
  }
}

// The fake NVML re-reads its state file when it changes; replaced atomically as FakeMachine::Save does.
function setUtilization(path, gpu, pct) {
  const state = JSON.parse(readFileSync(path, 'utf8'));
  state.devices[gpu].util = { ...(state.devices[gpu].util || {}), gpu: pct };
  writeFileSync(`${path}.web-test`, JSON.stringify(state));
  renameSync(`${path}.web-test`, path);
}

const browser = await chromium.launch({
  executablePath: opt.chromium,
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
         '--disable-sync', '--no-first-run', '--disable-quic'],
}).catch((e) => fail('chromium starts', e));
try {
  const page = await browser.newPage({ viewport: { width: 1500, height: 1100 } });
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('requestfailed', (r) => errors.push(`request failed: ${r.url()} ${r.failure()?.errorText}`));
  const gpus = Number(opt.gpus);
  const changed = Number(opt['change-gpu']);

  await check('the page loads and shows the daemon\'s data', async () => {
    const res = await page.goto(opt.url, { timeout: TIMEOUT_MS });
    if (!res.ok()) throw new Error(`HTTP ${res.status()}`);
    await page.waitForSelector('body[data-ready="true"]', { timeout: TIMEOUT_MS });
  });
  await check(`a card for each of the ${gpus} GPUs`, async () => {
    const shown = await page.locator('article.gpu').count();
    if (shown !== gpus) throw new Error(`${shown} cards`);
    for (let i = 0; i < gpus; i++) {
      await page.waitForFunction((i) => Number(document.querySelector(`[data-gpu="${i}"] .gpu-chart`)?.dataset.points) > 0,
        i, { timeout: TIMEOUT_MS });
    }
  });
  await check(`the queue shows job ${opt.job}`, async () => {
    const row = page.locator(`#queue tr[data-job="${opt.job}"]`);
    await row.waitFor({ timeout: TIMEOUT_MS });
    const text = await row.innerText();
    if (!text.includes('held')) throw new Error(`its row says '${text}'`);
  });
  await check('history on demand draws GPU 0\'s last hour', async () => {
    await page.selectOption('#history-gpu', '0');
    await page.selectOption('#history-range', '1h');
    await page.click('#history-form button[type="submit"]');
    await page.waitForFunction(() => /^[1-9][0-9]* points$/.test(document.getElementById('history-note').textContent),
      null, { timeout: TIMEOUT_MS });
    if (!(await page.locator('#history-chart canvas').count())) throw new Error('no chart drawn');
  });
  await check(`GPU ${changed}'s chart and card follow the fake NVML to 87 %`, async () => {
    setUtilization(opt.state, changed, 87);
    await page.waitForFunction((g) => document.querySelector(`[data-gpu="${g}"] .gpu-chart`)?.dataset.lastUtil === '87',
      changed, { timeout: TIMEOUT_MS });
    const card = await page.locator(`[data-gpu="${changed}"] .gpu-util`).innerText();
    if (card !== '87 %') throw new Error(`the card says '${card}'`);
  });
  if (opt.screenshot) await page.screenshot({ path: opt.screenshot, fullPage: true });
  await check('no console errors', async () => {
    if (errors.length) throw new Error(errors.join(' | '));
  });
} finally {
  await browser.close();
}
