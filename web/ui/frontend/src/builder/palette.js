// The operator palette's pure parts: the catalogue grouped by family and
// filtered by a search, the best match for a search, and the short texts
// the palette and the node panel show about an operator.

/** FAMILY_NAMES are the headings of the catalogue's families. */
export const FAMILY_NAMES = { pipes: 'Pipes', sensor: 'Sensor numbers', pack: 'PACK data reduction', expr: 'Expressions' };

/** DRAG_TYPE is the drag data type of an operator dragged from the palette. */
export const DRAG_TYPE = 'application/x-slogfeed-operator';

/** MAX_QUERY bounds the search text the palette looks at. */
const MAX_QUERY = 64;

function norm(q) {
  return String(q ?? '')
    .slice(0, MAX_QUERY)
    .trim()
    .toLowerCase();
}

/**
 * paletteGroups groups operators by family, in catalogue order, keeping
 * those whose name contains query (case-insensitive; all of them for an
 * empty query). It returns [{family, label, ops}], without empty groups.
 */
export function paletteGroups(operators, query) {
  const q = norm(query);
  const groups = new Map();
  for (const o of Array.isArray(operators) ? operators : []) {
    if (!o || typeof o.name !== 'string') continue;
    if (q && !o.name.toLowerCase().includes(q)) continue;
    const family = String(o.family || 'other');
    if (!groups.has(family)) groups.set(family, { family, label: FAMILY_NAMES[family] || family, ops: [] });
    groups.get(family).ops.push(o);
  }
  return [...groups.values()];
}

/**
 * bestMatch is the operator a search names best: the one called query,
 * else the first whose name starts with it, else the first that contains
 * it (catalogue order); undefined when none does or query is empty.
 */
export function bestMatch(operators, query) {
  const q = norm(query);
  if (!q || !Array.isArray(operators)) return undefined;
  const named = operators.filter((o) => o && typeof o.name === 'string');
  return (
    named.find((o) => o.name.toLowerCase() === q) ||
    named.find((o) => o.name.toLowerCase().startsWith(q)) ||
    named.find((o) => o.name.toLowerCase().includes(q))
  );
}

/** inputsText says how many inputs operator info takes ('' when unknown). */
export function inputsText(info) {
  if (!info || !Number.isInteger(info.min_inputs) || !Number.isInteger(info.max_inputs)) return '';
  const { min_inputs: min, max_inputs: max } = info;
  if (max === 0) return 'Takes no input.';
  if (max < 0) return `Takes ${min} or more inputs, in the order they were connected.`;
  if (min === max) return `Takes ${min} input${min === 1 ? '' : 's'}.`;
  return `Takes ${min} to ${max} inputs.`;
}
