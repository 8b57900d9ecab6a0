// The pipe of the issue, built in the chain builder through the UI only:
// the three demo field thermometers (sensor/field-*) → union → filter
// value > threshold → windowed mean; previewed, saved, and its RSS fetched
// and parsed. Then a keyboard-only pass through the saved pipe.

import assert from 'node:assert/strict';
import { api, e2e, screenshots, waitFor } from './harness.mjs';

const s = e2e();

// The demo's field thermometers read about 6.5 to 15.5 °C: all of them
// pass this threshold, so that the windowed mean has items soon.
const threshold = 5;
const slug = 'field-warm-mean';
const pipeName = 'Field warm mean';
const sources = { north: 'sensor/field-north', east: 'sensor/field-east', south: 'sensor/field-south' };

// The field sensors post every 10 s, 1 to 3 s into the period: the first
// readings of a new server land within about 13 s, a pipe's output soon
// after. Poll for up to this long.
const itemsTimeout = 45_000;

const exact = { exact: true };

/** nodePanel is the selected node's panel, a region named "Node ID (OP)". */
function nodePanel(page) {
  return page.getByRole('region', { name: /^Node \S+ \(/ });
}

/** addNode adds a node of operator op, names it id and ticks its inputs. */
async function addNode(page, op, id, inputs = []) {
  await page.getByLabel('Operator', exact).selectOption(op);
  await page.getByRole('button', { name: 'Add node', exact: true }).click();
  const nodeId = page.getByLabel('Node id', exact);
  await nodeId.fill(id);
  await page.getByRole('list', { name: 'Nodes' }).getByRole('button', { name: id, exact: true }).waitFor();
  const panel = nodePanel(page);
  await waitFor(async () => (await panel.getAttribute('aria-labelledby')) && /^Node /.test(await panel.locator('h2').first().innerText()) && (await nodeId.inputValue()) === id, {
    what: `node ${id} selected`,
  });
  const group = panel.getByRole('group', { name: 'Inputs', exact: true });
  for (const input of inputs) {
    await group.getByRole('checkbox', { name: input, exact: true }).check();
  }
  return panel;
}

/** previewRows are the rows of the pipe output's preview table. */
function previewRows(page) {
  return page.getByRole('region', { name: 'Pipe output (preview)', exact: true }).getByRole('table').getByRole('row');
}

s.test('the pipes list links to the builder', async ({ page }) => {
  await page.goto('/ui/');
  await page.getByRole('navigation').getByRole('link', { name: 'Pipes', exact: true }).click();
  await page.getByRole('heading', { level: 1, name: 'Pipes' }).waitFor();
  await screenshots(page, 'pipes-list');
  await page.getByRole('link', { name: 'New pipe', exact: true }).click();
  await page.waitForURL(/\/ui\/pipes\/new/);
  await page.getByLabel('Name', exact).waitFor();
});

s.test('the field pipe is built, previewed, saved and republished', async ({ page, server }) => {
  await page.goto('/ui/pipes/new');
  await page.getByLabel('Name', exact).fill(pipeName);
  await page.getByLabel('Slug', exact).fill(slug);

  for (const [id, feed] of Object.entries(sources)) {
    const panel = await addNode(page, 'source', id);
    await panel.getByLabel('feed', exact).fill(feed);
  }
  await addNode(page, 'union', 'all', Object.keys(sources));

  const filter = await addNode(page, 'filter', 'warm', ['all']);
  await filter.getByRole('button', { name: 'Add rules', exact: true }).click();
  await filter.getByLabel('field', exact).fill('value');
  await filter.getByLabel('op', exact).selectOption('gt');
  await filter.getByLabel('value', exact).fill(String(threshold));

  const mean = await addNode(page, 'window', 'mean', ['warm']);
  await mean.getByLabel('stat', exact).selectOption('mean');
  await mean.getByLabel('size', exact).fill('3');

  await page.getByLabel('Output from', exact).selectOption('mean');
  await page.getByLabel('Trigger', exact).selectOption('update');
  await screenshots(page, 'builder');

  // A source needs its sensor to exist: the demo's field sensors appear
  // with their first reading.
  await waitFor(
    async () => {
      for (const name of Object.keys(sources)) {
        if ((await fetch(`${server.base}/sensors/field-${name}.json`)).status !== 200) return false;
      }
      return true;
    },
    { timeout: itemsTimeout, interval: 500, what: 'the demo field sensors' },
  );
  // The preview shows the mean's items.
  const preview = page.getByRole('button', { name: 'Preview', exact: true });
  await preview.click();
  // The header row and at least one item, whose value is a number.
  await waitFor(async () => (await previewRows(page).count()) >= 2, { what: 'preview items' });
  const values = await previewRows(page).locator('td.sb-num, td:nth-child(3)').allInnerTexts();
  assert.ok(values.some((v) => /\d/.test(v)), `preview values: ${values}`);
  await page.getByRole('status').filter({ hasText: /Preview: 6 nodes ran, [1-9]\d* items out/ }).waitFor();
  assert.equal(await page.getByRole('alert').filter({ hasText: /\S/ }).count(), 0);
  await screenshots(page, 'builder-preview');

  await page.getByRole('button', { name: 'Save', exact: true }).click();
  // Its feed URLs appear, each with a Copy button.
  const links = {};
  for (const ext of ['rss', 'atom', 'json']) {
    const link = page.getByRole('link', { name: new RegExp(`/feeds/${slug}\\.${ext}$`) }).first();
    await link.waitFor();
    links[ext] = await link.getAttribute('href');
    const copy = link.locator('xpath=following::*[self::button][1]');
    assert.equal((await copy.innerText()).trim(), 'Copy', `no Copy button after the .${ext} link`);
  }
  await screenshots(page, 'builder-saved');

  // The API has it as built.
  const { json } = await api(server, 'GET', '/api/v1/pipes');
  const pipe = (json.pipes ?? []).find((p) => p.slug === slug);
  assert.ok(pipe, `pipe ${slug} is not in ${JSON.stringify(json)}`);
  const def = (await api(server, 'GET', `/api/v1/pipes/${pipe.id}`)).json;
  const ops = Object.fromEntries((def.pipe?.nodes ?? []).map((n) => [n.id, n.op]));
  assert.deepEqual(ops, { north: 'source', east: 'source', south: 'source', all: 'union', warm: 'filter', mean: 'window' });

  // Its RSS is a feed with the pipe's title and, soon, items.
  const rssURL = new URL(links.rss, server.base).href;
  const rss = await waitFor(
    async () => {
      const res = await fetch(rssURL);
      if (!res.ok) return false;
      const body = await res.text();
      return /<item>/.test(body) && body;
    },
    { timeout: itemsTimeout, interval: 1000, what: `items in ${rssURL}` },
  );
  const feed = parseRSS(rss);
  assert.equal(feed.title, pipeName);
  assert.ok(feed.items.length > 0);
  for (const item of feed.items) {
    assert.ok(item.guid, `an item without guid: ${JSON.stringify(item)}`);
    // Means of readings above the threshold are above it too.
    assert.ok(item.value > threshold, `${item.title}: mean ${item.value} is not above ${threshold}`);
    assert.match(item.title, /mean/);
  }
});

s.test('the saved pipe can be worked with the keyboard only', async ({ page, server }) => {
  const { json } = await api(server, 'GET', '/api/v1/pipes');
  const pipe = (json.pipes ?? []).find((p) => p.slug === slug);
  assert.ok(pipe, 'the previous test saves the pipe');
  await page.goto(`/ui/pipes/${pipe.id}`);
  await page.getByLabel('Name', exact).waitFor();
  await page.getByRole('status').filter({ hasText: `Editing pipe ${pipe.id}` }).waitFor();

  // From the top of the page, Tab to the "mean" node's button; Space selects it.
  const meanButton = page.getByRole('list', { name: 'Nodes' }).getByRole('button', { name: 'mean', exact: true });
  await tabTo(page, meanButton, 'the mean node');
  await page.keyboard.press('Space');
  await waitFor(async () => (await meanButton.getAttribute('aria-pressed')) === 'true', { what: 'mean selected by Space' });
  assert.equal(await page.getByLabel('Node id', exact).inputValue(), 'mean');

  // On with Tab to its size, type a new one, then to Preview; Enter runs it.
  const size = nodePanel(page).getByLabel('size', exact);
  await tabTo(page, size, 'the size control');
  await page.keyboard.press('ControlOrMeta+a');
  await page.keyboard.type('2');
  const previewButton = page.getByRole('button', { name: 'Preview', exact: true });
  await tabTo(page, previewButton, 'the Preview button');
  await page.keyboard.press('Enter');
  await page.getByRole('status').filter({ hasText: /Preview: 6 nodes ran, [1-9]\d* items out/ }).waitFor();
  const titles = await previewRows(page).locator('td:nth-child(2)').allInnerTexts();
  assert.ok(titles.length > 0 && titles.every((t) => /mean\([12]\)/.test(t)), `the preview does not use size 2: ${titles}`);
});

/** tabTo presses Tab until target has the focus (at most 200 times). */
async function tabTo(page, target, what) {
  for (let i = 0; i < 200; i++) {
    if (await target.evaluate((el) => el === document.activeElement)) return;
    await page.keyboard.press('Tab');
  }
  throw new Error(`Tab never reached ${what}`);
}

/**
 * parseRSS is a small RSS 2.0 reader, enough to check the republished
 * feed: the channel's title and each item's title, guid and link.
 */
function parseRSS(xml) {
  assert.match(xml, /^\s*(<\?xml[^>]*\?>\s*)?<rss\b[^>]*version="2\.0"/, 'not an RSS 2.0 document');
  const channel = /<channel>([\s\S]*)<\/channel>/.exec(xml);
  assert.ok(channel, 'no <channel>');
  const head = channel[1].split('<item>')[0];
  const text = (s, tag) => {
    const m = new RegExp(`<${tag}\\b[^>]*>([\\s\\S]*?)</${tag}>`).exec(s);
    return m ? unescapeXML(m[1].replace(/^<!\[CDATA\[([\s\S]*)\]\]>$/, '$1')).trim() : undefined;
  };
  const items = [...channel[1].matchAll(/<item>([\s\S]*?)<\/item>/g)].map((m) => ({
    title: text(m[1], 'title'),
    guid: text(m[1], 'guid'),
    link: text(m[1], 'link'),
    value: Number(/<sf:reading\b[^>]*\bvalue="([^"]*)"/.exec(m[1])?.[1]),
  }));
  return { title: text(head, 'title'), items };
}

function unescapeXML(s) {
  return s
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&apos;/g, "'")
    .replace(/&#(\d+);/g, (_, n) => String.fromCodePoint(Number(n)))
    .replace(/&amp;/g, '&');
}
