// Numbers for people: the units the CLI prints (GiB, W, %, durations like "2m 10s").
const GiB = 1024 ** 3;

export const gib = (bytes) => (bytes === undefined ? '?' : (bytes / GiB).toFixed(1));
export const shortGib = (bytes) => (bytes === undefined ? '?' : `${(bytes / GiB).toFixed(1)}G`);
export const watts = (mw) => (mw === undefined ? '?' : Math.round(mw / 1000).toString());
export const pct = (v) => (v === undefined ? '?' : `${Math.round(v)} %`);

export function duration(seconds) {
  if (seconds === undefined || !isFinite(seconds)) return '?';
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, '0')}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}

export function kwh(joules) {
  if (joules === undefined) return '?';
  return joules >= 3.6e6 ? `${(joules / 3.6e6).toFixed(2)} kWh` : `${(joules / 3600).toFixed(1)} Wh`;
}

// "14:05:09", the browser's local time (not toLocaleTimeString: no Intl, whose first use loads ICU).
export function clock(date = new Date()) {
  return [date.getHours(), date.getMinutes(), date.getSeconds()].map((n) => String(n).padStart(2, '0')).join(':');
}

// Seconds since the epoch of the browser's last local midnight ("usage today").
export function localMidnightS(now = new Date()) {
  const midnight = new Date(now.getFullYear(), now.getMonth(), now.getDate());
  return Math.floor(midnight.getTime() / 1000);
}
