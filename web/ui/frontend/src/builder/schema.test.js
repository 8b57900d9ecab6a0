import { describe, expect, it } from 'vitest';
import catalogue from '../testdata/operators.json';
import { parentPath } from './errors.js';
import {
  anyToText,
  controls,
  durationToText,
  emptyValue,
  fieldModel,
  formModel,
  freeKey,
  getIn,
  hint,
  pathString,
  removeAt,
  renameKey,
  setIn,
  textToAny,
  textToDuration,
  textToNumber,
} from './schema.js';

const ops = catalogue.operators;
const byName = Object.fromEntries(ops.map((o) => [o.name, o]));
const KINDS = new Set(['string', 'number', 'integer', 'boolean', 'enum', 'duration', 'any', 'object', 'array', 'map']);

function walkModel(f, visit) {
  visit(f);
  if (f.kind === 'object') f.fields.forEach((g) => walkModel(g, visit));
  if (f.kind === 'array') walkModel(f.item, visit);
  if (f.kind === 'map') walkModel(f.value, visit);
}

describe('formModel over the whole catalogue', () => {
  it('has a saved catalogue to test against', () => {
    expect(ops.length).toBeGreaterThan(40);
  });

  for (const op of ops) {
    it(`${op.name}: one field per property, in x-order, every kind known`, () => {
      const m = formModel(op);
      const props = Object.keys(op.schema.properties || {});
      expect(m.fields.map((f) => f.name).sort()).toEqual([...props].sort());
      const order = op.schema['x-order'] || [];
      expect(m.fields.slice(0, order.length).map((f) => f.name)).toEqual(order);
      for (const f of m.fields) walkModel(f, (g) => expect(KINDS.has(g.kind), `${op.name}.${g.name}: ${g.kind}`).toBe(true));
      // Every property with a description shows it.
      for (const f of m.fields) {
        const d = op.schema.properties[f.name].description;
        if (d) expect(hint(f)).toContain(d);
      }
      // The operator's example fills the form: every value in it has a
      // control at the path the server would name in an error, or lies
      // within an untyped (JSON text) control.
      const ctl = new Map(controls(m, op.example).map((c) => [c.path, c.kind]));
      for (const k of Object.keys(op.example)) expect(ctl.has(k), k).toBe(true);
      for (const p of valuePaths(op.example)) {
        let q = p;
        while (q !== '' && !ctl.has(q)) q = parentPath(q);
        expect(q === p || ctl.get(q) === 'any', `${op.name}: ${p} (nearest control ${q})`).toBe(true);
      }
      // And each control's path reads back a value of the example or
      // nothing (a property the example leaves out).
      for (const path of ctl.keys()) {
        const v = getIn(op.example, parsePath(path));
        if (v !== undefined) expect(valuePaths(op.example)).toContain(path);
      }
    });
  }

  it.each([
    ['filter', 'mode', 'enum'],
    ['filter', 'rules', 'array'],
    ['window', 'size', 'integer'],
    ['window', 'span', 'duration'],
    ['calibrate', 'scale', 'number'],
    ['calibrate', 'sensors', 'map'],
    ['compute', 'set', 'map'],
    ['merge', 'desc', 'boolean'],
    ['source', 'feed', 'string'],
    ['set', 'value', 'any'],
    ['INSET', 'set', 'array'],
    ['WITHIN', 'min', 'any'],
    ['loop', 'steps', 'array'],
  ])('%s.%s is a %s field', (op, field, kind) => {
    const f = formModel(byName[op]).fields.find((x) => x.name === field);
    expect(f.kind).toBe(kind);
  });

  it('reads nested models: filter rules, calibrate sensors, compute set, loop steps', () => {
    const rules = formModel(byName.filter).fields.find((f) => f.name === 'rules');
    expect(rules.item.kind).toBe('object');
    expect(rules.item.fields.map((f) => [f.name, f.kind])).toEqual([
      ['field', 'string'],
      ['op', 'enum'],
      ['value', 'any'],
    ]);
    expect(rules.item.fields[1].options).toContain('matches');
    const sensors = formModel(byName.calibrate).fields.find((f) => f.name === 'sensors');
    expect(sensors.value.kind).toBe('object');
    expect(sensors.value.fields.map((f) => f.name)).toEqual(['scale', 'offset', 'unit']);
    expect(formModel(byName.compute).fields.find((f) => f.name === 'set').value.kind).toBe('string');
    const steps = formModel(byName.loop).fields.find((f) => f.name === 'steps');
    expect(steps.item.fields.map((f) => [f.name, f.kind])).toEqual([
      ['op', 'string'],
      ['config', 'any'],
    ]);
  });

  it('marks a source’s feed for suggestions', () => {
    expect(formModel(byName.source).fields.find((f) => f.name === 'feed').suggest).toBe('feeds');
    expect(formModel(byName.set).fields.some((f) => f.suggest)).toBe(false);
  });

  it('shows bounds and defaults in the help text', () => {
    const size = formModel(byName.window).fields.find((f) => f.name === 'size');
    expect(hint(size)).toBe('the last N readings of the group; 1 to 10000');
    expect(hint({ min: 0 })).toBe('at least 0');
    expect(hint({ max: 5, default: 2 })).toBe('at most 5; default 2');
  });

  it('survives schemas outside the subset', () => {
    expect(formModel(undefined).fields).toEqual([]);
    expect(formModel({ schema: { type: 'object' } }).fields).toEqual([]);
    expect(fieldModel('x', { type: 'object' }).kind).toBe('any');
    expect(fieldModel('x', { type: ['string', 'null'] }).kind).toBe('any');
    expect(fieldModel('x', null).kind).toBe('any');
    // Deep nesting stops instead of recursing without end.
    let s = { type: 'string' };
    for (let i = 0; i < 50; i++) s = { type: 'array', items: s };
    let f = fieldModel('deep', s);
    let depth = 0;
    while (f.kind === 'array') {
      f = f.item;
      depth++;
    }
    expect(depth).toBeLessThan(12);
  });
});

// valuePaths lists the paths of every value within v, containers too.
function valuePaths(v, prefix = []) {
  const out = [];
  const add = (k, x) => {
    const path = [...prefix, k];
    out.push(pathString(path), ...valuePaths(x, path));
  };
  if (Array.isArray(v)) v.forEach((x, i) => add(i, x));
  else if (v !== null && typeof v === 'object') for (const [k, x] of Object.entries(v)) add(k, x);
  return out;
}

function parsePath(p) {
  const out = [];
  for (const m of p.matchAll(/([^.[\]]+)|\[(\d+)\]/g)) out.push(m[2] !== undefined ? Number(m[2]) : m[1]);
  return out;
}

describe('paths and values', () => {
  it.each([
    [['rules', 2, 'value'], 'rules[2].value'],
    [['sensors', 'lab-1', 'offset'], 'sensors.lab-1.offset'],
    [['set', 0], 'set[0]'],
    [['size'], 'size'],
    [[], ''],
  ])('pathString(%j) = %s', (path, want) => {
    expect(pathString(path)).toBe(want);
  });

  it('sets and removes without touching the original', () => {
    const cfg = { rules: [{ field: 'value', op: 'gt', value: 25 }], mode: 'permit' };
    const frozen = structuredClone(cfg);
    const a = setIn(cfg, ['rules', 0, 'value'], 30);
    expect(a.rules[0].value).toBe(30);
    expect(cfg).toEqual(frozen);
    const b = setIn(cfg, ['mode'], undefined);
    expect(b).toEqual({ rules: cfg.rules });
    const c = setIn({}, ['rules', 1, 'field'], 'x');
    expect(c).toEqual({ rules: [null, { field: 'x' }] });
    const d = setIn(cfg, ['sensors', 'lab-1', 'offset'], 0.4);
    expect(d.sensors).toEqual({ 'lab-1': { offset: 0.4 } });
    expect(removeAt(a, ['rules'], 0)).toEqual({ rules: [], mode: 'permit' });
    expect(removeAt(cfg, ['mode'], 0)).toBe(cfg);
  });

  it('renames map keys in place and refuses a taken key', () => {
    const cfg = { set: { a: '1', b: '2', c: '3' } };
    expect(Object.keys(renameKey(cfg, ['set'], 'b', 'z').set)).toEqual(['a', 'z', 'c']);
    expect(renameKey(cfg, ['set'], 'b', 'c')).toBe(cfg);
    expect(renameKey(cfg, ['set'], 'nope', 'x')).toBe(cfg);
    expect(freeKey({ key1: 1, key2: 2 })).toBe('key3');
    expect(freeKey(undefined)).toBe('key1');
  });

  it('gives "Add" a value of the right shape', () => {
    const rules = formModel(byName.filter).fields.find((f) => f.name === 'rules');
    expect(emptyValue(rules.item)).toEqual({});
    expect(emptyValue({ kind: 'enum', options: ['all', 'any'] })).toBe('all');
    expect(emptyValue({ kind: 'string' })).toBe('');
  });

  it('controls lists array items and map entries at their server paths', () => {
    const op = byName.calibrate;
    const paths = controls(formModel(op), { sensors: { 'lab-1': { offset: 0.4 } } }).map((c) => c.path);
    expect(paths).toEqual(['scale', 'offset', 'unit', 'sensors', 'sensors.lab-1', 'sensors.lab-1.scale', 'sensors.lab-1.offset', 'sensors.lab-1.unit']);
  });
});

describe('text ↔ value', () => {
  it.each([25, -1.5, 0, true, false, null, 'abc', '', '25', 'true', 'null', '"quoted"', '-1h', [1, 'a'], { a: [1] }, 'a "b" c'])(
    'untyped values round-trip: %j',
    (v) => {
      expect(textToAny(anyToText(v))).toEqual(v);
    },
  );

  it.each([
    ['25', 25],
    ['abc', 'abc'],
    ['"25"', '25'],
    ['[1, 2]', [1, 2]],
    ['', undefined],
  ])('untyped text %j reads as %j', (t, want) => {
    expect(textToAny(t)).toEqual(want);
  });

  it.each([
    ['90s', '90s'],
    ['1h30m', '1h30m'],
    ['90', 90],
    ['1.5', 1.5],
    [' 5m ', '5m'],
    ['', undefined],
  ])('duration %j reads as %j', (t, want) => {
    expect(textToDuration(t)).toEqual(want);
    if (want !== undefined) expect(textToDuration(durationToText(want))).toEqual(want);
  });

  it.each([
    ['3', false, 3],
    ['3.5', false, 3.5],
    ['3.5', true, '3.5'],
    ['1e3', true, 1000],
    ['abc', false, 'abc'],
    ['', false, undefined],
    ['  ', true, undefined],
  ])('number %j (integer %s) reads as %j', (t, integer, want) => {
    expect(textToNumber(t, integer)).toEqual(want);
  });
});
