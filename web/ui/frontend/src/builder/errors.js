// Problems the server reports about a pipe definition (a 400's details:
// [{node, op, field, error}]) sorted by where the builder shows them.
import { ApiError } from '../lib/api.js';

const NODE_FIELD = /^nodes\[(\d+)\](?:\.(\w+))?$/;
const EDGE_FIELD = /^edges\[(\d+)\](?:\.(from|to))?$/;
/** The server's error about a cycle: "the edges form a cycle through a, b". */
const CYCLE = /\bcycle through (.+)$/;

/**
 * Node-level fields of a *NodeError that are not configuration fields:
 * an unknown "op", a "config" that is not an object.
 */
const NODE_LEVEL = new Set(['op', 'config']);

/**
 * errorMap sorts details for display. pipe is the definition that was
 * sent (toPipe), so "nodes[3].id" and "edges[1].to" find their node. It
 * returns
 *
 *   {
 *     list:  [{node, field, error, text}]          every detail, for the alert region
 *     pipe:  {field: [messages]}                   output.slug, trigger.cron, name, edges…
 *     nodes: {id: {node: [messages],               about the node itself (its id, op, inputs)
 *                  fields: {path: [messages]},     about one configuration field
 *                  count}}                         how many problems name the node
 *   }
 */
export function errorMap(details, pipe) {
  const res = { list: [], pipe: {}, nodes: {} };
  if (!Array.isArray(details)) return res;
  const nodes = Array.isArray(pipe?.nodes) ? pipe.nodes : [];
  const edges = Array.isArray(pipe?.edges) ? pipe.edges : [];
  const entry = (id) => {
    if (!res.nodes[id]) res.nodes[id] = { node: [], fields: {}, count: 0 };
    return res.nodes[id];
  };
  const add = (map, key, msg) => {
    (map[key] ||= []).push(msg);
  };
  for (const d of details) {
    if (d === null || typeof d !== 'object') continue;
    const node = typeof d.node === 'string' ? d.node : '';
    const field = typeof d.field === 'string' ? d.field : '';
    const error = typeof d.error === 'string' && d.error ? d.error : 'invalid';
    res.list.push({ node, field, error, text: describe(node, typeof d.op === 'string' ? d.op : '', field, error) });
    if (node) {
      const e = entry(node);
      e.count++;
      if (!field || NODE_LEVEL.has(field)) e.node.push(field ? `${field}: ${error}` : error);
      else add(e.fields, field, error);
      continue;
    }
    let m = NODE_FIELD.exec(field);
    if (m && nodes[Number(m[1])]) {
      const id = String(nodes[Number(m[1])].id ?? '');
      const e = entry(id);
      e.count++;
      e.node.push(error);
      if (m[2] === 'id') add(e.fields, '#id', error);
      continue;
    }
    m = EDGE_FIELD.exec(field);
    if (m && edges[Number(m[1])]) {
      const edge = edges[Number(m[1])];
      const id = m[2] === 'from' ? edge.from : edge.to;
      add(res.pipe, 'edges', `${edge.from} → ${edge.to}: ${error}`);
      if (nodes.some((n) => n.id === id)) {
        const e = entry(id);
        e.count++;
        e.node.push(`input from ${edge.from}: ${error}`);
      }
      continue;
    }
    add(res.pipe, field, error);
    // A cycle names its nodes: each gets the error too.
    m = field === 'edges' ? CYCLE.exec(error) : null;
    if (m) {
      const on = new Set(m[1].split(', '));
      for (const n of nodes) {
        const id = String(n?.id ?? '');
        if (!on.has(id)) continue;
        const e = entry(id);
        e.count++;
        e.node.push(error);
      }
    }
  }
  return res;
}

function describe(node, op, field, error) {
  let where = '';
  if (node) where = `node ${node}${op ? ` (${op})` : ''}`;
  if (field) where += `${where ? ', ' : ''}${field}`;
  return where ? `${where}: ${error}` : error;
}

/**
 * parentPath is path without its last segment ("rules[2].value" →
 * "rules[2]" → "rules" → ""); map keys holding dots split too.
 */
export function parentPath(path) {
  const m = /^(.*?)(\[\d+\]|\.[^.[\]]*)$/.exec(path);
  return m ? m[1] : '';
}

/**
 * placeErrors assigns a node's field errors to the form's controls: each
 * to the control of its path, else to the nearest control above it (Go's
 * JSON decoder names "rules.value" for a type error in rules[2].value),
 * else to rest, shown at the top of the form. paths are the controls'
 * paths (see controls in schema.js).
 */
export function placeErrors(fields, paths) {
  const known = new Set(paths);
  const byPath = {};
  const rest = [];
  for (const [path, msgs] of Object.entries(fields || {})) {
    if (path === '#id') continue;
    let p = path;
    while (p !== '' && !known.has(p)) p = parentPath(p);
    if (p === '') {
      for (const m of msgs) rest.push(`${path}: ${m}`);
      continue;
    }
    for (const m of msgs) (byPath[p] ||= []).push(p === path ? m : `${path}: ${m}`);
  }
  return { byPath, rest };
}

/**
 * errorState keeps what a failed request says, with the definition it
 * sent (to place "nodes[3].id" and "edges[1].to"): {message, details,
 * pipe, status}. A 409 about the slug becomes a detail on output.slug, so
 * it shows next to the Slug box.
 */
export function errorState(err, pipe) {
  if (!(err instanceof ApiError)) return { message: String(err?.message || err), details: [], pipe, status: 0 };
  let details = err.details;
  if (err.status === 409 && details.length === 0 && /slug/i.test(err.message)) details = [{ field: 'output.slug', error: err.message }];
  return { message: err.message, details, pipe, status: err.status };
}
