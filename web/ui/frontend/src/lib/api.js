// Talking to slogfeed's JSON API from the UI pages: same-origin
// credentials, the page's CSRF token on every change, and a trip to the
// login page when the session has expired.

/** ApiError is a failed API call: its status, message and any details. */
export class ApiError extends Error {
  constructor(status, message, details) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.details = Array.isArray(details) ? details : [];
  }
}

/** csrfToken reads the page's <meta name="csrf-token">. */
export function csrfToken(doc = globalThis.document) {
  const m = doc?.querySelector?.('meta[name="csrf-token"]');
  return m?.getAttribute('content') || '';
}

/** loginURL is where a 401 sends the browser: the login page, back here after. */
export function loginURL(loc) {
  return `/ui/login?next=${encodeURIComponent(`${loc.pathname}${loc.search || ''}`)}`;
}

/**
 * requestInit builds fetch's options: JSON body, same-origin credentials,
 * and X-CSRF-Token on anything but GET and HEAD.
 */
export function requestInit(method, body, token, signal) {
  const m = (method || 'GET').toUpperCase();
  const headers = { Accept: 'application/json' };
  const init = { method: m, credentials: 'same-origin', headers };
  if (m !== 'GET' && m !== 'HEAD') headers['X-CSRF-Token'] = token;
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  if (signal) init.signal = signal;
  return init;
}

/**
 * api calls path and returns its JSON (null for an empty answer). Any
 * status other than 2xx throws an ApiError; a 401 first sends the browser
 * to the login page.
 */
export async function api(path, { method = 'GET', body, signal } = {}) {
  const res = await fetch(path, requestInit(method, body, csrfToken(), signal));
  const text = await res.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = { error: text.slice(0, 300) };
    }
  }
  if (res.status === 401) {
    globalThis.location.assign(loginURL(globalThis.location));
    throw new ApiError(401, 'signed out: going to the login page');
  }
  if (!res.ok) {
    const msg = data && typeof data.error === 'string' ? data.error : `${res.status} ${res.statusText}`;
    throw new ApiError(res.status, msg, data?.details);
  }
  return data;
}

/** feedPagesMax bounds how many pages of feeds allFeeds reads. */
export const feedPagesMax = 50;

/**
 * allFeeds reads GET /api/v1/feeds page after page (1,000 feeds a page)
 * and returns the feeds, at most feedPagesMax pages of them: a builder's
 * source list of tens of thousands of feeds is as far as a picker helps.
 * get is the API call (api by default), for tests.
 */
export async function allFeeds(get = api) {
  const out = [];
  let cursor = '';
  for (let page = 0; page < feedPagesMax; page++) {
    const q = new URLSearchParams({ limit: '1000' });
    if (cursor) q.set('cursor', cursor);
    const data = await get(`/api/v1/feeds?${q}`);
    const feeds = Array.isArray(data?.feeds) ? data.feeds : [];
    out.push(...feeds);
    cursor = typeof data?.next_cursor === 'string' ? data.next_cursor : '';
    if (!cursor) break;
  }
  return out;
}
