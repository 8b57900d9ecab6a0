// A slogfeed bound off loopback (0.0.0.0) with a token, reached through
// 127.0.0.1: the UI asks to log in, refuses a wrong token, takes the right
// one; the API refuses writes without the bearer token and takes them with it.

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { api, e2e, newSession, saveFailure, screenshot, screenshots, viewports } from './harness.mjs';

const token = randomBytes(16).toString('hex');
const s = e2e({ addr: '0.0.0.0:0', token, connectHost: '127.0.0.1' });

async function logIn(page, withToken) {
  await page.getByLabel('Token', { exact: true }).fill(withToken);
  await page.getByRole('button', { name: 'Log in', exact: true }).click();
}

s.test('the UI sends to the login page and refuses a wrong token', async ({ page }) => {
  assert.ok(s.server.log().includes('serving on http://0.0.0.0:') || s.server.log().includes('serving on http://[::]:'),
    'the server does not listen on the wildcard address');
  await page.goto('/ui/');
  await page.waitForURL(/\/ui\/login/);
  await page.getByLabel('Token', { exact: true }).waitFor();
  await screenshots(page, 'login');

  await logIn(page, `${token}x`);
  const alert = page.getByRole('alert').filter({ hasText: /\S/ });
  await alert.first().waitFor();
  assert.match(page.url(), /\/ui\/login/);
  // Still no way in.
  await page.goto('/ui/pipes');
  await page.waitForURL(/\/ui\/login/);
});

s.test('the right token logs in and the feeds list shows', async ({ page }) => {
  await page.goto('/ui/');
  await page.waitForURL(/\/ui\/login/);
  await logIn(page, token);
  await page.getByRole('heading', { level: 1, name: 'Feeds' }).waitFor();
  assert.doesNotMatch(page.url(), /\/ui\/login/);
  await page.getByRole('table').first().getByRole('row').filter({ hasText: 'lab-temperature' }).first().waitFor();
  // The session holds across pages.
  await page.getByRole('navigation').getByRole('link', { name: 'Pipes', exact: true }).click();
  await page.getByRole('heading', { level: 1, name: 'Pipes' }).waitFor();
});

s.test('a logged-in page can change things', async ({ page, server }) => {
  await page.goto('/ui/sensors');
  await page.getByLabel('Sensor', { exact: true }).fill('auth-probe');
  await page.getByLabel('Value', { exact: true }).fill('3.5');
  await page.getByLabel('Unit', { exact: true }).fill('m');
  await page.getByRole('button', { name: 'Post reading', exact: true }).click();
  await page.getByText('auth-probe').first().waitFor();
  const r = await api(server, 'GET', '/sensors/auth-probe.json');
  assert.equal(r.status, 200, r.text);
  assert.ok(JSON.stringify(r.json.items).includes('3.5'), r.text);
});

s.test('an expired session keeps the pipe being built; a save after a login in another tab works', async ({ page, server }) => {
  const exact = { exact: true };
  const remote = (await api(server, 'GET', '/api/v1/feeds?limit=100')).json.feeds.find((f) => f.kind === 'remote');
  assert.ok(remote, 'the demo has remote feeds');
  await page.goto('/ui/pipes/new');
  await page.getByLabel('Name', exact).fill('Kept across logins');
  await page.getByLabel('Slug', exact).fill('kept-across-logins');
  const pal = page.getByRole('region', { name: 'Operators', exact: true });
  await pal.getByLabel('Find by name', exact).fill('source');
  await pal.getByRole('button', { name: 'source', exact: true }).click();
  await page.getByRole('region', { name: /^Node source \(/ }).getByLabel('feed', exact).fill(`feed/${remote.id}`);

  // The session ends (its cookie is gone): a save says so and the page stays.
  await page.context().clearCookies();
  await page.getByRole('button', { name: 'Save', exact: true }).click();
  const alert = page.getByRole('alert').filter({ hasText: 'Your session has expired: log in again in another tab, then save.' });
  await alert.waitFor();
  assert.match(page.url(), /\/ui\/pipes\/new$/);
  assert.equal(await page.getByLabel('Name', exact).inputValue(), 'Kept across logins');
  assert.deepEqual(await page.getByRole('list', { name: 'Nodes' }).getByRole('button').allInnerTexts(), ['source']);
  await screenshot(page, 'builder-session-expired-desktop');

  // A login in another tab, then Save: saved.
  const other = await page.context().newPage();
  try {
    await other.goto('/ui/login?next=/ui/feeds');
    await logIn(other, token);
    await other.getByRole('heading', { level: 1, name: 'Feeds' }).waitFor();
  } finally {
    await other.close();
  }
  await page.getByRole('button', { name: 'Save', exact: true }).click();
  await page.getByRole('status').filter({ hasText: /^Saved pipe \d+/ }).waitFor();
  assert.equal(await alert.count(), 0, 'the session message stays after the save');
  const { json } = await api(server, 'GET', '/api/v1/pipes');
  assert.ok((json.pipes ?? []).some((p) => p.slug === 'kept-across-logins'), JSON.stringify(json));
});

s.test('API writes need the bearer token', async ({ server }) => {
  const reading = { value: 7.25, unit: 'C' };
  const without = await api(server, 'POST', '/api/v1/sensors/auth-api/readings', reading);
  assert.equal(without.status, 401, without.text);
  assert.match(without.headers.get('www-authenticate') ?? '', /Bearer/);
  const wrong = await api(server, 'POST', '/api/v1/sensors/auth-api/readings', reading, { token: `${token}x` });
  assert.equal(wrong.status, 401, wrong.text);
  const right = await api(server, 'POST', '/api/v1/sensors/auth-api/readings', reading, { token });
  assert.equal(right.status, 201, right.text);
  // Reads stay open.
  const feed = await api(server, 'GET', '/sensors/auth-api.json');
  assert.equal(feed.status, 200, feed.text);
  assert.ok(JSON.stringify(feed.json.items).includes('7.25'), feed.text);
});

s.test('a phone logs in too', async ({ browser, server }) => {
  const phone = await newSession(browser, { viewport: viewports.phone, baseURL: server.base });
  try {
    await phone.page.goto('/ui/');
    await phone.page.waitForURL(/\/ui\/login/);
    await logIn(phone.page, token);
    await phone.page.getByRole('heading', { level: 1, name: 'Feeds' }).waitFor();
    await screenshot(phone.page, 'auth-feeds-list-phone');
    phone.watch.check();
  } catch (err) {
    await saveFailure('a phone logs in too', phone.page, server, phone.watch);
    throw err;
  } finally {
    await phone.context.close();
  }
});
