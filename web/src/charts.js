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

export class LiveChart {
  // Drawn once with `points` (the last hour), then extended by add().
  constructor(container, width, points = []) {
    this.container = container;
    this.data = [[], [], []];
    this.append(points);
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
    const oldest = ts[ts.length - 1] - WINDOW_S;
    let drop = 0;
    while (drop < ts.length && ts[drop] < oldest) drop++;
    if (drop) for (const a of this.data) a.splice(0, drop);
    this.container.dataset.points = String(ts.length);
    this.container.dataset.lastUtil = String(util[util.length - 1] ?? '');
    return true;
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
