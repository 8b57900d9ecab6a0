// The chain builder's state and its translation to and from a pipe
// definition (transform.Pipe as JSON). Everything here is pure: the React
// components dispatch actions to reducer() and send toPipe(state).

/** Node ids as the server accepts them (transform/pipe.go nodeIDPattern). */
export const NODE_ID = /^[A-Za-z0-9_-]{1,64}$/;
/** Output slugs as the server accepts them (transform.SlugPattern). */
export const SLUG = /^[a-z0-9][a-z0-9._-]{0,63}$/;
/** Trigger kinds, in the order the UI offers them. */
export const TRIGGERS = ['update', 'mdpt', 'cron', 'manual'];

/** COLUMN and ROW space the nodes the builder places on the canvas. */
export const COLUMN = 220;
export const ROW = 110;
const COL = COLUMN;

/** emptyState is a new, unsaved pipe. */
export function emptyState() {
  return {
    name: '',
    description: '',
    slug: '',
    title: '',
    nodes: [],
    edges: [],
    outputFrom: '',
    trigger: { on: 'update', m: 0, cron: '' },
    // Fields of the definition the builder does not edit, kept as they were.
    outputExtra: {},
    // seq numbers the nodes' keys: a node's key stays when its id changes.
    seq: 0,
  };
}

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/**
 * clean returns v without undefined values (recursively): what JSON would
 * drop anyway, so two states compare equal by value.
 */
export function clean(v) {
  if (Array.isArray(v)) return v.map((x) => (x === undefined ? null : clean(x)));
  if (isObject(v)) {
    const out = {};
    for (const [k, x] of Object.entries(v)) {
      if (x !== undefined) out[k] = clean(x);
    }
    return out;
  }
  return v;
}

/**
 * fromPipe reads a pipe definition (as GET /api/v1/pipes/{id} returns it
 * in "pipe") into builder state. Nodes without a saved position are laid
 * out by depth. Malformed parts are skipped, never thrown on.
 */
export function fromPipe(pipe) {
  const s = emptyState();
  if (!isObject(pipe)) return s;
  s.name = str(pipe.name);
  s.description = str(pipe.description);
  const rawNodes = Array.isArray(pipe.nodes) ? pipe.nodes : [];
  for (const n of rawNodes) {
    if (!isObject(n)) continue;
    const node = { key: `n${++s.seq}`, id: str(n.id), op: str(n.op), config: isObject(n.config) ? clean(n.config) : {} };
    if (isObject(n.ui) && Number.isFinite(n.ui.x) && Number.isFinite(n.ui.y)) {
      node.x = n.ui.x;
      node.y = n.ui.y;
    }
    s.nodes.push(node);
  }
  const rawEdges = Array.isArray(pipe.edges) ? pipe.edges : [];
  for (const e of rawEdges) {
    if (isObject(e) && typeof e.from === 'string' && typeof e.to === 'string') {
      s.edges.push({ from: e.from, to: e.to });
    }
  }
  const out = isObject(pipe.output) ? pipe.output : {};
  s.slug = str(out.slug);
  s.title = str(out.title);
  s.outputFrom = str(out.from);
  const { from: _f, slug: _s, title: _t, ...extra } = out;
  s.outputExtra = clean(extra);
  const tr = isObject(pipe.trigger) ? pipe.trigger : {};
  s.trigger = {
    on: TRIGGERS.includes(tr.on) ? tr.on : 'update',
    m: Number.isInteger(tr.m) && tr.m > 0 ? tr.m : 0,
    cron: str(tr.cron),
  };
  const pos = autoLayout(s.nodes, s.edges);
  s.nodes = s.nodes.map((n) => (n.x === undefined ? { ...n, x: pos[n.id]?.x ?? 0, y: pos[n.id]?.y ?? 0 } : n));
  return s;
}

function str(v) {
  return typeof v === 'string' ? v : '';
}

/**
 * toPipe writes builder state as a pipe definition for POST/PUT
 * /api/v1/pipes and the preview routes. Empty optional fields are left
 * out, so toPipe(fromPipe(p)) gives p back for a definition in canonical
 * form.
 */
export function toPipe(state) {
  const p = {};
  if (state.name) p.name = state.name;
  if (state.description) p.description = state.description;
  p.nodes = state.nodes.map((n) => {
    const node = { id: n.id, op: n.op };
    const cfg = clean(n.config || {});
    if (Object.keys(cfg).length > 0) node.config = cfg;
    if (Number.isFinite(n.x) && Number.isFinite(n.y)) node.ui = { x: Math.round(n.x), y: Math.round(n.y) };
    return node;
  });
  p.edges = state.edges.map((e) => ({ from: e.from, to: e.to }));
  const output = {};
  if (state.outputFrom) output.from = state.outputFrom;
  output.slug = state.slug;
  if (state.title) output.title = state.title;
  Object.assign(output, clean(state.outputExtra || {}));
  p.output = output;
  const t = { on: state.trigger.on || 'update' };
  if (t.on === 'mdpt' && state.trigger.m > 0) t.m = state.trigger.m;
  if (t.on === 'cron') t.cron = state.trigger.cron;
  p.trigger = t;
  return p;
}

/**
 * nextNodeId names a new node of operator op: the op itself ("union"),
 * then "union2", "union3"… — the first not in taken. Characters a node
 * id may not hold are dropped.
 */
export function nextNodeId(op, taken) {
  const used = taken instanceof Set ? taken : new Set(taken);
  let base = String(op).replace(/[^A-Za-z0-9_-]/g, '').slice(0, 56) || 'node';
  if (!used.has(base)) return base;
  for (let i = 2; ; i++) {
    const id = base + i;
    if (!used.has(id)) return id;
  }
}

/**
 * checkNodeId says what is wrong with id as the new id of node current
 * ('' when nothing is).
 */
export function checkNodeId(id, current, nodes) {
  if (!NODE_ID.test(id)) return "a node id is 1 to 64 letters, digits, '_' or '-'";
  if (id !== current && nodes.some((n) => n.id === id)) return `another node is called ${id}`;
  return '';
}

/** sinks are the nodes no edge leaves, in definition order. */
export function sinks(state) {
  const from = new Set(state.edges.map((e) => e.from));
  return state.nodes.filter((n) => !from.has(n.id)).map((n) => n.id);
}

/** outputNode is the id of the node the pipe republishes, or '' when it is ambiguous. */
export function outputNode(state) {
  if (state.outputFrom) return state.outputFrom;
  const s = sinks(state);
  return s.length === 1 ? s[0] : '';
}

/** inputsOf lists the ids of the nodes with an edge into id, in edge order. */
export function inputsOf(state, id) {
  return state.edges.filter((e) => e.to === id).map((e) => e.from);
}

/**
 * wouldCycle says whether an edge from → to closes a cycle: whether to
 * already reaches from.
 */
export function wouldCycle(edges, from, to) {
  if (from === to) return true;
  const next = new Map();
  for (const e of edges) {
    if (!next.has(e.from)) next.set(e.from, []);
    next.get(e.from).push(e.to);
  }
  const seen = new Set();
  const stack = [to];
  while (stack.length) {
    const id = stack.pop();
    if (id === from) return true;
    if (seen.has(id)) continue;
    seen.add(id);
    for (const n of next.get(id) || []) stack.push(n);
  }
  return false;
}

/**
 * autoLayout places nodes in columns by their depth (the longest path
 * from a node without inputs) and rows by definition order within a
 * column. It returns {id: {x, y}}; nodes on a cycle go to the column
 * after the deepest one.
 */
export function autoLayout(nodes, edges) {
  const ids = nodes.map((n) => n.id);
  const known = new Set(ids);
  const indeg = new Map(ids.map((id) => [id, 0]));
  const outs = new Map(ids.map((id) => [id, []]));
  for (const e of edges) {
    if (!known.has(e.from) || !known.has(e.to)) continue;
    indeg.set(e.to, indeg.get(e.to) + 1);
    outs.get(e.from).push(e.to);
  }
  const depth = new Map();
  const queue = ids.filter((id) => indeg.get(id) === 0);
  for (const id of queue) depth.set(id, 0);
  while (queue.length) {
    const id = queue.shift();
    for (const n of outs.get(id)) {
      depth.set(n, Math.max(depth.get(n) ?? 0, depth.get(id) + 1));
      indeg.set(n, indeg.get(n) - 1);
      if (indeg.get(n) === 0) queue.push(n);
    }
  }
  const maxDepth = Math.max(-1, ...depth.values());
  const rows = new Map();
  const pos = {};
  for (const id of ids) {
    if (pos[id]) continue; // duplicate ids: the first wins
    const d = depth.has(id) && indeg.get(id) === 0 ? depth.get(id) : maxDepth + 1;
    const r = rows.get(d) ?? 0;
    rows.set(d, r + 1);
    pos[id] = { x: d * COL, y: r * ROW };
  }
  return pos;
}

/**
 * freeSpot is where a new node goes: right of the node at (x, y) when
 * given, else after the rightmost node, moved down until no node is
 * within half a cell.
 */
export function freeSpot(nodes, near) {
  let x;
  let y;
  if (near) {
    x = near.x + COL;
    y = near.y;
  } else if (nodes.length === 0) {
    x = 0;
    y = 0;
  } else {
    x = Math.max(...nodes.map((n) => n.x ?? 0)) + COL;
    y = 0;
  }
  const busy = (px, py) => nodes.some((n) => Math.abs((n.x ?? 0) - px) < COL / 2 && Math.abs((n.y ?? 0) - py) < ROW / 2);
  while (busy(x, y)) y += ROW;
  return { x, y };
}

/**
 * exampleConfig is a copy of the operator's example configuration, what
 * the node panel's "Fill with example" button puts in the form ({} when
 * the operator has none).
 */
export function exampleConfig(info) {
  return isObject(info?.example) ? structuredClone(info.example) : {};
}

/**
 * reducer applies one builder action to state and returns the new state
 * (the same object when nothing changed). Actions:
 *
 *   {type: 'load', state}
 *   {type: 'meta', field: 'name'|'slug'|'title'|'description', value}
 *   {type: 'addNode', op, config, id?, near?, at?, from?}
 *                                                    id defaults to nextNodeId; at {x, y}
 *                                                    places it there (a drop on the canvas),
 *                                                    else freeSpot(near); from adds the edge
 *                                                    from → the new node
 *   {type: 'removeNode', id}
 *   {type: 'renameNode', id, to}                     ignored unless checkNodeId passes
 *   {type: 'setConfig', id, config}
 *   {type: 'moveNode', id, x, y}
 *   {type: 'addEdge', from, to}                      no duplicates, no self-loops
 *   {type: 'removeEdge', from, to}
 *   {type: 'setInput', id, from, on}                 the "Inputs" checkboxes
 *   {type: 'outputFrom', id}                         '' = the sink node
 *   {type: 'trigger', on?, m?, cron?}
 */
export function reducer(state, action) {
  switch (action.type) {
    case 'load':
      return action.state;
    case 'meta':
      if (!['name', 'slug', 'title', 'description'].includes(action.field)) return state;
      return { ...state, [action.field]: String(action.value ?? '') };
    case 'addNode': {
      const id = action.id && checkNodeId(action.id, '', state.nodes) === '' ? action.id : nextNodeId(action.op, state.nodes.map((n) => n.id));
      const at = action.at;
      const spot = at && Number.isFinite(at.x) && Number.isFinite(at.y) ? { x: at.x, y: at.y } : freeSpot(state.nodes, action.near);
      const seq = (state.seq || 0) + 1;
      const next = { ...state, seq, nodes: [...state.nodes, { key: `n${seq}`, id, op: action.op, config: action.config || {}, x: spot.x, y: spot.y }] };
      return action.from ? reducer(next, { type: 'addEdge', from: action.from, to: id }) : next;
    }
    case 'removeNode': {
      if (!state.nodes.some((n) => n.id === action.id)) return state;
      return {
        ...state,
        nodes: state.nodes.filter((n) => n.id !== action.id),
        edges: state.edges.filter((e) => e.from !== action.id && e.to !== action.id),
        outputFrom: state.outputFrom === action.id ? '' : state.outputFrom,
      };
    }
    case 'renameNode': {
      const { id, to } = action;
      if (id === to || !state.nodes.some((n) => n.id === id) || checkNodeId(to, id, state.nodes) !== '') return state;
      const rn = (x) => (x === id ? to : x);
      return {
        ...state,
        nodes: state.nodes.map((n) => (n.id === id ? { ...n, id: to } : n)),
        edges: state.edges.map((e) => ({ from: rn(e.from), to: rn(e.to) })),
        outputFrom: rn(state.outputFrom),
      };
    }
    case 'setConfig':
      return { ...state, nodes: state.nodes.map((n) => (n.id === action.id ? { ...n, config: action.config } : n)) };
    case 'moveNode': {
      if (!Number.isFinite(action.x) || !Number.isFinite(action.y)) return state;
      const n = state.nodes.find((x) => x.id === action.id);
      if (!n || (n.x === action.x && n.y === action.y)) return state;
      return { ...state, nodes: state.nodes.map((x) => (x.id === action.id ? { ...x, x: action.x, y: action.y } : x)) };
    }
    case 'addEdge': {
      const { from, to } = action;
      const ids = new Set(state.nodes.map((n) => n.id));
      if (from === to || !ids.has(from) || !ids.has(to) || state.edges.some((e) => e.from === from && e.to === to)) return state;
      return { ...state, edges: [...state.edges, { from, to }] };
    }
    case 'removeEdge': {
      const edges = state.edges.filter((e) => !(e.from === action.from && e.to === action.to));
      return edges.length === state.edges.length ? state : { ...state, edges };
    }
    case 'setInput':
      return reducer(state, { type: action.on ? 'addEdge' : 'removeEdge', from: action.from, to: action.id });
    case 'outputFrom':
      return { ...state, outputFrom: String(action.id ?? '') };
    case 'trigger': {
      const t = { ...state.trigger };
      if (action.on !== undefined && TRIGGERS.includes(action.on)) t.on = action.on;
      if (action.m !== undefined) t.m = Number.isInteger(action.m) && action.m > 0 ? action.m : 0;
      if (action.cron !== undefined) t.cron = String(action.cron);
      return { ...state, trigger: t };
    }
    default:
      return state;
  }
}

/**
 * problems lists what keeps the definition from compiling, as far as the
 * builder can tell without the server: [{node?, field?, error}]. The live
 * preview waits until there are none; the server has the last word.
 */
export function problems(state, operators) {
  const byName = new Map((operators || []).map((o) => [o.name, o]));
  const out = [];
  const seen = new Set();
  let sources = 0;
  for (const n of state.nodes) {
    if (!NODE_ID.test(n.id)) out.push({ node: n.id, field: 'id', error: 'bad node id' });
    if (seen.has(n.id)) out.push({ node: n.id, field: 'id', error: 'duplicate node id' });
    seen.add(n.id);
    const info = byName.get(n.op);
    if (!info) {
      out.push({ node: n.id, error: `unknown operator ${n.op}` });
      continue;
    }
    if (n.op === 'source') {
      sources++;
      if (!String(n.config?.feed ?? '').trim()) out.push({ node: n.id, field: 'feed', error: 'choose the feed to read' });
    }
    const k = inputsOf(state, n.id).length;
    if (info.max_inputs === 0 && k > 0) out.push({ node: n.id, error: `a ${n.op} node takes no input` });
    else if (k < info.min_inputs) out.push({ node: n.id, error: `needs at least ${info.min_inputs} input(s)` });
    else if (info.max_inputs > 0 && k > info.max_inputs) out.push({ node: n.id, error: `takes at most ${info.max_inputs} input(s)` });
  }
  if (sources === 0) out.push({ field: 'nodes', error: 'add a source node' });
  const ids = new Set(state.nodes.map((n) => n.id));
  for (const e of state.edges) {
    if (!ids.has(e.from) || !ids.has(e.to)) out.push({ field: 'edges', error: `edge ${e.from} → ${e.to} names no node` });
  }
  if (hasCycle(state)) out.push({ field: 'edges', error: 'the edges form a cycle' });
  if (state.nodes.length > 0 && !outputNode(state)) out.push({ field: 'output.from', error: 'choose the node to republish' });
  if (state.outputFrom && !ids.has(state.outputFrom)) out.push({ field: 'output.from', error: `no node ${state.outputFrom}` });
  if (state.trigger.on === 'cron' && !state.trigger.cron.trim()) out.push({ field: 'trigger.cron', error: 'give a schedule' });
  return out;
}

function hasCycle(state) {
  const ids = state.nodes.map((n) => n.id);
  const indeg = new Map(ids.map((id) => [id, 0]));
  for (const e of state.edges) if (indeg.has(e.to) && indeg.has(e.from)) indeg.set(e.to, indeg.get(e.to) + 1);
  const queue = ids.filter((id) => indeg.get(id) === 0);
  let done = 0;
  while (queue.length) {
    const id = queue.pop();
    done++;
    for (const e of state.edges) {
      if (e.from === id && indeg.has(e.to)) {
        indeg.set(e.to, indeg.get(e.to) - 1);
        if (indeg.get(e.to) === 0) queue.push(e.to);
      }
    }
  }
  return done < new Set(ids).size;
}

/**
 * semanticKey is a string that changes exactly when the definition's
 * meaning does (not when a node is only moved): what the live preview
 * watches.
 */
export function semanticKey(state) {
  const p = toPipe(state);
  for (const n of p.nodes) delete n.ui;
  return JSON.stringify(p);
}

/**
 * sourceRef is how a source node names feed f of GET /api/v1/feeds:
 * sensor/NAME, pipe/SLUG or feed/ID (see transform.ParseRef).
 */
export function sourceRef(f) {
  if (!isObject(f)) return '';
  if (f.kind === 'sensor' && f.slug) return `sensor/${f.slug}`;
  if (f.kind === 'pipe' && f.slug) return `pipe/${f.slug}`;
  if (Number.isInteger(f.id) && f.id > 0) return `feed/${f.id}`;
  return '';
}

/** sourceOptions lists the feeds a source can read, as {ref, label}, sensors first. */
export function sourceOptions(feeds) {
  if (!Array.isArray(feeds)) return [];
  const rank = { sensor: 0, pipe: 1, remote: 2 };
  return feeds
    .map((f) => ({ ref: sourceRef(f), label: String(f?.title || f?.slug || f?.url || ''), kind: String(f?.kind || ''), order: rank[f?.kind] ?? 3 }))
    .filter((o) => o.ref)
    .sort((a, b) => a.order - b.order || a.ref.localeCompare(b.ref))
    .map(({ ref, label, kind }) => ({ ref, label, kind }));
}

/**
 * slugify proposes an output slug from a pipe's name: lower case, accents
 * dropped, runs of other characters as one '-', at most 64 characters
 * ('' when nothing is left).
 */
export function slugify(name) {
  return String(name ?? '')
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9._-]+/g, '-')
    .replace(/^[^a-z0-9]+/, '')
    .slice(0, 64)
    .replace(/[-._]+$/, '');
}
