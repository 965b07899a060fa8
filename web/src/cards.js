// A card per GPU in gpustat's compact style: index, name, temperature, utilisation, memory,
// power, who uses it (user(memory) per process, and the gpulane jobs on it), and its live chart.
import { el, setText } from './dom.js';
import { gib, pct, shortGib, watts } from './format.js';
import { LiveChart } from './charts.js';

const HOT_C = 80;

function bar(kind) {
  const fill = el('div');
  return [el('div', { class: `bar ${kind}` }, fill), fill];
}

export class GpuCard {
  constructor(parent, gpu) {
    this.index = gpu.index;
    this.name = el('span');
    this.bus = el('span', { class: 'muted' });
    this.temp = el('span', { class: 'temp' });
    this.util = el('span', { class: 'gpu-util' });
    this.memory = el('span', { class: 'gpu-memory' });
    this.power = el('span', { class: 'gpu-power' });
    [this.utilBar, this.utilFill] = bar('util');
    [this.memBar, this.memFill] = bar('mem');
    this.users = el('div', { class: 'gpu-users' });
    this.chartBox = el('div', { class: 'gpu-chart' });
    this.node = el('article', { class: 'gpu', 'data-gpu': String(gpu.index), 'aria-label': `GPU ${gpu.index}` },
      el('div', { class: 'gpu-head' }, el('span', {}, el('span', { class: 'gpu-index', text: `[${gpu.index}]` }), ' ', this.name), this.bus),
      el('div', { class: 'gpu-stats' }, this.temp, this.util, this.memory, this.power),
      this.utilBar, this.memBar, this.users, this.chartBox);
    parent.append(this.node);
    this.chart = null;
  }

  // The live chart, `width` pixels wide, drawn once with `points` (separate from the constructor:
  // the page lays out every new card first and measures one, instead of one layout per card).
  startChart(width, points) {
    this.chart = new LiveChart(this.chartBox, width, points || []);
  }

  update(gpu) {
    const r = gpu.reading || {};
    setText(this.name, gpu.name || 'GPU');
    setText(this.bus, gpu.pci_bus_id || '');
    setText(this.temp, r.temperature_c === undefined ? '?°C' : `${r.temperature_c}°C`);
    this.temp.classList.toggle('hot', (r.temperature_c ?? 0) >= HOT_C);
    setText(this.util, pct(r.util_gpu_pct));
    this.util.dataset.value = r.util_gpu_pct === undefined ? '' : String(r.util_gpu_pct);
    setText(this.memory, `${gib(r.memory_used_bytes)} / ${gib(r.memory_total_bytes)} GiB`);
    setText(this.power, r.power_mw === undefined ? '? W' : `${watts(r.power_mw)} / ${watts(r.power_limit_mw)} W`);
    this.utilFill.style.width = `${Math.min(100, r.util_gpu_pct ?? 0)}%`;
    const memPct = r.memory_total_bytes ? (100 * (r.memory_used_bytes ?? 0)) / r.memory_total_bytes : 0;
    this.memFill.style.width = `${Math.min(100, memPct)}%`;
    this.renderUsers(gpu);
    if (gpu.error) setText(this.bus, `error: ${gpu.error}`);
    if (r.t !== undefined) this.chart.add([r]);
  }

  // "alice(3.0G) bob(1.2G) · job 12 alice" — processes as gpustat shows them, then the leases' jobs.
  renderUsers(gpu) {
    const parts = [];
    for (const p of gpu.processes || []) {
      const who = `${p.user ?? `pid ${p.pid}`}(${shortGib(p.memory_bytes)})`;
      parts.push(el('span', { title: p.cmdline || p.command || `pid ${p.pid}`, text: who }), ' ');
    }
    for (const j of gpu.jobs || []) parts.push(el('span', { class: 'muted', text: `job ${j.job_text || j.job_id} ${j.user}` }), ' ');
    if (!parts.length) parts.push(el('span', { class: 'free', text: gpu.processes ? 'free' : 'processes unknown' }));
    const key = JSON.stringify([gpu.processes, gpu.jobs]);
    if (this.users.dataset.key !== key) {
      this.users.replaceChildren(...parts);
      this.users.dataset.key = key;
    }
  }
}
