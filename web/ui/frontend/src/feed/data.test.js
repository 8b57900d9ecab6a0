import { describe, expect, it } from 'vitest';
import {
  histogram,
  histogramData,
  latencies,
  latencySummary,
  niceNear,
  niceStep,
  parseFeedData,
  quantile,
  timelineData,
  timelineSummary,
  valuesData,
  valuesSummary,
  ROW_HIT,
  ROW_MISS,
  ROW_PUBLISHED,
} from './data.js';

// A deterministic pseudo-random sequence (no Math.random in tests).
function lcg(seed) {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

function checkBins(values, h) {
  const v = values.filter(Number.isFinite);
  expect(h.counts.reduce((a, b) => a + b, 0)).toBe(v.length);
  expect(h.edges).toHaveLength(h.counts.length + 1);
  for (let i = 1; i < h.edges.length; i++) expect(h.edges[i]).toBeGreaterThan(h.edges[i - 1]);
  expect(h.edges[0]).toBeLessThanOrEqual(Math.min(...v));
  expect(h.edges[h.edges.length - 1]).toBeGreaterThanOrEqual(Math.max(...v));
  // Equal widths.
  const w = h.edges[1] - h.edges[0];
  for (let i = 1; i < h.edges.length; i++) expect(h.edges[i] - h.edges[i - 1]).toBeCloseTo(w, 9);
  // Each value counted in the bin whose edges hold it.
  const recount = new Array(h.counts.length).fill(0);
  for (const x of v) {
    let i = h.edges.findIndex((e, j) => j < h.counts.length && x >= e && (x < h.edges[j + 1] || j === h.counts.length - 1));
    recount[i]++;
  }
  expect(recount).toEqual(h.counts);
}

describe('histogram', () => {
  it('has no bins for no values', () => {
    expect(histogram([])).toEqual({ edges: [], counts: [] });
    expect(histogram([NaN, Infinity, -Infinity])).toEqual({ edges: [], counts: [] });
  });

  it('puts equal values in one bin around them', () => {
    const h = histogram([3, 3, 3]);
    expect(h.counts).toEqual([3]);
    expect(h.edges[0]).toBeLessThanOrEqual(3);
    expect(h.edges[1]).toBeGreaterThan(3);
    expect(histogram([0]).counts).toEqual([1]);
    expect(histogram([-2.5]).counts).toEqual([1]);
  });

  it('bins small integer latencies on nice edges', () => {
    const v = [1, 2, 2, 3, 3, 3, 4, 4, 5, 10];
    const h = histogram(v);
    checkBins(v, h);
    for (const e of h.edges) expect(Number.isInteger(e * 4)).toBe(true); // multiples of 0.25 or coarser
  });

  it('counts values on the top edge in the last bin', () => {
    const v = [0, 1, 2, 3, 4];
    const h = histogram(v, { maxBins: 4 });
    checkBins(v, h);
    expect(h.counts.length).toBeLessThanOrEqual(4);
  });

  it.each([
    ['uniform 0–60 s', 500, (r) => r() * 60],
    ['exponential latencies', 1000, (r) => -Math.log(1 - r()) * 8],
    ['decimals that float badly', 300, (r) => Math.round(r() * 30) / 10],
    ['negative and positive', 200, (r) => (r() - 0.5) * 1e-3],
    ['heavy outlier', 100, (r, i) => (i === 0 ? 1e6 : r())],
  ])('bins %s consistently within bounds', (_, n, gen) => {
    const r = lcg(n);
    const v = Array.from({ length: n }, (_, i) => gen(r, i));
    for (const maxBins of [5, 40]) {
      const h = histogram(v, { maxBins });
      checkBins(v, h);
      expect(h.counts.length).toBeGreaterThanOrEqual(1);
      expect(h.counts.length).toBeLessThanOrEqual(maxBins);
    }
  });

  it('turns bins into bar centres', () => {
    const h = { edges: [0, 0.5, 1], counts: [2, 3] };
    expect(histogramData(h)).toEqual([
      [0.25, 0.75],
      [2, 3],
    ]);
  });

  it.each([
    [0.3, 0.5],
    [1, 1],
    [1.1, 2],
    [2.2, 2.5],
    [3, 5],
    [7, 10],
    [0.012, 0.02],
    [0, 1],
    [NaN, 1],
  ])('niceStep(%s) = %s', (raw, want) => {
    expect(niceStep(raw)).toBeCloseTo(want, 12);
  });

  it.each([
    [0.53, 0.5],
    [0.8, 1],
    [1.4, 1],
    [1.5, 2],
    [2.3, 2.5],
    [3.4, 2.5],
    [3.6, 5],
    [7.2, 10],
    [-1, 1],
  ])('niceNear(%s) = %s', (raw, want) => {
    expect(niceNear(raw)).toBeCloseTo(want, 12);
  });

  it('keeps the bins within maxBins even for widths that round down', () => {
    // 0..9.9 in 100 steps: Freedman–Diaconis asks for about 2.1 wide bins.
    const v = Array.from({ length: 100 }, (_, i) => i / 10);
    const h = histogram(v, { maxBins: 4 });
    checkBins(v, h);
    expect(h.counts.length).toBeLessThanOrEqual(4);
    expect(histogram(v).counts.length).toBe(5);
  });

  it('interpolates quantiles', () => {
    expect(quantile([1, 2, 3, 4], 0.5)).toBe(2.5);
    expect(quantile([5], 0.9)).toBe(5);
    expect(quantile([], 0.5)).toBeNaN();
  });
});

const page = {
  feed: { id: 3, title: 'Lab', policy: 'auto', unit: 'C' },
  polls: [
    { t: 3000, hit: false, latency_s: [], published: [] },
    { t: 1000, hit: true, latency_s: [0.5, 1.5], published: [500, 900] },
    { t: 2000, hit: true, latency_s: [2], published: [1000] },
  ],
  readings: [
    { t: 2000, v: 21.5 },
    { t: 1000, v: 20 },
    { t: 1500, v: 'x' },
  ],
};

describe('parseFeedData', () => {
  it('sorts oldest first and drops malformed entries', () => {
    const d = parseFeedData(JSON.stringify(page));
    expect(d.feed).toEqual(page.feed);
    expect(d.polls.map((p) => p.t)).toEqual([1000, 2000, 3000]);
    expect(d.polls[0]).toEqual({ t: 1000, hit: true, latency: [0.5, 1.5], published: [500, 900] });
    expect(d.readings).toEqual([
      { t: 1000, v: 20 },
      { t: 2000, v: 21.5 },
    ]);
  });

  it.each(['', 'not json', 'null', '[]', '{"polls": 3, "readings": {"t": 1}}', '{"feed": null, "polls": [null, {"t": "x"}]}'])('reads %j as empty', (text) => {
    const d = parseFeedData(text);
    expect(d.polls).toEqual([]);
    expect(d.readings).toEqual([]);
    expect(d.feed.unit).toBe('');
  });
});

describe('timeline', () => {
  const d = parseFeedData(JSON.stringify(page));

  it('aligns hits, misses and publish times on one axis in seconds', () => {
    const [xs, hits, misses, pubs] = timelineData(d.polls);
    expect(xs).toEqual([0.5, 0.9, 1, 2, 3]);
    expect(hits).toEqual([null, null, ROW_HIT, ROW_HIT, null]);
    expect(misses).toEqual([null, null, null, null, ROW_MISS]);
    // The publish time 1000 shares x = 1 s with the first poll.
    expect(pubs).toEqual([ROW_PUBLISHED, ROW_PUBLISHED, ROW_PUBLISHED, null, null]);
  });

  it('is empty without polls', () => {
    expect(timelineData([])).toEqual([[], [], [], []]);
    expect(timelineSummary([])).toMatch(/no polls/);
  });

  it('summarises counts and span', () => {
    const s = timelineSummary(d.polls);
    expect(s).toContain('3 polls');
    expect(s).toContain('2 hits, 1 miss,');
    expect(s).toContain('3 publish times');
    expect(s).toContain('1970-01-01 00:00:01 UTC');
  });
});

describe('latency and values', () => {
  const d = parseFeedData(JSON.stringify(page));

  it('gathers latencies and summarises them', () => {
    expect(latencies(d.polls)).toEqual([0.5, 1.5, 2]);
    expect(latencySummary([0.5, 1.5, 2])).toBe('Latency histogram of 3 items: median 1.5 s, 90th percentile 1.9 s, from 0.5 s to 2 s.');
    expect(latencySummary([90, 300, 9000])).toContain('median 5 min');
    expect(latencySummary([])).toMatch(/no latencies/);
  });

  it('gives readings as seconds and values with the unit', () => {
    expect(valuesData(d.readings)).toEqual([
      [1, 2],
      [20, 21.5],
    ]);
    expect(valuesSummary(d.readings, 'C')).toBe(
      'Sensor values: 2 readings from 1970-01-01 00:00:01 UTC to 1970-01-01 00:00:02 UTC, between 20 C and 21.5 C; the latest 21.5 C.',
    );
    expect(valuesSummary([], '')).toMatch(/no readings/);
  });
});
