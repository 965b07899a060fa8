// History on demand: a GPU and a range; the last hour at full rate, longer ranges from the stored
// 10 s and 1 min rows (docs/web.md, /api/v1/history).
import { getJson } from './api.js';
import { el, setText } from './dom.js';
import { historyChart } from './charts.js';

const RESOLUTION_S = { '1h': 0, '1d': 10, '7d': 60, '30d': 60 };

export function setupHistory(gpus) {
  const select = document.getElementById('history-gpu');
  select.replaceChildren(...gpus.map((g) => el('option', { value: String(g.index), text: `GPU ${g.index}` })));
  const form = document.getElementById('history-form');
  const note = document.getElementById('history-note');
  const box = document.getElementById('history-chart');
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const range = document.getElementById('history-range').value;
    const gpu = gpus.find((g) => String(g.index) === select.value);
    setText(note, 'loading…');
    try {
      const h = await getJson(`/api/v1/history?gpu=${encodeURIComponent(select.value)}&since=${range}&resolution=${RESOLUTION_S[range]}`);
      historyChart(box, h.points, Math.max(box.clientWidth, 400), gpu?.reading?.memory_total_bytes);
      setText(note, `${h.points.length} points`);
    } catch (e) {
      setText(note, e.message);
    }
  });
}
