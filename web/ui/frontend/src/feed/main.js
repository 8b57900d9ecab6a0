// The feed page's charts: the poll timeline (hits, misses, publish times),
// the latency histogram and the sensor values, drawn with uPlot from the
// #feed-data JSON the Go page embeds.
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import './feed.css';
import {
  parseFeedData,
  timelineData,
  timelineSummary,
  histogram,
  histogramData,
  latencies,
  latencySummary,
  valuesData,
  valuesSummary,
  fmtNumber,
  ROW_HIT,
  ROW_MISS,
  ROW_PUBLISHED,
} from './data.js';

// Okabe–Ito colours, told apart by people with colour-vision deficiency;
// the shapes differ too.
const GREEN = '#009e73';
const RED = '#d55e00';
const BLUE = '#0072b2';
const INK = '#333';

function height(el, fallback) {
  const h = Number.parseInt(el.dataset.height || '', 10);
  if (Number.isFinite(h) && h >= 80 && h <= 1000) return h;
  return window.matchMedia && window.matchMedia('(max-width: 600px)').matches ? Math.round(fallback * 0.8) : fallback;
}

/** shapePaths draws each non-null point of a series as shape at its (x, y). */
function shapePaths(shape) {
  return (u, si, i0, i1) => {
    const fill = new Path2D();
    const stroke = new Path2D();
    const xs = u.data[0];
    const ys = u.data[si];
    const r = 5 * uPlot.pxRatio;
    for (let i = i0; i <= i1; i++) {
      if (ys[i] == null) continue;
      const x = u.valToPos(xs[i], 'x', true);
      const y = u.valToPos(ys[i], 'y', true);
      if (shape === 'triangle') {
        fill.moveTo(x, y - r);
        fill.lineTo(x + r, y + r * 0.8);
        fill.lineTo(x - r, y + r * 0.8);
        fill.closePath();
      } else if (shape === 'cross') {
        stroke.moveTo(x - r, y - r);
        stroke.lineTo(x + r, y + r);
        stroke.moveTo(x - r, y + r);
        stroke.lineTo(x + r, y - r);
      } else {
        fill.moveTo(x, y - r);
        fill.lineTo(x + r, y);
        fill.lineTo(x, y + r);
        fill.lineTo(x - r, y);
        fill.closePath();
      }
    }
    return { fill, stroke };
  };
}

function scatter(label, colour, shape) {
  return {
    label,
    stroke: colour,
    fill: colour,
    width: 2,
    paths: () => null,
    points: { show: true, space: 0, size: 10, width: 2, stroke: colour, fill: colour, paths: shapePaths(shape) },
    value: (u, v) => (v == null ? '–' : 'yes'),
  };
}

const ROW_NAMES = { [ROW_HIT]: 'hit', [ROW_MISS]: 'miss', [ROW_PUBLISHED]: 'published' };

function timelineOpts(width, h) {
  return {
    width,
    height: h,
    cursor: { points: { show: false } },
    scales: { x: { time: true }, y: { auto: false, range: [-0.6, 2.6] } },
    axes: [
      { stroke: INK },
      {
        stroke: INK,
        size: 80,
        splits: () => [ROW_PUBLISHED, ROW_MISS, ROW_HIT],
        values: (u, splits) => splits.map((s) => ROW_NAMES[s] || ''),
      },
    ],
    series: [{ label: 'time' }, scatter('poll: hit', GREEN, 'triangle'), scatter('poll: miss', RED, 'cross'), scatter('published', BLUE, 'diamond')],
  };
}

function latencyOpts(width, h, edges) {
  return {
    width,
    height: h,
    cursor: { points: { show: false } },
    scales: { x: { time: false, range: () => [edges[0], edges[edges.length - 1]] }, y: { range: (u, lo, hi) => [0, Math.max(1, hi)] } },
    axes: [
      { stroke: INK, label: 'latency (s)', values: (u, splits) => splits.map(fmtNumber) },
      { stroke: INK, label: 'items', size: 50 },
    ],
    series: [
      { label: 'latency (s)', value: (u, v) => (v == null ? '–' : fmtNumber(v)) },
      { label: 'items', stroke: BLUE, fill: 'rgba(0, 114, 178, 0.55)', width: 1, paths: uPlot.paths.bars({ size: [1, Infinity], gap: 1 }), points: { show: false } },
    ],
  };
}

function valuesOpts(width, h, unit) {
  return {
    width,
    height: h,
    scales: { x: { time: true } },
    axes: [{ stroke: INK }, { stroke: INK, label: unit ? `value (${unit})` : 'value', size: 60 }],
    series: [
      { label: 'time' },
      {
        label: unit ? `value (${unit})` : 'value',
        stroke: BLUE,
        width: 2,
        points: { show: true, size: 5, fill: BLUE },
        value: (u, v) => (v == null ? '–' : `${fmtNumber(v)}${unit ? ` ${unit}` : ''}`),
      },
    ],
  };
}

/**
 * mount draws one chart in el, or says there is nothing to draw, with the
 * summary as the chart's text alternative; the chart follows el's width.
 */
function mount(el, summary, empty, build) {
  el.setAttribute('role', 'figure');
  el.setAttribute('aria-label', summary);
  el.classList.add('chart');
  const text = document.createElement('p');
  text.className = 'chart-summary';
  text.textContent = summary;
  el.replaceChildren(text);
  if (empty) {
    text.classList.add('chart-empty');
    return;
  }
  const width = () => Math.max(200, Math.floor(el.clientWidth || 600));
  const plot = build(width());
  plot.root.querySelector('canvas')?.setAttribute('aria-hidden', 'true');
  if (typeof ResizeObserver === 'function') {
    let last = width();
    let frame = 0;
    new ResizeObserver(() => {
      cancelAnimationFrame(frame);
      frame = requestAnimationFrame(() => {
        const w = width();
        if (w !== last) {
          last = w;
          plot.setSize({ width: w, height: plot.height });
        }
      });
    }).observe(el);
  }
}

function main() {
  const script = document.getElementById('feed-data');
  if (!script) return;
  const { feed, polls, readings } = parseFeedData(script.textContent || '');

  const tl = document.getElementById('chart-timeline');
  if (tl) {
    const data = timelineData(polls);
    mount(tl, timelineSummary(polls), data[0].length === 0, (w) => new uPlot(timelineOpts(w, height(tl, 220)), data, tl));
  }

  const lat = document.getElementById('chart-latency');
  if (lat) {
    const values = latencies(polls);
    const h = histogram(values);
    mount(lat, latencySummary(values), h.counts.length === 0, (w) => new uPlot(latencyOpts(w, height(lat, 220), h.edges), histogramData(h), lat));
  }

  const vals = document.getElementById('chart-values');
  if (vals) {
    mount(vals, valuesSummary(readings, feed.unit), readings.length === 0, (w) => new uPlot(valuesOpts(w, height(vals, 260), feed.unit), valuesData(readings), vals));
  }
}

if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', main);
else main();
