import { describe, expect, it } from 'vitest';
import catalogue from '../testdata/operators.json';
import { errorMap, errorState, parentPath, placeErrors } from './errors.js';
import { ApiError } from '../lib/api.js';
import { controls, formModel } from './schema.js';

const sent = {
  nodes: [
    { id: 'a', op: 'source', config: { feed: 'sensor/a' } },
    { id: 'hot', op: 'filter', config: { rules: [{ field: 'value', op: 'gt' }, { field: 'x', op: 'bogus', value: 1 }] } },
    { id: 'cal', op: 'calibrate', config: { sensors: { 'lab-1': { scale: 0 } } } },
    { id: 'a', op: 'union' },
  ],
  edges: [
    { from: 'a', to: 'hot' },
    { from: 'hot', to: 'ghost' },
  ],
  output: { slug: 'Bad Slug' },
  trigger: { on: 'cron', cron: 'nope' },
};

// As the server answers: transform.Details of a definition with these mistakes.
const details = [
  { node: 'hot', op: 'filter', field: 'rules[0].value', error: 'required' },
  { node: 'hot', op: 'filter', field: 'rules[1].op', error: 'unknown operator "bogus"' },
  { node: 'cal', op: 'calibrate', field: 'sensors.lab-1.scale', error: 'must be a finite number other than 0' },
  { node: 'hot', op: 'filter', error: 'a filter node needs at least 1 input(s), has 0' },
  { node: 'x', op: 'frob', field: 'op', error: 'unknown operator "frob"' },
  { field: 'nodes[3].id', error: 'duplicate node id "a"' },
  { field: 'edges[1].to', error: 'no node "ghost"' },
  { field: 'output.slug', error: 'slug "Bad Slug" must be 1 to 64 lower-case letters' },
  { field: 'trigger.cron', error: 'bad schedule' },
  { error: 'something general' },
];

describe('errorMap', () => {
  const m = errorMap(details, sent);

  it('lists every detail for the alert region, naming node and field', () => {
    expect(m.list).toHaveLength(details.length);
    expect(m.list[0].text).toBe('node hot (filter), rules[0].value: required');
    expect(m.list[5].text).toBe('nodes[3].id: duplicate node id "a"');
    expect(m.list[9].text).toBe('something general');
  });

  it('puts configuration field errors on the node’s fields', () => {
    expect(m.nodes.hot.fields).toEqual({ 'rules[0].value': ['required'], 'rules[1].op': ['unknown operator "bogus"'] });
    expect(m.nodes.cal.fields['sensors.lab-1.scale']).toEqual(['must be a finite number other than 0']);
  });

  it('keeps node-level problems on the node', () => {
    expect(m.nodes.hot.node).toEqual(['a filter node needs at least 1 input(s), has 0']);
    expect(m.nodes.x.node).toEqual(['op: unknown operator "frob"']);
    expect(m.nodes.hot.count).toBe(3);
  });

  it('finds the node of nodes[i] and edges[i] through the definition sent', () => {
    expect(m.nodes.a.fields['#id']).toEqual(['duplicate node id "a"']);
    expect(m.nodes.a.count).toBe(1);
    expect(m.pipe.edges).toEqual(['hot → ghost: no node "ghost"']);
    expect(m.nodes.ghost).toBeUndefined(); // there is no such node to mark
  });

  it('keeps pipe fields by path', () => {
    expect(m.pipe['output.slug']).toHaveLength(1);
    expect(m.pipe['trigger.cron']).toEqual(['bad schedule']);
    expect(m.pipe['']).toEqual(['something general']);
  });

  it('marks the target of an edge error when it exists', () => {
    const r = errorMap([{ field: 'edges[0]', error: 'duplicate edge a → hot' }], sent);
    expect(r.nodes.hot.node).toEqual(['input from a: duplicate edge a → hot']);
  });

  it('marks every node of a cycle', () => {
    const pipe = {
      nodes: [
        { id: 'src', op: 'source' },
        { id: 'a', op: 'union' },
        { id: 'b', op: 'union' },
        { id: 'a, b', op: 'union' },
      ],
      edges: [
        { from: 'a', to: 'b' },
        { from: 'b', to: 'a' },
      ],
    };
    const r = errorMap([{ field: 'edges', error: 'the edges form a cycle through a, b' }], pipe);
    expect(r.pipe.edges).toEqual(['the edges form a cycle through a, b']);
    expect(Object.keys(r.nodes).sort()).toEqual(['a', 'b']);
    expect(r.nodes.a).toEqual({ node: ['the edges form a cycle through a, b'], fields: {}, count: 1 });
    expect(r.nodes.b.count).toBe(1);
  });

  it.each([
    ['nothing', undefined],
    ['not a list', { error: 'x' }],
    ['junk entries', [null, 3, 'x', {}]],
    ['an index past the nodes', [{ field: 'nodes[99].id', error: 'x' }]],
  ])('copes with %s', (_, d) => {
    const r = errorMap(d, sent);
    expect(Array.isArray(r.list)).toBe(true);
    for (const e of r.list) expect(typeof e.text).toBe('string');
  });
});

describe('placeErrors', () => {
  const filter = catalogue.operators.find((o) => o.name === 'filter');
  const config = sent.nodes[1].config;
  const paths = controls(formModel(filter), config).map((c) => c.path);

  it('puts each error on its control, or the nearest control above it', () => {
    const r = placeErrors(
      {
        'rules[0].value': ['required'],
        'rules.value': ['want a number'], // Go's JSON decoder leaves out indexes
        'rules[7].field': ['gone'],
        mode: ['bad'],
        nowhere: ['unknown field'],
        '#id': ['shown by the Node id box'],
      },
      paths,
    );
    expect(r.byPath['rules[0].value']).toEqual(['required']);
    expect(r.byPath.rules).toEqual(['rules.value: want a number', 'rules[7].field: gone']);
    expect(r.byPath.mode).toEqual(['bad']);
    expect(r.rest).toEqual(['nowhere: unknown field']);
  });

  it.each([
    ['rules[2].value', 'rules[2]'],
    ['rules[2]', 'rules'],
    ['sensors.lab-1.offset', 'sensors.lab-1'],
    ['size', ''],
    ['', ''],
  ])('parentPath(%s) = %s', (p, want) => {
    expect(parentPath(p)).toBe(want);
  });
});

describe('errorState', () => {
  it.each([
    ['a 400 keeps its details', new ApiError(400, 'invalid pipe', [{ field: 'output.slug', error: 'x' }]), 400, [{ field: 'output.slug', error: 'x' }]],
    ['a 409 about the slug lands on output.slug', new ApiError(409, 'slug "a" is taken by pipe 2'), 409, [{ field: 'output.slug', error: 'slug "a" is taken by pipe 2' }]],
    ['another 409 stays general', new ApiError(409, 'pipe in use'), 409, []],
    ['a 422 has no details', new ApiError(422, 'pipe run over its time limit'), 422, []],
    ['a network error', new TypeError('Failed to fetch'), 0, []],
  ])('%s', (_, err, status, details) => {
    const s = errorState(err, sent);
    expect(s.status).toBe(status);
    expect(s.details).toEqual(details);
    expect(s.message).toBe(err.message);
    expect(s.pipe).toBe(sent);
    // And it shows: as many alert lines as details.
    expect(errorMap(s.details, s.pipe).list).toHaveLength(details.length);
  });
});
