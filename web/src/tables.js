// The queue (with why each job waits) and today's usage by user.
import { el } from './dom.js';
import { duration, kwh, pct, shortGib } from './format.js';

function gpusOf(job) {
  if (job.mig_profile) return `${job.gpus}x${job.mig_profile}`;
  return job.mem_bytes ? `${job.gpus}x${shortGib(job.mem_bytes)}` : String(job.gpus);
}

function whereOrWhy(job) {
  if (job.state === 'running' && job.gpu_indices) return `GPU ${job.gpu_indices.join(',')}`;
  return job.reason || '';
}

export function renderQueue(table, empty, jobs, nowS) {
  const rows = jobs.map((job) => el('tr', { 'data-job': job.id },
    el('td', { text: job.id }),
    el('td', { text: job.user }),
    el('td', { text: job.name || '', title: job.command || '' }),
    el('td', { text: gpusOf(job) }),
    el('td', { class: `state-${job.state}`, text: job.state }),
    el('td', { text: duration(nowS - (job.start_time_s ?? job.submit_time_s)) }),
    el('td', { class: 'reason', text: whereOrWhy(job) })));
  table.tBodies[0].replaceChildren(...rows);
  empty.hidden = jobs.length > 0;
}

export function renderUsage(table, empty, rows) {
  table.tBodies[0].replaceChildren(...rows.map((r) => el('tr', { 'data-user': r.key },
    el('td', { text: r.key }),
    el('td', { text: String(r.jobs) }),
    el('td', { text: (r.gpu_s / 3600).toFixed(2) }),
    el('td', { text: kwh(r.energy_j) }),
    el('td', { text: pct(r.mean_util_pct) }),
    el('td', { text: r.idle_fraction === undefined ? '?' : pct(100 * r.idle_fraction) }),
    el('td', { text: duration(r.mean_wait_s) }))));
  empty.hidden = rows.length > 0;
}
