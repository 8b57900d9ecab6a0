import { afterEach, describe, expect, it, vi } from 'vitest';
import { api, ApiError, csrfToken, feedSuggestions, loginURL, requestInit, searchFeeds, sessionExpired } from './api.js';

describe('requestInit', () => {
  it.each([
    ['GET', undefined, false],
    ['get', undefined, false],
    ['HEAD', undefined, false],
    ['POST', { a: 1 }, true],
    ['PUT', { a: 1 }, true],
    ['DELETE', undefined, true],
  ])('%s sends the CSRF token: %s', (method, body, token) => {
    const init = requestInit(method, body, 'tok');
    expect(init.credentials).toBe('same-origin');
    expect(init.headers['X-CSRF-Token']).toBe(token ? 'tok' : undefined);
    if (body) {
      expect(init.headers['Content-Type']).toBe('application/json');
      expect(JSON.parse(init.body)).toEqual(body);
    } else {
      expect(init.body).toBeUndefined();
    }
  });
});

describe('loginURL and csrfToken', () => {
  it.each([
    [{ pathname: '/ui/pipes/3', search: '' }, '/ui/login?next=%2Fui%2Fpipes%2F3'],
    [{ pathname: '/ui/pipes/new', search: '?x=1&y=2' }, '/ui/login?next=%2Fui%2Fpipes%2Fnew%3Fx%3D1%26y%3D2'],
  ])('%j → %s', (loc, want) => {
    expect(loginURL(loc)).toBe(want);
  });

  it('reads the meta tag, or nothing', () => {
    const doc = { querySelector: (q) => (q === 'meta[name="csrf-token"]' ? { getAttribute: () => 'abc' } : null) };
    expect(csrfToken(doc)).toBe('abc');
    expect(csrfToken({ querySelector: () => null })).toBe('');
    expect(csrfToken(undefined)).toBe('');
  });
});

describe('api', () => {
  afterEach(() => {
    vi.unstubAllGlobals();
  });

  function stub(status, body) {
    const assign = vi.fn();
    vi.stubGlobal('location', { pathname: '/ui/pipes/7', search: '', assign });
    vi.stubGlobal('document', { querySelector: () => ({ getAttribute: () => 'tok' }) });
    const fetch = vi.fn(async () => ({ ok: status >= 200 && status < 300, status, statusText: 'x', text: async () => body }));
    vi.stubGlobal('fetch', fetch);
    return { assign, fetch };
  }

  it('returns the JSON of a 2xx and sends the token on POST', async () => {
    const { fetch } = stub(201, '{"id": 4}');
    await expect(api('/api/v1/pipes', { method: 'POST', body: {} })).resolves.toEqual({ id: 4 });
    expect(fetch.mock.calls[0][1].headers['X-CSRF-Token']).toBe('tok');
  });

  it('returns null for an empty answer', async () => {
    stub(204, '');
    await expect(api('/x', { method: 'DELETE' })).resolves.toBeNull();
  });

  it('throws the message and details of a 400', async () => {
    stub(400, JSON.stringify({ error: 'invalid pipe', details: [{ node: 'a', error: 'bad' }] }));
    const err = await api('/x', { method: 'POST', body: {} }).catch((e) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(err.status).toBe(400);
    expect(err.message).toBe('invalid pipe');
    expect(err.details).toEqual([{ node: 'a', error: 'bad' }]);
  });

  it('copes with an answer that is not JSON', async () => {
    stub(502, '<html>bad gateway</html>');
    const err = await api('/x').catch((e) => e);
    expect(err.status).toBe(502);
    expect(err.message).toBe('<html>bad gateway</html>');
  });

  it('goes to the login page on a 401', async () => {
    const { assign } = stub(401, '{"error": "sign in"}');
    const err = await api('/x').catch((e) => e);
    expect(err.status).toBe(401);
    expect(assign).toHaveBeenCalledWith('/ui/login?next=%2Fui%2Fpipes%2F7');
  });

  it('stays on the page on a 401 when asked to, saying the session expired', async () => {
    const { assign } = stub(401, '{"error": "sign in"}');
    const err = await api('/x', { method: 'POST', body: {}, stay: true }).catch((e) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(err.status).toBe(401);
    expect(err.message).toBe(sessionExpired);
    expect(assign).not.toHaveBeenCalled();
  });
});

describe('searchFeeds', () => {
  it.each([
    ['', ''],
    ['  ', ''],
    ['lab', 'lab'],
    ['sensor/field-no', 'field-no'],
    ['PIPE/mean', 'mean'],
    ['feed/12', '12'],
    ['https://example.org/a.rss', 'https://example.org/a.rss'],
  ])('asks for %j as q=%j, 20 at most', async (text, q) => {
    const asked = [];
    const get = async (path) => {
      asked.push(path);
      return { feeds: [{ id: 1 }], total: 1, next_cursor: 'more' };
    };
    expect(await searchFeeds(text, { get })).toEqual([{ id: 1 }]);
    expect(asked).toHaveLength(1);
    const u = new URL(asked[0], 'http://x');
    expect(u.pathname).toBe('/api/v1/feeds');
    expect(u.searchParams.get('limit')).toBe(String(feedSuggestions));
    expect(feedSuggestions).toBe(20);
    expect(u.searchParams.get('q')).toBe(q || null);
    expect(u.searchParams.has('cursor')).toBe(false);
  });

  it('gives no feeds for a body without them', async () => {
    expect(await searchFeeds('x', { get: async () => ({ error: 'x' }) })).toEqual([]);
  });
});
