// The answer of the preview routes (transform.Preview) made ready to show.

function validTime(s) {
  if (typeof s !== 'string' || s === '' || s.startsWith('0001-01-01')) return null;
  const d = new Date(s);
  return Number.isNaN(d.getTime()) ? null : d;
}

function fmtValue(v) {
  if (typeof v !== 'number' || !Number.isFinite(v)) return '';
  if (Number.isInteger(v) || Math.abs(v) >= 1000) return String(Math.round(v * 1000) / 1000);
  return String(Number.parseFloat(v.toPrecision(4)));
}

/**
 * itemRow is one preview item as a table row: its time (the reading's
 * observation time, else its publish time) in UTC, its title, and its
 * value with the unit (or a digest's mean and count).
 */
export function itemRow(item) {
  const it = item !== null && typeof item === 'object' ? item : {};
  const r = it.reading !== null && typeof it.reading === 'object' ? it.reading : null;
  const d = validTime(r?.time) || validTime(it.published) || validTime(it.updated);
  const row = {
    iso: d ? d.toISOString() : '',
    time: d ? d.toISOString().replace('T', ' ').replace(/(\.\d+)?Z$/, ' UTC') : '',
    title: typeof it.title === 'string' && it.title ? it.title : String(it.id ?? ''),
    value: '',
  };
  if (r && typeof r.value === 'number') {
    row.value = fmtValue(r.value) + (typeof r.unit === 'string' && r.unit ? ` ${r.unit}` : '');
  } else if (it.digest && typeof it.digest === 'object' && Number(it.digest.count) > 0) {
    const g = it.digest;
    row.value = `mean ${fmtValue(g.sum / g.count)} of ${g.count} (${fmtValue(g.min)} to ${fmtValue(g.max)})`;
  }
  return row;
}

/**
 * indexPreview sorts a preview answer by node: {nodes: {id: NodeOutput},
 * counts: {id: count}, output: [items], error}.
 */
export function indexPreview(pv) {
  const res = { nodes: {}, counts: {}, output: [], error: '' };
  if (pv === null || typeof pv !== 'object') return res;
  for (const n of Array.isArray(pv.nodes) ? pv.nodes : []) {
    if (!n || typeof n.node !== 'string') continue;
    const items = Array.isArray(n.items) ? n.items : [];
    const count = Number.isInteger(n.count) && n.count >= 0 ? n.count : items.length;
    res.nodes[n.node] = { items, count, error: typeof n.error === 'string' ? n.error : '', op: n.op };
    res.counts[n.node] = count;
  }
  res.output = Array.isArray(pv.output) ? pv.output : [];
  res.error = typeof pv.error === 'string' ? pv.error : '';
  return res;
}
