// Live charts of the last hour, one per GPU (uPlot): utilisation and memory in percent, filled from
// /api/v1/history at start and extended by each status reading.
import uPlot from 'uplot';

const WINDOW_S = 3600;
// The y axis's numbers (0-100 %) written without Intl: the bundle makes uPlot's Intl formatter lazy
// (web/bundle.mjs), and ICU's first load costs a fresh page tens of ms.
const AXES = [
  { stroke: '#8a94a3', grid: { stroke: '#2a313a' } },
  { stroke: '#8a94a3', grid: { stroke: '#2a313a' }, size: 40, values: (u, splits) => splits.map((v) => (v == null ? '' : String(v))) },
];
const SERIES = [
  {},
  { label: 'util %', stroke: '#4fc3f7', width: 1.5, value: (u, v) => (v == null ? '–' : `${v.toFixed(0)} %`) },
  { label: 'memory %', stroke: '#ffb74d', width: 1.5, value: (u, v) => (v == null ? '–' : `${v.toFixed(0)} %`) },
];

// Stored rows carry no total: the GPU's from its status (`totalBytes`).
function memoryPct(p, totalBytes) {
  const total = p.memory_total_bytes ?? totalBytes;
  return p.memory_used_bytes !== undefined && total ? (100 * p.memory_used_bytes) / total : null;
}

// Columns of points ({t: [...], util_gpu_pct: [...], memory_used_bytes: [...], memory_total_bytes:
// [...]}, /api/v1/status?history=1h&columns=1) as the chart's data: [times, util %, memory %].
function chartData(c) {
  const t = c.t || [], util = c.util_gpu_pct || [], used = c.memory_used_bytes || [], total = c.memory_total_bytes || [];
  const u = new Array(t.length), m = new Array(t.length);
  for (let i = 0; i < t.length; i++) {
    u[i] = util[i] ?? null;
    m[i] = used[i] != null && total[i] ? (100 * used[i]) / total[i] : null;
  }
  return [t, u, m];
}

export class LiveChart {
  // Drawn once with `points` (the last hour: points, or their columns), then extended by add().
  constructor(container, width, points = []) {
    this.container = container;
    this.data = [[], [], []];
    if (Array.isArray(points)) this.append(points);
    else this.appendData(chartData(points));
    this.plot = new uPlot(
      { width, height: 120, series: SERIES, legend: { show: true },
        scales: { y: { range: [0, 100] } },
        axes: AXES },
      this.data, container);
  }

  // Adds points (telemetry points: t, util_gpu_pct, memory_*), only those newer than the last one.
  add(points) {
    if (!this.append(points)) return;
    this.plot.setData(this.data);
  }

  // add() without drawing; whether anything was added.
  append(points) {
    const [ts, util, mem] = this.data;
    let changed = false;
    for (const p of points) {
      if (p.t === undefined || (ts.length && p.t <= ts[ts.length - 1])) continue;
      ts.push(p.t);
      util.push(p.util_gpu_pct ?? null);
      mem.push(memoryPct(p));
      changed = true;
    }
    if (!changed) return false;
    return this.trim();
  }

  // Drops what is older than the window; sets the container's data-points and data-last-util.
  trim() {
    const [ts, util] = this.data;
    const oldest = ts[ts.length - 1] - WINDOW_S;
    let drop = 0;
    while (drop < ts.length && ts[drop] < oldest) drop++;
    if (drop) for (const a of this.data) a.splice(0, drop);
    this.container.dataset.points = String(ts.length);
    this.container.dataset.lastUtil = String(util[util.length - 1] ?? '');
    return true;
  }

  // append() of chart data [times, util %, memory %] in time order (the first answer's columns).
  appendData([t, u, m]) {
    const [ts, util, mem] = this.data;
    let changed = false;
    for (let i = 0; i < t.length; i++) {
      if (t[i] == null || (ts.length && t[i] <= ts[ts.length - 1])) continue;
      ts.push(t[i]);
      util.push(u[i]);
      mem.push(m[i]);
      changed = true;
    }
    return changed && this.trim();
  }

  resize(width) {
    this.plot.setSize({ width, height: 120 });
  }
}

// A chart of stored history (on demand): util and memory over any range.
export function historyChart(container, points, width, totalBytes) {
  container.replaceChildren();
  const data = [points.map((p) => p.t), points.map((p) => p.util_gpu_pct ?? null), points.map((p) => memoryPct(p, totalBytes))];
  return new uPlot(
    { width, height: 260, series: SERIES, scales: { y: { range: [0, 100] } },
      axes: AXES },
    data, container);
}
