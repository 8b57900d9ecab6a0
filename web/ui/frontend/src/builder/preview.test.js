import { describe, expect, it } from 'vitest';
import { indexPreview, itemRow } from './preview.js';

describe('itemRow', () => {
  it.each([
    [
      'a reading',
      { id: '7:x', title: 'field-north: 10.78 °C', published: '2026-11-21T21:42:22Z', reading: { value: 10.78, unit: 'C', time: '2026-11-21T21:42:21.655342531Z' } },
      { time: '2026-11-21 21:42:21 UTC', title: 'field-north: 10.78 °C', value: '10.78 C' },
    ],
    ['no reading, publish time', { id: 'a', title: 'News', published: '2026-01-02T03:04:05Z' }, { time: '2026-01-02 03:04:05 UTC', title: 'News', value: '' }],
    ['zero times and no title', { id: 'abc', published: '0001-01-01T00:00:00Z', updated: '0001-01-01T00:00:00Z' }, { time: '', title: 'abc', value: '' }],
    ['a unitless integer', { id: 'c', reading: { value: 42 } }, { value: '42' }],
    ['a digest', { id: 'd', digest: { field: 'value', count: 4, sum: 10, min: 1, max: 4 } }, { value: 'mean 2.5 of 4 (1 to 4)' }],
    ['junk', null, { time: '', title: '', value: '' }],
  ])('%s', (_, item, want) => {
    expect(itemRow(item)).toMatchObject(want);
  });
});

describe('indexPreview', () => {
  it('indexes nodes with their counts', () => {
    const ix = indexPreview({
      nodes: [
        { node: 'a', op: 'source', count: 120, items: [{ id: '1' }], took_s: 0.01 },
        { node: 'b', op: 'filter', count: 0, items: [], error: 'boom' },
        { node: 7 },
      ],
      output: [{ id: '1' }],
      error: 'node b failed',
    });
    expect(ix.counts).toEqual({ a: 120, b: 0 });
    expect(ix.nodes.b.error).toBe('boom');
    expect(ix.nodes.a.items).toHaveLength(1);
    expect(ix.output).toHaveLength(1);
    expect(ix.error).toBe('node b failed');
  });

  it.each([null, 'x', { nodes: 'x' }])('copes with %j', (pv) => {
    expect(indexPreview(pv)).toEqual({ nodes: {}, counts: {}, output: [], error: '' });
  });
});
