// The pipe of the issue, built in the chain builder through the UI only:
// the three demo field thermometers (sensor/field-*) → union → filter
// value > threshold → windowed mean; previewed, saved, and its RSS fetched
// and parsed. Then a keyboard-only pass through the saved pipe.

import assert from 'node:assert/strict';
import { api, e2e, screenshot, screenshots, viewports, waitFor } from './harness.mjs';

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

/** palette is the operator palette, a region named "Operators". */
function palette(page) {
  return page.getByRole('region', { name: 'Operators', exact: true });
}

/** addNode adds a node of operator op from the palette, names it id and ticks its inputs. */
async function addNode(page, op, id, inputs = []) {
  const pal = palette(page);
  await pal.getByLabel('Find by name', exact).fill(op);
  await pal.getByRole('button', { name: op, exact: true }).click();
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

/** box is the bounding box of locator, in CSS pixels from the window's top left corner. */
async function box(locator, what) {
  const b = await locator.boundingBox();
  assert.ok(b, `${what} is not shown`);
  return b;
}

/** canvas is the pipe's React Flow canvas. */
function canvas(page) {
  return page.getByLabel('Pipe graph', exact);
}

/** sidePanel is the scrolling panel beside the canvas (node list, node settings, previews). */
function sidePanel(page) {
  return page.getByRole('region', { name: 'Node panel', exact: true });
}

/**
 * checkDesktopLayout asserts what a 1280×800 window shows without
 * scrolling the page: the canvas right under the pipe's fields, at least
 * 480 px tall, wider than palette and panel together, between them; the
 * output, trigger, preview and save controls in the window. It returns
 * the canvas's box.
 */
async function checkDesktopLayout(page, where) {
  const { width, height } = viewports.desktop;
  assert.equal(await page.evaluate(() => window.scrollY), 0, `${where}: the page is scrolled`);
  const c = await box(canvas(page), `${where}: the canvas`);
  const head = await box(page.getByRole('region', { name: 'Pipe', exact: true }), `${where}: the pipe's fields`);
  const pal = await box(palette(page), `${where}: the palette`);
  const side = await box(sidePanel(page), `${where}: the panel`);
  const msg = `${where}: canvas ${JSON.stringify(c)}, fields ${JSON.stringify(head)}, palette ${JSON.stringify(pal)}, panel ${JSON.stringify(side)}`;
  assert.ok(c.y <= 200, `the canvas starts below 200 px: ${msg}`);
  assert.ok(c.y >= head.y + head.height && c.y - (head.y + head.height) <= 24, `the canvas is not right under the pipe's fields: ${msg}`);
  assert.ok(c.height >= 480, `the canvas is less than 480 px tall: ${msg}`);
  assert.ok(c.y + c.height <= height, `the canvas runs off the window: ${msg}`);
  assert.ok(c.width >= width / 2 && c.width > pal.width + side.width, `the canvas does not take the larger part of the width: ${msg}`);
  assert.ok(pal.x + pal.width <= c.x && side.x >= c.x + c.width, `palette, canvas and panel are not side by side: ${msg}`);
  assert.ok(side.y < c.y + c.height && side.y + side.height > c.y, `the panel is not beside the canvas: ${msg}`);
  for (const [name, control] of [
    ['Output from', page.getByLabel('Output from', exact)],
    ['Trigger', page.getByLabel('Trigger', exact)],
    ['Live preview', page.getByLabel('Live preview', exact)],
    ['Preview', page.getByRole('button', { name: 'Preview', exact: true })],
    ['Save', page.getByRole('button', { name: 'Save', exact: true })],
  ]) {
    const b = await box(control, `${where}: ${name}`);
    assert.ok(b.y >= 0 && b.y + b.height <= height && b.x >= 0 && b.x + b.width <= width, `${where}: ${name} is out of the window: ${JSON.stringify(b)}`);
  }
  return c;
}

/**
 * checkPhoneLayout asserts that on a 390×844 phone the canvas comes first
 * at full width, on the first screen, with the palette and the panel
 * below it. It returns the canvas's box.
 */
async function checkPhoneLayout(page, where) {
  const { width, height } = viewports.phone;
  await page.evaluate(() => window.scrollTo(0, 0));
  const c = await box(canvas(page), `${where}: the canvas`);
  const pal = await box(palette(page), `${where}: the palette`);
  const side = await box(sidePanel(page), `${where}: the panel`);
  const msg = `${where}: canvas ${JSON.stringify(c)}, palette ${JSON.stringify(pal)}, panel ${JSON.stringify(side)}`;
  assert.ok(c.x <= 16 && c.width >= width - 32, `the canvas is not at full width: ${msg}`);
  assert.ok(c.y <= height / 2, `the canvas starts in the lower half of the screen: ${msg}`);
  assert.ok(c.height >= 320 && c.y + c.height <= height, `the canvas is not on the first screen, at least 320 px tall: ${msg}`);
  assert.ok(pal.y >= c.y + c.height && side.y >= c.y + c.height, `the palette or the panel is not below the canvas: ${msg}`);
  return c;
}

s.test('the canvas comes first on a new pipe and on a saved one, at desktop and phone sizes', async ({ page, server }) => {
  const { json } = await api(server, 'GET', '/api/v1/pipes');
  const pipe = (json.pipes ?? []).find((p) => p.slug === slug);
  assert.ok(pipe, 'the field pipe test saves the pipe');
  for (const [where, url, shot] of [
    ['new pipe', '/ui/pipes/new', 'builder-new'],
    ['saved pipe', `/ui/pipes/${pipe.id}`, 'builder-edit'],
  ]) {
    await page.setViewportSize(viewports.desktop);
    await page.goto(url);
    await canvas(page).waitFor();
    if (url !== '/ui/pipes/new') await page.getByRole('status').filter({ hasText: `Editing pipe ${pipe.id}` }).waitFor();
    const c = await checkDesktopLayout(page, `${where} at 1280×800`);
    console.log(`${where}: canvas at 1280×800: x ${c.x}, y ${c.y}, ${c.width}×${c.height}`);
    // The operators' long descriptions are in the palette, not above the canvas.
    assert.equal(await page.getByRole('region', { name: 'Pipe', exact: true }).getByText(/Rolling statistics|Reads one of slogfeed's feeds/).count(), 0);
    await page.setViewportSize(viewports.phone);
    const p = await checkPhoneLayout(page, `${where} at 390×844`);
    console.log(`${where}: canvas at 390×844: x ${p.x}, y ${p.y}, ${p.width}×${p.height}`);
    await page.setViewportSize(viewports.desktop);
    await screenshots(page, shot);
  }

  // On the saved pipe, the mean node's settings and output make the panel
  // longer than the window: it scrolls on its own, the page and the canvas stay.
  const meanButton = page.getByRole('list', { name: 'Nodes' }).getByRole('button', { name: 'mean', exact: true });
  await meanButton.click();
  await nodePanel(page).getByLabel('size', exact).waitFor();
  await page.getByRole('button', { name: 'Preview', exact: true }).click();
  await page.getByRole('status').filter({ hasText: /Preview: 6 nodes ran/ }).waitFor();
  const side = sidePanel(page);
  const before = await side.evaluate((el) => ({ overflow: getComputedStyle(el).overflowY, scroll: el.scrollHeight, client: el.clientHeight, top: el.scrollTop }));
  assert.ok(['auto', 'scroll'].includes(before.overflow), `the panel does not scroll: overflow-y ${before.overflow}`);
  assert.ok(before.scroll > before.client + 100, `the panel is not longer than its box: ${JSON.stringify(before)}`);
  const canvasBefore = await box(canvas(page), 'the canvas');
  const sb = await box(side, 'the panel');
  await page.mouse.move(sb.x + sb.width / 2, sb.y + sb.height / 2);
  await page.mouse.wheel(0, 5000);
  await waitFor(async () => (await side.evaluate((el) => el.scrollTop)) > 0, { what: 'the panel scrolled by the wheel' });
  await waitFor(async () => (await side.evaluate((el) => Math.ceil(el.scrollTop + el.clientHeight) >= el.scrollHeight - 1)), { what: 'the panel at its end' });
  assert.equal(await page.evaluate(() => window.scrollY), 0, 'the page scrolled with the panel');
  assert.deepEqual(await box(canvas(page), 'the canvas'), canvasBefore, 'the canvas moved with the panel');
  await checkDesktopLayout(page, 'saved pipe, panel scrolled to its end');
  await screenshot(page, 'builder-panel-scrolled-desktop');
});

s.test('operators are found by name and added by click, by keyboard and by drag onto the canvas', async ({ page, server }) => {
  const catalogue = (await api(server, 'GET', '/api/v1/operators')).json.operators;
  await page.goto('/ui/pipes/new');
  const pal = palette(page);
  const search = pal.getByLabel('Find by name', exact);
  await search.waitFor();
  const opButtons = pal.getByRole('listitem').getByRole('button');

  // Grouped as the catalogue groups them, every operator in it.
  const families = [...new Set(catalogue.map((o) => o.family))];
  const headings = await pal.getByRole('heading', { level: 3 }).allInnerTexts();
  assert.equal(headings.length, families.length, `palette groups ${headings}`);
  assert.deepEqual(await opButtons.allInnerTexts(), catalogue.map((o) => o.name));
  for (const [i, family] of families.entries()) {
    const names = catalogue.filter((o) => o.family === family).map((o) => o.name);
    const list = pal.getByRole('list').nth(i);
    assert.deepEqual(await list.getByRole('button').allInnerTexts(), names, `group ${headings[i]}`);
  }
  // A group folds away and back.
  const firstGroup = pal.getByRole('heading', { level: 3 }).first().getByRole('button');
  await firstGroup.click();
  assert.equal(await firstGroup.getAttribute('aria-expanded'), 'false');
  assert.equal(await opButtons.count(), catalogue.length - catalogue.filter((o) => o.family === families[0]).length);
  await firstGroup.click();
  assert.equal(await opButtons.count(), catalogue.length);

  // Search by name.
  await search.fill('filt');
  assert.deepEqual(await opButtons.allInnerTexts(), ['filter']);
  await search.fill('UN');
  assert.deepEqual(
    await opButtons.allInnerTexts(),
    catalogue.filter((o) => o.name.toLowerCase().includes('un')).map((o) => o.name),
  );
  await search.fill('zzz');
  assert.equal(await opButtons.count(), 0);
  await pal.getByText('No operator is called “zzz”.').waitFor();
  await search.fill('');

  // The description of the operator under the pointer shows in the palette.
  const join = catalogue.find((o) => o.name === 'join');
  await pal.getByRole('button', { name: 'join', exact: true }).hover();
  await pal.getByText(join.doc, exact).filter({ visible: true }).waitFor();

  // Click: a source, then a filter after it, fed by it (a wire on the canvas).
  await pal.getByRole('button', { name: 'source', exact: true }).click();
  await page.getByRole('status').filter({ hasText: 'Added node source.' }).waitFor();
  await pal.getByRole('button', { name: 'filter', exact: true }).click();
  await page.getByRole('status').filter({ hasText: 'Added node filter, fed by source.' }).waitFor();
  const nodes = page.getByRole('list', { name: 'Nodes' });
  assert.deepEqual(await nodes.getByRole('button').allInnerTexts(), ['source', 'filter']);
  await page.locator('.react-flow__node[data-id="filter"]').waitFor();
  await page.locator('.react-flow__edge[data-id="source->filter"]').waitFor();
  assert.equal(await nodePanel(page).getByRole('group', { name: 'Inputs', exact: true }).getByRole('checkbox', { name: 'source', exact: true }).isChecked(), true);
  // Its description moved with it into the node panel.
  const filterDoc = catalogue.find((o) => o.name === 'filter').doc;
  await nodePanel(page).getByText(filterDoc, exact).waitFor();

  // Keyboard: ↓ from the search into the list, Enter adds; Enter in the search adds the best match.
  await search.fill('rev');
  await search.press('ArrowDown');
  const reverse = pal.getByRole('button', { name: 'reverse', exact: true });
  await waitFor(() => reverse.evaluate((el) => el === document.activeElement), { what: 'reverse focused from the search box' });
  await page.keyboard.press('Enter');
  await page.getByRole('status').filter({ hasText: 'Added node reverse, fed by filter.' }).waitFor();
  await search.fill('tai');
  await search.press('Enter');
  await page.getByRole('status').filter({ hasText: 'Added node tail, fed by reverse.' }).waitFor();
  await search.fill('');

  // Drag: the node lands where it is dropped, fed by nothing.
  const c = await box(canvas(page), 'the canvas');
  const drop = { x: Math.round(c.width * 0.55), y: Math.round(c.height * 0.88) };
  await pal.getByRole('button', { name: 'window', exact: true }).dragTo(canvas(page), { targetPosition: drop });
  await page.getByRole('status').filter({ hasText: /^Added node window\.$/ }).waitFor();
  const w = await box(page.locator('.react-flow__node[data-id="window"]'), 'the dropped node');
  const at = { x: c.x + drop.x, y: c.y + drop.y };
  assert.ok(w.x <= at.x && at.x <= w.x + w.width && w.y <= at.y && at.y <= w.y + w.height, `the node ${JSON.stringify(w)} is not under the drop point ${JSON.stringify(at)}`);
  assert.equal(await page.locator('.react-flow__edge[data-id$="->window"]').count(), 0);
  assert.deepEqual(await nodes.getByRole('button').allInnerTexts(), ['source', 'filter', 'reverse', 'tail', 'window']);
  await screenshots(page, 'builder-palette');
});

s.test('a source suggests feeds as its box is typed in, searching for them', async ({ page }) => {
  const asked = [];
  const listen = (req) => {
    const u = new URL(req.url());
    if (u.pathname === '/api/v1/feeds') asked.push(u.search);
  };
  page.on('request', listen);
  try {
    await page.goto('/ui/pipes/new');
    await palette(page).getByRole('button', { name: 'source', exact: true }).click();
    const feed = nodePanel(page).getByLabel('feed', exact);
    await feed.fill('sensor/field-no');
    const list = await feed.getAttribute('list');
    const options = page.locator(`datalist[id="${list}"] option`);
    await waitFor(async () => (await options.evaluateAll((os) => os.map((o) => o.value))).includes('sensor/field-north'), { what: 'sensor/field-north suggested' });
    const values = await options.evaluateAll((os) => os.map((o) => o.value));
    assert.ok(values.length <= 20 && values.every((v) => /field-no|^feed\//.test(v) || v === 'sensor/field-north'), `suggestions ${values}`);
    assert.ok(asked.length > 0, 'no search was made');
    for (const q of asked) {
      const p = new URLSearchParams(q);
      assert.equal(p.get('limit'), '20', `a request for every feed: ${q}`);
    }
    assert.ok(asked.some((q) => new URLSearchParams(q).get('q') === 'field-no'), `searches ${asked}`);
  } finally {
    page.off('request', listen);
  }
});

s.test('a checkbox that would make a cycle cannot be ticked; the mdpt note follows the trigger', async ({ page }) => {
  await page.goto('/ui/pipes/new');
  await addNode(page, 'union', 'a');
  const b = await addNode(page, 'union', 'b', ['a']);
  assert.equal(await b.getByRole('group', { name: 'Inputs', exact: true }).getByRole('checkbox', { name: 'a', exact: true }).isChecked(), true);
  await page.getByRole('list', { name: 'Nodes' }).getByRole('button', { name: 'a', exact: true }).click();
  const inputs = nodePanel(page).getByRole('group', { name: 'Inputs', exact: true });
  const loop = inputs.getByRole('checkbox', { name: 'b', exact: true });
  assert.equal(await loop.isDisabled(), true, 'the input that would close a cycle can be ticked');
  await inputs.getByText('(would make a cycle)').waitFor();

  const note = page.locator('#trigger-note');
  assert.equal(await note.isVisible(), false, 'the mdpt note shows for an update pipe');
  await page.getByLabel('Trigger', exact).selectOption('mdpt');
  await note.waitFor({ state: 'visible' });
  await page.getByLabel('Trigger', exact).selectOption('cron');
  await note.waitFor({ state: 'hidden' });
});

s.test('leaving the builder with unsaved changes asks first; a saved pipe is named as plain text', async ({ page, server }) => {
  const remote = (await api(server, 'GET', '/api/v1/feeds?limit=100')).json.feeds.find((f) => f.kind === 'remote');
  assert.ok(remote, 'the demo has remote feeds');
  await page.goto('/ui/pipes/new');
  await page.getByLabel('Name', exact).fill('Hostile <b>pass</b> 😀');
  await page.getByLabel('Slug', exact).fill('hostile-pass');

  // A click on "Feeds" asks; staying keeps the pipe.
  const dialogs = [];
  const onDialog = (d) => {
    dialogs.push(d.type());
    d.dismiss().catch(() => {});
  };
  page.on('dialog', onDialog);
  try {
    await page.getByRole('navigation').getByRole('link', { name: 'Feeds', exact: true }).click({ noWaitAfter: true });
    await waitFor(() => dialogs.length > 0, { what: 'a question before leaving' });
    assert.deepEqual(dialogs, ['beforeunload']);
    assert.match(page.url(), /\/ui\/pipes\/new$/);
    assert.equal(await page.getByLabel('Name', exact).inputValue(), 'Hostile <b>pass</b> 😀');

    // Saved, the pipe is named as its feeds name it, and leaving asks nothing.
    const panel = await addNode(page, 'source', 'in');
    await panel.getByLabel('feed', exact).fill(`feed/${remote.id}`);
    await page.getByRole('button', { name: 'Save', exact: true }).click();
    await page.getByRole('status').filter({ hasText: /^Saved pipe \d+/ }).waitFor();
    await page.getByRole('heading', { level: 1, name: 'Hostile pass 😀', exact: true }).waitFor();
    await page.getByRole('navigation').getByRole('link', { name: 'Pipes', exact: true }).click();
    await page.getByRole('heading', { level: 1, name: 'Pipes' }).waitFor();
    assert.deepEqual(dialogs, ['beforeunload']);
    await page.getByRole('link', { name: 'Hostile pass 😀', exact: true }).waitFor();
  } finally {
    page.off('dialog', onDialog);
  }
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
