// The feed page's data (the #feed-data JSON the Go page embeds) turned
// into chart series, histogram bins and text summaries. Pure: no DOM.

function finite(v) {
  return typeof v === 'number' && Number.isFinite(v);
}

/**
 * parseFeedData reads the page's JSON defensively: anything malformed is
 * dropped, never thrown on. Times are unix milliseconds; polls and
 * readings come back sorted oldest first.
 */
export function parseFeedData(text) {
  let raw;
  try {
    raw = JSON.parse(text);
  } catch {
    raw = null;
  }
  const obj = raw !== null && typeof raw === 'object' && !Array.isArray(raw) ? raw : {};
  const f = obj.feed !== null && typeof obj.feed === 'object' ? obj.feed : {};
  const feed = {
    id: finite(f.id) ? f.id : 0,
    title: typeof f.title === 'string' ? f.title : '',
    policy: typeof f.policy === 'string' ? f.policy : '',
    unit: typeof f.unit === 'string' ? f.unit : '',
  };
  const polls = (Array.isArray(obj.polls) ? obj.polls : [])
    .filter((p) => p !== null && typeof p === 'object' && finite(p.t))
    .map((p) => ({
      t: p.t,
      hit: p.hit === true,
      latency: (Array.isArray(p.latency_s) ? p.latency_s : []).filter(finite),
      published: (Array.isArray(p.published) ? p.published : []).filter(finite),
    }))
    .sort((a, b) => a.t - b.t);
  const readings = (Array.isArray(obj.readings) ? obj.readings : [])
    .filter((r) => r !== null && typeof r === 'object' && finite(r.t) && finite(r.v))
    .map((r) => ({ t: r.t, v: r.v }))
    .sort((a, b) => a.t - b.t);
  return { feed, polls, readings };
}

/**
 * Timeline rows: the y value of each series, so hits, misses and publish
 * times sit on their own lines.
 */
export const ROW_HIT = 2;
export const ROW_MISS = 1;
export const ROW_PUBLISHED = 0;

/**
 * timelineData aligns polls and publish times on one x axis (unix
 * seconds, as uPlot wants): [xs, hits, misses, published], where a series
 * holds its row at the times it has a point and null elsewhere.
 */
export function timelineData(polls) {
  const at = new Map(); // ms → {hit, miss, pub}
  const mark = (t, k) => {
    let e = at.get(t);
    if (!e) at.set(t, (e = {}));
    e[k] = true;
  };
  for (const p of polls) {
    mark(p.t, p.hit ? 'hit' : 'miss');
    for (const t of p.published) mark(t, 'pub');
  }
  const ts = [...at.keys()].sort((a, b) => a - b);
  const xs = [];
  const hits = [];
  const misses = [];
  const pubs = [];
  for (const t of ts) {
    const e = at.get(t);
    xs.push(t / 1000);
    hits.push(e.hit ? ROW_HIT : null);
    misses.push(e.miss ? ROW_MISS : null);
    pubs.push(e.pub ? ROW_PUBLISHED : null);
  }
  return [xs, hits, misses, pubs];
}

/** niceStep rounds a raw bin width up to 1, 2, 2.5 or 5 times a power of ten. */
export function niceStep(raw) {
  if (!(raw > 0) || !Number.isFinite(raw)) return 1;
  const p = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 2.5, 5, 10]) {
    if (m * p >= raw * (1 - 1e-9)) return m * p;
  }
  return 10 * p;
}

/** niceNear is the 1, 2, 2.5 or 5 times a power of ten nearest raw (in ratio). */
export function niceNear(raw) {
  if (!(raw > 0) || !Number.isFinite(raw)) return 1;
  const p = 10 ** Math.floor(Math.log10(raw));
  let best = p;
  for (const m of [1, 2, 2.5, 5, 10]) {
    if (Math.abs(Math.log((m * p) / raw)) < Math.abs(Math.log(best / raw))) best = m * p;
  }
  return best;
}

/** quantile of sorted values (linear interpolation); NaN when empty. */
export function quantile(sorted, q) {
  if (sorted.length === 0) return NaN;
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}

/**
 * histogram bins values (non-finite ones ignored) into equal-width bins:
 * the Freedman–Diaconis width (Sturges' rule when the interquartile
 * range is zero), rounded to the nearest nice step, then widened until
 * there are at most maxBins bins. It returns
 * {edges, counts}: counts[i] values lie in [edges[i], edges[i+1]), the
 * last bin including its upper edge. No values: no bins.
 */
export function histogram(values, { minBins = 1, maxBins = 40 } = {}) {
  const v = values.filter(finite).sort((a, b) => a - b);
  if (v.length === 0) return { edges: [], counts: [] };
  const lo = v[0];
  const hi = v[v.length - 1];
  if (lo === hi) {
    const w = niceStep(Math.abs(lo) / 10 || 1);
    const start = Math.floor(lo / w) * w;
    return { edges: [start, start + w], counts: [v.length] };
  }
  const iqr = quantile(v, 0.75) - quantile(v, 0.25);
  let width = iqr > 0 ? (2 * iqr) / Math.cbrt(v.length) : (hi - lo) / (Math.ceil(Math.log2(v.length)) + 1);
  const span = hi - lo;
  width = Math.min(Math.max(width, span / maxBins), span / minBins);
  let step = niceNear(width);
  let start = Math.floor(lo / step + 1e-9) * step;
  const bins = () => Math.max(1, Math.ceil((hi - start) / step - 1e-9));
  let n = bins();
  while (n > maxBins) {
    step = niceStep(step * 1.5);
    start = Math.floor(lo / step + 1e-9) * step;
    n = bins();
  }
  const edges = [];
  for (let i = 0; i <= n; i++) edges.push(round(start + i * step));
  const counts = new Array(n).fill(0);
  for (const x of v) {
    let i = Math.floor((x - start) / step);
    if (i >= n) i = n - 1;
    if (i < 0) i = 0;
    // Floating point: keep x within its bin's edges.
    while (i > 0 && x < edges[i]) i--;
    while (i < n - 1 && x >= edges[i + 1]) i++;
    counts[i]++;
  }
  return { edges, counts };
}

function round(x) {
  return Number.parseFloat(x.toPrecision(12));
}

/** latencies gathers every latency of the polls. */
export function latencies(polls) {
  const out = [];
  for (const p of polls) out.push(...p.latency);
  return out;
}

/** fmtNumber writes a number with at most 3 significant decimals. */
export function fmtNumber(x) {
  if (!finite(x)) return '–';
  if (Math.abs(x) >= 1000 || Number.isInteger(x)) return String(Math.round(x * 1000) / 1000);
  return String(Number.parseFloat(x.toPrecision(3)));
}

/** fmtSeconds writes a duration in s, min or h. */
export function fmtSeconds(s) {
  if (!finite(s)) return '–';
  const a = Math.abs(s);
  if (a < 120) return `${fmtNumber(s)} s`;
  if (a < 7200) return `${fmtNumber(s / 60)} min`;
  return `${fmtNumber(s / 3600)} h`;
}

function fmtTime(ms) {
  return new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
}

/** timelineSummary is the text alternative of the timeline chart. */
export function timelineSummary(polls) {
  if (polls.length === 0) return 'Timeline of polls and publish times: no polls yet.';
  const hits = polls.filter((p) => p.hit).length;
  const pubs = polls.reduce((n, p) => n + p.published.length, 0);
  return (
    `Timeline of ${polls.length} poll${polls.length === 1 ? '' : 's'} from ${fmtTime(polls[0].t)} to ${fmtTime(polls[polls.length - 1].t)}: ` +
    `${hits} hit${hits === 1 ? '' : 's'}, ${polls.length - hits} miss${polls.length - hits === 1 ? '' : 'es'}, ` +
    `${pubs} publish time${pubs === 1 ? '' : 's'}.`
  );
}

/** latencySummary is the text alternative of the latency histogram. */
export function latencySummary(values) {
  const v = values.filter(finite).sort((a, b) => a - b);
  if (v.length === 0) return 'Latency histogram: no latencies measured yet.';
  return (
    `Latency histogram of ${v.length} item${v.length === 1 ? '' : 's'}: median ${fmtSeconds(quantile(v, 0.5))}, ` +
    `90th percentile ${fmtSeconds(quantile(v, 0.9))}, from ${fmtSeconds(v[0])} to ${fmtSeconds(v[v.length - 1])}.`
  );
}

/** valuesSummary is the text alternative of the readings chart. */
export function valuesSummary(readings, unit) {
  if (readings.length === 0) return 'Sensor values: no readings yet.';
  const u = unit ? ` ${unit}` : '';
  let min = Infinity;
  let max = -Infinity;
  for (const r of readings) {
    min = Math.min(min, r.v);
    max = Math.max(max, r.v);
  }
  const last = readings[readings.length - 1];
  return (
    `Sensor values: ${readings.length} reading${readings.length === 1 ? '' : 's'} from ${fmtTime(readings[0].t)} to ${fmtTime(last.t)}, ` +
    `between ${fmtNumber(min)}${u} and ${fmtNumber(max)}${u}; the latest ${fmtNumber(last.v)}${u}.`
  );
}

/** valuesData is the readings as uPlot data: [unix seconds, values]. */
export function valuesData(readings) {
  return [readings.map((r) => r.t / 1000), readings.map((r) => r.v)];
}

/** histogramData is bins as uPlot data: [bin centres, counts]. */
export function histogramData(h) {
  const xs = [];
  for (let i = 0; i < h.counts.length; i++) xs.push(round((h.edges[i] + h.edges[i + 1]) / 2));
  return [xs, h.counts.slice()];
}
