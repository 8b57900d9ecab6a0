import { describe, expect, it } from 'vitest';
import catalogue from '../testdata/operators.json';
import {
  autoLayout,
  COLUMN,
  ROW,
  checkNodeId,
  clean,
  exampleConfig,
  emptyState,
  freeSpot,
  fromPipe,
  inputsOf,
  nextNodeId,
  outputNode,
  problems,
  reducer,
  semanticKey,
  sinks,
  slugify,
  sourceOptions,
  sourceRef,
  toPipe,
  wouldCycle,
} from './graph.js';

const ops = catalogue.operators;

// The README's example pipe, with positions, as the server stores it.
const readmePipe = {
  name: 'Field mean temperature',
  nodes: [
    { id: 'north', op: 'source', config: { feed: 'sensor/field-north' }, ui: { x: 0, y: 0 } },
    { id: 'east', op: 'source', config: { feed: 'sensor/field-east' }, ui: { x: 0, y: 110 } },
    { id: 'south', op: 'source', config: { feed: 'sensor/field-south' }, ui: { x: 0, y: 220 } },
    { id: 'all', op: 'union', ui: { x: 220, y: 0 } },
    { id: 'cal', op: 'calibrate', config: { sensors: { 'field-east': { offset: -0.4 } } }, ui: { x: 440, y: 0 } },
    { id: 'mean', op: 'join', config: { by: 'sensor', stat: 'mean', tolerance: '5s', min: 3, sensor: 'field' }, ui: { x: 660, y: 0 } },
  ],
  edges: [
    { from: 'north', to: 'all' },
    { from: 'east', to: 'all' },
    { from: 'south', to: 'all' },
    { from: 'all', to: 'cal' },
    { from: 'cal', to: 'mean' },
  ],
  output: { slug: 'field-mean', title: 'Field mean temperature' },
  trigger: { on: 'update' },
};

function build(...actions) {
  return actions.reduce(reducer, emptyState());
}

describe('fromPipe / toPipe', () => {
  const cases = [
    { name: 'README pipe', pipe: readmePipe },
    {
      name: 'mdpt trigger with m, explicit output, extra output fields',
      pipe: {
        name: 'two',
        description: 'a pipe',
        nodes: [
          { id: 'a', op: 'source', config: { feed: 'feed/3', backlog: 5 }, ui: { x: 10, y: 20 } },
          { id: 'b', op: 'source', config: { feed: 'pipe/other' }, ui: { x: 10, y: 140 } },
          { id: 'm', op: 'merge', config: { by: 'published', desc: true }, ui: { x: 240, y: 60 } },
          { id: 't', op: 'tail', config: { count: 3 }, ui: { x: 460, y: 60 } },
        ],
        edges: [
          { from: 'b', to: 'm' },
          { from: 'a', to: 'm' },
          { from: 'm', to: 't' },
        ],
        output: { from: 'm', slug: 'two', title: 'Two', description: 'd', formats: ['rss', 'json'], retention: { max_items: 50 } },
        trigger: { on: 'mdpt', m: 1 },
      },
    },
    {
      name: 'cron trigger',
      pipe: {
        nodes: [{ id: 's', op: 'source', config: { feed: 'sensor/x' }, ui: { x: 0, y: 0 } }],
        edges: [],
        output: { slug: 's' },
        trigger: { on: 'cron', cron: '@every 10m' },
      },
    },
    {
      name: 'manual trigger, node without config',
      pipe: {
        nodes: [
          { id: 's', op: 'source', config: { feed: 'sensor/x' }, ui: { x: 0, y: 0 } },
          { id: 'r', op: 'reverse', ui: { x: 220, y: 0 } },
        ],
        edges: [{ from: 's', to: 'r' }],
        output: { slug: 'r' },
        trigger: { on: 'manual' },
      },
    },
  ];
  for (const c of cases) {
    it(`round-trips: ${c.name}`, () => {
      const s = fromPipe(c.pipe);
      expect(toPipe(s)).toEqual(c.pipe);
      // And the state survives a second trip unchanged.
      expect(fromPipe(toPipe(s))).toEqual(s);
    });
  }

  it('keeps edge order (the order of a node’s inputs)', () => {
    const s = fromPipe(cases[1].pipe);
    expect(inputsOf(s, 'm')).toEqual(['b', 'a']);
  });

  it('lays out nodes that have no saved position by depth', () => {
    const p = structuredClone(readmePipe);
    for (const n of p.nodes) delete n.ui;
    const s = fromPipe(p);
    const at = Object.fromEntries(s.nodes.map((n) => [n.id, [n.x, n.y]]));
    expect(at.north[0]).toBe(0);
    expect(at.east[0]).toBe(0);
    expect(at.north[1]).not.toBe(at.east[1]);
    expect(at.all[0]).toBeGreaterThan(at.north[0]);
    expect(at.cal[0]).toBeGreaterThan(at.all[0]);
    expect(at.mean[0]).toBeGreaterThan(at.cal[0]);
    // toPipe then writes the positions it chose.
    expect(toPipe(s).nodes.every((n) => Number.isFinite(n.ui.x) && Number.isFinite(n.ui.y))).toBe(true);
  });

  it.each([
    ['null', null],
    ['a string', 'pipe'],
    ['an array', []],
    ['bad parts', { nodes: [null, 3, { id: 'a', op: 'source', config: [1] }], edges: [{ from: 1 }, null], output: 'x', trigger: { on: 'never', m: -2 } }],
  ])('reads %s without throwing', (_, p) => {
    const s = fromPipe(p);
    const out = toPipe(s);
    expect(out.trigger).toEqual({ on: 'update' });
    expect(Array.isArray(out.nodes)).toBe(true);
    expect(out.edges).toEqual([]);
  });

  it('gives m only to mdpt and cron only to cron triggers', () => {
    let s = fromPipe({ nodes: [], edges: [], output: { slug: 'x' }, trigger: { on: 'mdpt', m: 2, cron: '@hourly' } });
    expect(toPipe(s).trigger).toEqual({ on: 'mdpt', m: 2 });
    s = reducer(s, { type: 'trigger', on: 'cron' });
    expect(toPipe(s).trigger).toEqual({ on: 'cron', cron: '@hourly' });
    s = reducer(s, { type: 'trigger', on: 'update' });
    expect(toPipe(s).trigger).toEqual({ on: 'update' });
    s = reducer(s, { type: 'trigger', on: 'mdpt', m: 0 });
    expect(toPipe(s).trigger).toEqual({ on: 'mdpt' });
  });

  it('drops undefined configuration values', () => {
    const s = build({ type: 'addNode', op: 'window' }, { type: 'setConfig', id: 'window', config: { stat: 'mean', size: undefined, nested: { a: undefined, b: 1 } } });
    expect(toPipe(s).nodes[0].config).toEqual({ stat: 'mean', nested: { b: 1 } });
    expect(clean([1, undefined, { x: undefined }])).toEqual([1, null, {}]);
  });
});

describe('nextNodeId', () => {
  it.each([
    ['union', [], 'union'],
    ['union', ['union'], 'union2'],
    ['union', ['union', 'union2', 'union3'], 'union4'],
    ['union', ['union', 'union3'], 'union2'],
    ['GT', ['gt'], 'GT'],
    ['a b/c', [], 'abc'],
    ['!!!', [], 'node'],
    ['x'.repeat(80), [], 'x'.repeat(56)],
  ])('%s with %j taken gives %s', (op, taken, want) => {
    expect(nextNodeId(op, taken)).toBe(want);
  });

  it('gives every operator of the catalogue a valid id, many times over', () => {
    let s = emptyState();
    for (const o of ops) {
      for (let i = 0; i < 3; i++) s = reducer(s, { type: 'addNode', op: o.name });
    }
    const ids = s.nodes.map((n) => n.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) expect(checkNodeId(id, id, s.nodes)).toBe('');
    expect(ids).toContain('union3');
    expect(new Set(s.nodes.map((n) => n.key)).size).toBe(ids.length);
  });
});

describe('reducer', () => {
  const base = () =>
    build(
      { type: 'addNode', op: 'source', config: { feed: 'sensor/a' } },
      { type: 'addNode', op: 'source', config: { feed: 'sensor/b' } },
      { type: 'addNode', op: 'union' },
      { type: 'addEdge', from: 'source', to: 'union' },
      { type: 'addEdge', from: 'source2', to: 'union' },
    );

  it('adds nodes at free spots', () => {
    const s = base();
    expect(s.nodes.map((n) => n.id)).toEqual(['source', 'source2', 'union']);
    const spots = s.nodes.map((n) => `${n.x},${n.y}`);
    expect(new Set(spots).size).toBe(3);
  });

  it.each([
    ['a drop point', { op: 'filter', at: { x: 333, y: -41 } }, { x: 333, y: -41 }, []],
    ['a drop point on a node (kept: the user chose it)', { op: 'filter', at: { x: 0, y: 0 } }, { x: 0, y: 0 }, []],
    ['a non-finite drop point (free spot instead)', { op: 'filter', at: { x: NaN, y: 3 } }, { x: 2 * COLUMN, y: 0 }, []],
    ['fed by the node it is added after', { op: 'filter', near: { x: 220, y: 0 }, from: 'union' }, { x: 2 * COLUMN, y: 0 }, [{ from: 'union', to: 'filter' }]],
    ['fed by a node that is not there (no edge)', { op: 'filter', from: 'nope' }, { x: 2 * COLUMN, y: 0 }, []],
  ])('adds a node at %s', (_, action, spot, newEdges) => {
    const s0 = build({ type: 'addNode', op: 'source', config: { feed: 'sensor/a' } }, { type: 'addNode', op: 'union' }, { type: 'addEdge', from: 'source', to: 'union' });
    const s = reducer(s0, { type: 'addNode', ...action });
    expect(s.nodes.at(-1)).toMatchObject({ id: action.op, op: action.op, ...spot });
    expect(s.edges).toEqual([...s0.edges, ...newEdges]);
  });

  it('renames a node with its edges and output', () => {
    let s = reducer(base(), { type: 'outputFrom', id: 'union' });
    const key = s.nodes[2].key;
    s = reducer(s, { type: 'renameNode', id: 'union', to: 'all' });
    expect(s.nodes[2]).toMatchObject({ id: 'all', key });
    expect(s.edges).toEqual([
      { from: 'source', to: 'all' },
      { from: 'source2', to: 'all' },
    ]);
    expect(s.outputFrom).toBe('all');
  });

  it.each([
    ['a taken id', 'source2'],
    ['an empty id', ''],
    ['a space', 'a b'],
    ['65 characters', 'x'.repeat(65)],
  ])('refuses to rename to %s', (_, to) => {
    const s = base();
    expect(reducer(s, { type: 'renameNode', id: 'source', to })).toBe(s);
    expect(checkNodeId(to, 'source', s.nodes)).not.toBe('');
  });

  it('removes a node with its edges and clears an output naming it', () => {
    let s = reducer(base(), { type: 'outputFrom', id: 'source' });
    s = reducer(s, { type: 'removeNode', id: 'source' });
    expect(s.nodes.map((n) => n.id)).toEqual(['source2', 'union']);
    expect(s.edges).toEqual([{ from: 'source2', to: 'union' }]);
    expect(s.outputFrom).toBe('');
  });

  it('adds no duplicate edge, no self-loop, no edge to a missing node', () => {
    const s = base();
    expect(reducer(s, { type: 'addEdge', from: 'source', to: 'union' })).toBe(s);
    expect(reducer(s, { type: 'addEdge', from: 'union', to: 'union' })).toBe(s);
    expect(reducer(s, { type: 'addEdge', from: 'nope', to: 'union' })).toBe(s);
  });

  it('toggles inputs from the checkboxes', () => {
    let s = reducer(base(), { type: 'setInput', id: 'union', from: 'source', on: false });
    expect(inputsOf(s, 'union')).toEqual(['source2']);
    s = reducer(s, { type: 'setInput', id: 'union', from: 'source', on: true });
    expect(inputsOf(s, 'union')).toEqual(['source2', 'source']);
  });

  it('moves nodes, ignoring non-finite positions', () => {
    let s = reducer(base(), { type: 'moveNode', id: 'union', x: 5, y: 7 });
    expect(s.nodes[2]).toMatchObject({ x: 5, y: 7 });
    expect(reducer(s, { type: 'moveNode', id: 'union', x: NaN, y: 1 })).toBe(s);
    // Moving changes the definition's positions but not its meaning.
    expect(semanticKey(s)).toBe(semanticKey(base()));
    expect(toPipe(s)).not.toEqual(toPipe(base()));
  });

  it('ignores unknown actions and bad trigger kinds', () => {
    const s = base();
    expect(reducer(s, { type: 'nope' })).toBe(s);
    expect(reducer(s, { type: 'trigger', on: 'sometimes' }).trigger.on).toBe('update');
    expect(reducer(s, { type: 'meta', field: 'nodes', value: 'x' })).toBe(s);
  });
});

describe('graph queries', () => {
  it('finds the sink and the output node', () => {
    const s = fromPipe(readmePipe);
    expect(sinks(s)).toEqual(['mean']);
    expect(outputNode(s)).toBe('mean');
    const two = reducer(s, { type: 'addNode', op: 'count' });
    expect(outputNode(two)).toBe(''); // two sinks: ambiguous
    expect(outputNode(reducer(two, { type: 'outputFrom', id: 'cal' }))).toBe('cal');
  });

  it.each([
    ['closing a loop', 'mean', 'north', true],
    ['self-loop', 'all', 'all', true],
    ['forward edge', 'north', 'mean', false],
    ['between siblings', 'north', 'east', false],
  ])('wouldCycle: %s', (_, from, to, want) => {
    expect(wouldCycle(fromPipe(readmePipe).edges, from, to)).toBe(want);
  });

  it('lays out a cycle without looping forever', () => {
    const pos = autoLayout(
      [{ id: 'a' }, { id: 'b' }, { id: 'c' }],
      [
        { from: 'a', to: 'b' },
        { from: 'b', to: 'c' },
        { from: 'c', to: 'b' },
      ],
    );
    expect(Object.keys(pos).sort()).toEqual(['a', 'b', 'c']);
    expect(pos.b.x).toBeGreaterThan(pos.a.x);
  });

  it('places a new node where no node is', () => {
    const nodes = [
      { x: 0, y: 0 },
      { x: 220, y: 0 },
      { x: 220, y: 110 },
    ];
    expect(freeSpot([], undefined)).toEqual({ x: 0, y: 0 });
    expect(freeSpot(nodes, undefined)).toEqual({ x: 440, y: 0 });
    expect(freeSpot(nodes, { x: 0, y: 0 })).toEqual({ x: 220, y: 220 });
  });

  it('stacks nodes placed in the first column (how sources are added)', () => {
    let s = emptyState();
    for (let i = 0; i < 3; i++) s = reducer(s, { type: 'addNode', op: 'source', near: { x: -COLUMN, y: 0 } });
    expect(s.nodes.map((n) => [n.x, n.y])).toEqual([
      [0, 0],
      [0, ROW],
      [0, 2 * ROW],
    ]);
  });
});

describe('problems', () => {
  it('finds nothing wrong with the README pipe', () => {
    expect(problems(fromPipe(readmePipe), ops)).toEqual([]);
  });

  it.each([
    ['no nodes', emptyState(), [{ field: 'nodes' }]],
    ['a source without a feed', build({ type: 'addNode', op: 'source' }), [{ node: 'source', field: 'feed' }]],
    [
      'a union without input',
      build({ type: 'addNode', op: 'source', config: { feed: 'sensor/a' } }, { type: 'addNode', op: 'union' }),
      [{ node: 'union' }, { field: 'output.from' }],
    ],
    [
      'an input into a source',
      build({ type: 'addNode', op: 'source', config: { feed: 'sensor/a' } }, { type: 'addNode', op: 'source', config: { feed: 'sensor/b' } }, { type: 'addEdge', from: 'source', to: 'source2' }),
      [{ node: 'source2' }],
    ],
    [
      'too many inputs',
      build(
        { type: 'addNode', op: 'source', config: { feed: 'sensor/a' } },
        { type: 'addNode', op: 'source', config: { feed: 'sensor/b' } },
        { type: 'addNode', op: 'tail' },
        { type: 'addEdge', from: 'source', to: 'tail' },
        { type: 'addEdge', from: 'source2', to: 'tail' },
      ),
      [{ node: 'tail' }],
    ],
    ['an unknown operator', build({ type: 'addNode', op: 'source', config: { feed: 'sensor/a' } }, { type: 'addNode', op: 'frobnicate' }, { type: 'addEdge', from: 'source', to: 'frobnicate' }), [{ node: 'frobnicate' }]],
    ['a cron trigger without a schedule', build({ type: 'addNode', op: 'source', config: { feed: 'sensor/a' } }, { type: 'trigger', on: 'cron' }), [{ field: 'trigger.cron' }]],
  ])('reports %s', (_, s, want) => {
    const got = problems(s, ops);
    expect(got).toHaveLength(want.length);
    want.forEach((w, i) => expect(got[i]).toMatchObject(w));
  });

  it('reports a cycle', () => {
    let s = fromPipe(readmePipe);
    s = reducer(s, { type: 'addEdge', from: 'mean', to: 'cal' });
    expect(problems(s, ops).some((p) => p.field === 'edges' && /cycle/.test(p.error))).toBe(true);
  });
});

describe('sources and new nodes', () => {
  const feeds = [
    { id: 1, kind: 'remote', url: 'http://x/a.rss', title: 'A' },
    { id: 7, kind: 'sensor', slug: 'field-north', title: 'field-north' },
    { id: 12, kind: 'pipe', slug: 'field-mean', title: 'Field mean' },
    { id: 0, kind: 'remote' },
    null,
  ];

  it.each([
    [feeds[0], 'feed/1'],
    [feeds[1], 'sensor/field-north'],
    [feeds[2], 'pipe/field-mean'],
    [feeds[3], ''],
    [{ id: 4, kind: 'sensor' }, 'feed/4'],
  ])('sourceRef(%j) is %s', (f, want) => {
    expect(sourceRef(f)).toBe(want);
  });

  it('lists sensors first, then pipes, then remote feeds', () => {
    expect(sourceOptions(feeds).map((o) => o.ref)).toEqual(['sensor/field-north', 'pipe/field-mean', 'feed/1']);
    expect(sourceOptions('nope')).toEqual([]);
  });

  it('copies an operator’s example', () => {
    const byName = Object.fromEntries(ops.map((o) => [o.name, o]));
    const ex = exampleConfig(byName.filter);
    expect(ex).toEqual(byName.filter.example);
    ex.rules.push({});
    expect(byName.filter.example.rules).toHaveLength(2); // a copy
    expect(exampleConfig(byName.union)).toEqual({});
    expect(exampleConfig(undefined)).toEqual({});
  });
});

describe('slugify', () => {
  it.each([
    ['Field mean temperature', 'field-mean-temperature'],
    ['  Ümlaut & Café!  ', 'umlaut-cafe'],
    ['already-a.slug_1', 'already-a.slug_1'],
    ['---', ''],
    ['', ''],
    ['a'.repeat(100), 'a'.repeat(64)],
  ])('%j → %j', (name, want) => {
    const got = slugify(name);
    expect(got).toBe(want);
    if (got) expect(got).toMatch(/^[a-z0-9][a-z0-9._-]{0,63}$/);
  });
});
