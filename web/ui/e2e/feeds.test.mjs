// The feeds pages of the UI against `serve --demo` on loopback (no login
// there): the list with its status columns, a feed's page with its charts,
// subscribing by URL, and posting a sensor reading.

import assert from 'node:assert/strict';
import { api, e2e, newSession, screenshots, viewports, waitFor } from './harness.mjs';

const s = e2e();

// demoBase is where the demo's simulated publishers serve, read off the
// URL of a feed the demo subscribed to.
async function demoBase() {
  const { json } = await api(s.server, 'GET', '/api/v1/feeds');
  const feed = feedsOf(json).find((f) => /\/sensors\/lab-temperature\.rss$/.test(f.url));
  assert.ok(feed, `the demo's lab-temperature.rss subscription is missing from ${JSON.stringify(json)}`);
  return new URL(feed.url).origin;
}

function feedsOf(json) {
  return Array.isArray(json) ? json : (json?.feeds ?? []);
}

s.test('the feeds list shows the demo feeds with their status', async ({ page, server }) => {
  await page.goto('/ui/');
  await page.getByRole('navigation').getByRole('link', { name: 'Feeds', exact: true }).click();
  await page.getByRole('heading', { level: 1, name: 'Feeds' }).waitFor();

  const table = page.getByRole('table').first();
  const headers = (await table.getByRole('columnheader').allInnerTexts()).map((h) => h.trim());
  assert.ok(headers.length >= 4, `too few columns: ${headers}`);
  for (const want of [/policy/i, /next/i, /poll|hit/i]) {
    assert.ok(headers.some((h) => want.test(h)), `no column matching ${want} among ${JSON.stringify(headers)}`);
  }

  const { json } = await api(server, 'GET', '/api/v1/feeds');
  const feeds = feedsOf(json);
  assert.ok(feeds.length >= 5, `the demo subscribes to several feeds, the API lists ${feeds.length}`);
  for (const name of ['lab-temperature', 'greenhouse-humidity', 'river-level', 'buoy-dtn', 'night-owl']) {
    await table.getByRole('row').filter({ hasText: name }).first().waitFor();
  }
  // Every subscribed feed has its row (plus the header row).
  await waitFor(async () => (await table.getByRole('row').count()) >= feeds.length + 1, {
    what: `${feeds.length} feed rows`,
  });
  await screenshots(page, 'feeds-list');
});

s.test("a feed's page draws its charts", async ({ page, server }) => {
  // Charts need data: wait until the feed has been polled with hits and
  // a latency measured (the first hit brings the backlog, whose latency
  // says nothing; the publisher posts every few seconds).
  const feed = await waitFor(
    async () => {
      const f = feedsOf((await api(server, 'GET', '/api/v1/feeds')).json).find((x) => /\/sensors\/lab-temperature\.rss$/.test(x.url));
      return f && f.hits >= 2 && typeof f.median_latency_s === 'number' && f;
    },
    { timeout: 40_000, what: 'hits with a latency on lab-temperature.rss' },
  );
  await page.goto('/ui/feeds');
  await page.getByRole('heading', { level: 1, name: 'Feeds' }).waitFor();
  await page.getByRole('link', { name: feed.title, exact: true }).first().click();
  await page.waitForURL(new RegExp(`/ui/feeds/${feed.id}$`));
  await page.getByRole('heading', { level: 1, name: feed.title, exact: true }).waitFor();

  // The page has the timeline, latency and values charts, each a figure
  // named by its summary, drawn on a canvas of a useful size.
  const charts = page.locator('[id^="chart-"]');
  await page.locator('#chart-timeline canvas').first().waitFor();
  const ids = await charts.evaluateAll((els) => els.map((el) => el.id));
  assert.deepEqual(ids.sort(), ['chart-latency', 'chart-timeline', 'chart-values']);
  for (const id of ids) {
    const chart = page.locator(`#${id}`);
    assert.equal(await chart.getAttribute('role'), 'figure', `#${id} is not a figure`);
    assert.match((await chart.getAttribute('aria-label')) ?? '', /\S/, `#${id} has no text alternative`);
    const canvas = chart.locator('canvas').first();
    await canvas.waitFor({ state: 'visible' });
    const box = await canvas.boundingBox();
    assert.ok(box && box.width > 150 && box.height > 50, `#${id} draws in a ${JSON.stringify(box)} box`);
  }
  await screenshots(page, 'feed-page');
});

s.test('subscribing refuses a bad URL and takes a good one', async ({ page, server }) => {
  await page.goto('/ui/');
  await page.getByRole('heading', { level: 1, name: 'Feeds' }).waitFor();
  const url = page.getByLabel('Feed URL', { exact: true });
  const subscribe = page.getByRole('button', { name: 'Subscribe', exact: true });

  await url.fill('ftp://example.invalid/feed.rss');
  await subscribe.click();
  const alert = page.getByRole('alert').filter({ hasText: /\S/ });
  await alert.first().waitFor();
  assert.match(await alert.first().innerText(), /url|scheme|ftp|http/i);

  const good = `${await demoBase()}/sensors/greenhouse-humidity.atom`;
  const before = feedsOf((await api(server, 'GET', '/api/v1/feeds')).json).length;
  await url.fill(good);
  await subscribe.click();
  await waitFor(
    async () => feedsOf((await api(server, 'GET', '/api/v1/feeds')).json).some((f) => f.url === good),
    { what: `a subscription to ${good}` },
  );
  const after = feedsOf((await api(server, 'GET', '/api/v1/feeds')).json).length;
  assert.equal(after, before + 1);
  // The page the browser lands on says so …
  await page.getByRole('status').filter({ hasText: `Subscribed to ${good}` }).waitFor();
  assert.equal(await page.getByRole('alert').filter({ hasText: /\S/ }).count(), 0, 'an error is still shown after success');
  // … and the list has it.
  await page.getByRole('navigation').getByRole('link', { name: 'Feeds', exact: true }).click();
  await page.getByRole('heading', { level: 1, name: 'Feeds' }).waitFor();
  await page.getByRole('table').first().getByRole('row').filter({ hasText: good }).first().waitFor();
});

s.test('a reading posted on the sensors page shows', async ({ page, server }) => {
  await page.goto('/ui/');
  await page.getByRole('navigation').getByRole('link', { name: 'Sensors', exact: true }).click();
  await page.waitForURL(/\/ui\/sensors/);
  await page.getByRole('heading', { level: 1 }).waitFor();
  await screenshots(page, 'sensors');

  await page.getByLabel('Sensor', { exact: true }).fill('e2e-probe');
  await page.getByLabel('Value', { exact: true }).fill('21.75');
  await page.getByLabel('Unit', { exact: true }).fill('C');
  await page.getByRole('button', { name: 'Post reading', exact: true }).click();

  // The store has it …
  const feed = await waitFor(
    async () => {
      const r = await api(server, 'GET', '/sensors/e2e-probe.json');
      return r.status === 200 && r.json;
    },
    { what: 'the e2e-probe sensor feed' },
  );
  assert.ok(
    feed.items.some((it) => JSON.stringify(it).includes('21.75')),
    `the reading is not in ${JSON.stringify(feed.items)}`,
  );
  // … and the page shows it.
  await page.getByText('e2e-probe').first().waitFor();
  await page.getByText(/21\.75/).first().waitFor();
});

// The watch every test relies on does catch what it is there for.
s.test('the page watch reports CSP violations and uncaught errors', async ({ browser, server }) => {
  const probe = await newSession(browser, { baseURL: server.base });
  try {
    const res = await probe.page.goto('/ui/feeds');
    assert.match(res.headers()['content-security-policy'] ?? '', /script-src 'self'/);
    probe.watch.check(); // a clean page passes
    await probe.page.evaluate(() => {
      const el = document.createElement('script');
      el.textContent = 'globalThis.injected = true';
      document.body.append(el);
      setTimeout(() => {
        throw new Error('thrown on purpose');
      }, 0);
    });
    await waitFor(() => probe.watch.problems.length >= 2, { what: 'the watch to see the violation and the error' });
    assert.equal(await probe.page.evaluate(() => globalThis.injected), undefined, 'the inline script ran');
    let err;
    try {
      probe.watch.check();
    } catch (e) {
      err = e;
    }
    assert.ok(err, 'the watch let a CSP violation and an uncaught error pass');
    assert.match(err.message, /CSP violation .*script-src/);
    assert.match(err.message, /uncaught error .*thrown on purpose/);
    probe.watch.check(); // and a check clears what it reported
  } finally {
    await probe.context.close();
  }
});

// An item whose title is one long word and whose HTML holds a remote
// image: the feed page keeps to the window's width at desktop and phone
// sizes, and shows the image as a link to it, loading nothing remote (the
// watch fails the test on a CSP violation).
s.test('a long item title and an item image keep to the page', async ({ page, server }) => {
  const sensor = 'e2e-wide';
  const word = 'W'.repeat(400);
  const image = 'https://img.example.org/mast.png';
  const post = () => api(server, 'POST', `/api/v1/sensors/${sensor}/readings`, { value: 20.5, unit: 'C' });
  assert.equal((await post()).status, 201);
  const created = await api(server, 'POST', '/api/v1/pipes', {
    name: 'Wide items',
    nodes: [
      { id: 'in', op: 'source', config: { feed: `sensor/${sensor}` } },
      { id: 'title', op: 'set', config: { field: 'title', value: word } },
      { id: 'body', op: 'set', config: { field: 'content', value: `<p>Seen from the mast <img src="${image}" alt="the mast"></p>` } },
    ],
    edges: [
      { from: 'in', to: 'title' },
      { from: 'title', to: 'body' },
    ],
    output: { slug: 'e2e-wide' },
  });
  assert.equal(created.status, 201, created.text);
  const feedID = created.json.feed_id;
  await waitFor(
    async () => {
      await post();
      const r = await api(server, 'GET', `/api/v1/feeds/${feedID}/items`);
      return r.status === 200 && JSON.stringify(r.json).includes(word);
    },
    { timeout: 30_000, interval: 1000, what: 'the wide pipe items' },
  );
  for (const size of [viewports.desktop, viewports.phone]) {
    await page.setViewportSize(size);
    await page.goto(`/ui/feeds/${feedID}`);
    await page.getByRole('heading', { level: 3, name: word }).first().waitFor();
    const widths = await page.evaluate(() => ({ page: document.documentElement.scrollWidth, window: document.documentElement.clientWidth }));
    assert.ok(widths.page <= widths.window, `the page is ${widths.page} px wide in a ${widths.window} px window`);
    const link = page.getByRole('link', { name: 'the mast', exact: true }).first();
    assert.equal(await link.getAttribute('href'), image);
    assert.equal(await page.locator('.item-body img').count(), 0);
  }
  await page.setViewportSize(viewports.desktop);
  await screenshots(page, 'feed-wide-items');
});
