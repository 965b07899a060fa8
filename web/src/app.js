// gpulane's dashboard: one page per machine (docs/web.md). It reads the JSON API of the server that
// served it: /api/v1/status every second (GPU cards, live charts, the queue), today's usage every
// 30 s, anomalies when the daemon reports them, and other servers side by side (web.peers).
import { getJson } from './api.js';
import { el, setText } from './dom.js';
import { clock, localMidnightS } from './format.js';
import { GpuCard } from './cards.js';
import { renderQueue, renderUsage } from './tables.js';
import { setupHistory } from './history.js';

// The first status: each GPU's last hour too, as columns (docs/web.md); index.html preloads it.
const FIRST_STATUS = '/api/v1/status?history=1h&columns=1';
const STATUS_EVERY_MS = 1000;
const USAGE_EVERY_MS = 30000;
const ANOMALIES_EVERY_MS = 10000;

const cards = new Map();  // GPU index -> GpuCard
let historyReady = false;
let telemetry = null;  // whether the daemon's sampler runs (history, usage): known after the first status

function showError(message) {
  const e = document.getElementById('error');
  e.hidden = !message;
  setText(e, message ? `⚠ ${message}` : '');
}

async function refreshStatus() {
  // The first answer brings each GPU's last hour for its chart: drawn after one round trip.
  const first = !cards.size;
  if (first) performance.mark('app.js runs: status asked');
  const status = await (cards.size ? getJson('/api/v1/status') : getJson(FIRST_STATUS, true));
  if (first) performance.mark('status parsed');
  telemetry = status.telemetry;
  setText(document.getElementById('host'), status.hostname || 'gpulane');
  document.title = `${status.hostname || 'gpulane'} · gpulane`;
  const container = document.getElementById('gpus');
  const fresh = status.gpus.filter((g) => !cards.has(g.index));
  for (const g of fresh) cards.set(g.index, new GpuCard(container, g));
  if (first) performance.mark('cards built');
  if (fresh.length) {
    const width = Math.max(cards.get(fresh[0].index).chartBox.clientWidth, 300);
    for (const g of fresh) cards.get(g.index).startChart(width, g.history);
  }
  if (first) performance.mark('charts built');
  for (const g of status.gpus) cards.get(g.index).update(g);
  const nowS = status.time_s ?? Date.now() / 1000;
  renderQueue(document.getElementById('queue'), document.getElementById('queue-empty'), status.queue, nowS);
  const warnings = document.getElementById('warnings');
  warnings.replaceChildren(...status.warnings.map((w) => el('li', { text: w })));
  warnings.hidden = !status.warnings.length;
  if (!historyReady) {
    setupHistory(status.gpus);
    historyReady = true;
  }
  setText(document.getElementById('updated'), `updated ${clock()}`);
  document.body.dataset.ready = 'true';
  if (first) {
    performance.mark('ready set');
    // 'painted' (bench/web_bench.py's page load): the frame with the drawn page has been painted by
    // the main thread: its animation frame ran (style, layout, paint follow it in the same frame),
    // then the next task; raster and display after that are not counted.
    requestAnimationFrame(() => {
      const channel = new MessageChannel();
      channel.port1.onmessage = () => performance.mark('painted');
      channel.port2.postMessage(null);
    });
  }
}

async function refreshUsage() {
  if (!telemetry) {  // no report to ask for (or not known yet: asked again soon)
    setText(document.getElementById('usage-empty'), telemetry === false ? 'Telemetry is off in this daemon ([telemetry] enabled).' : '…');
    document.getElementById('usage-empty').hidden = false;
    if (telemetry === null) setTimeout(() => refreshUsage().catch(() => {}), 1000);
    return;
  }
  setText(document.getElementById('usage-empty'), 'No job has ended today.');
  const report = await getJson(`/api/v1/report?since_s=${localMidnightS()}&by=user`);
  renderUsage(document.getElementById('usage'), document.getElementById('usage-empty'), report.rows);
}

// Anomalies (issue 11, item 3): the daemon's current ones, then how many it raised in the last day.
async function refreshAnomalies() {
  const a = await getJson('/api/v1/anomalies');
  const box = document.getElementById('anomalies');
  if (!a.supported) {
    setText(box, 'Anomaly detection is off on this server (telemetry.enabled = false).');
    return;
  }
  const rows = a.anomalies.map((x) => el('div', { class: x.drains ? 'anomaly drains' : 'anomaly', text: `${x.kind}: ${x.message}` }));
  if (!rows.length) rows.push(el('span', { text: 'None now.' }));
  if (a.recent.length) rows.push(el('div', { class: 'muted', text: `${a.recent.length} event${a.recent.length === 1 ? '' : 's'} in the last 24 h (gpulane events --since 1d)` }));
  box.replaceChildren(...rows);
}

async function showPeers() {
  const server = await getJson('/api/v1/server');
  if (!server.peers.length) return;
  document.getElementById('peers').replaceChildren(...server.peers.map((url) => el('iframe', { src: url, title: url, loading: 'lazy' })));
  document.getElementById('peers-section').hidden = false;
}

// Runs `task` now and every `ms`, one at a time; a failure is shown until the next success. The
// promise: the first run done (succeeded or not).
function every(ms, task, shows = true) {
  const run = async () => {
    try {
      await task();
      if (shows) showError('');
    } catch (e) {
      if (shows) showError(e.message);
    }
    setTimeout(run, ms);
  };
  return run();
}

// The GPUs first: the other questions once the first status is drawn (or failed), so that their
// requests do not compete with it while the page loads.
every(STATUS_EVERY_MS, refreshStatus).then(() => {
  every(USAGE_EVERY_MS, refreshUsage, false);
  every(ANOMALIES_EVERY_MS, refreshAnomalies, false);
  showPeers().catch(() => {});
});
window.addEventListener('resize', () => {
  for (const c of cards.values()) c.chart.resize(Math.max(c.chartBox.clientWidth, 300));
});
