// Talking to slogfeed's JSON API from the UI pages: same-origin
// credentials, the page's CSRF token on every change, and a trip to the
// login page when the session has expired (or, for a page with work to
// keep, an error that says so).

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

/** sessionExpired is what a page that stays after a 401 tells its user. */
export const sessionExpired = 'Your session has expired: log in again in another tab, then save.';

/**
 * api calls path and returns its JSON (null for an empty answer). Any
 * status other than 2xx throws an ApiError; a 401 first sends the browser
 * to the login page, unless stay is set (a page with unsaved work): then
 * the ApiError (status 401) says sessionExpired.
 */
export async function api(path, { method = 'GET', body, signal, stay = false } = {}) {
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
    if (stay) throw new ApiError(401, sessionExpired);
    globalThis.location.assign(loginURL(globalThis.location));
    throw new ApiError(401, 'signed out: going to the login page');
  }
  if (!res.ok) {
    const msg = data && typeof data.error === 'string' ? data.error : `${res.status} ${res.statusText}`;
    throw new ApiError(res.status, msg, data?.details);
  }
  return data;
}

/** feedSuggestions is how many feeds searchFeeds asks for. */
export const feedSuggestions = 20;

/**
 * searchFeeds asks GET /api/v1/feeds for the first feedSuggestions feeds
 * whose title, slug or URL holds text, as typed in a source's feed box:
 * a reference's prefix (sensor/, pipe/, feed/) is not sought. get is the
 * API call (api by default), for tests.
 */
export async function searchFeeds(text, { get = api, signal } = {}) {
  const q = String(text ?? '')
    .trim()
    .replace(/^(sensor|pipe|feed)\//i, '')
    .trim();
  const params = new URLSearchParams();
  if (q) params.set('q', q);
  params.set('limit', String(feedSuggestions));
  const data = await get(`/api/v1/feeds?${params}`, { signal });
  return Array.isArray(data?.feeds) ? data.feeds : [];
}

/**
 * pageInfo reads a page of the UI (path, same origin) for what a script
 * on a page rendered earlier may need again: the session's CSRF token
 * (csrf), the page's heading (heading, its text as the server wrote it)
 * and whether the session is logged in (loggedIn false when the server
 * sent the login page instead). parse turns HTML into a document
 * (DOMParser by default), for tests.
 */
export async function pageInfo(path, parse = (html) => new DOMParser().parseFromString(html, 'text/html')) {
  const res = await fetch(path, { credentials: 'same-origin', headers: { Accept: 'text/html' } });
  const doc = parse(await res.text());
  const loggedIn = res.ok && !new URL(res.url || path, 'http://x').pathname.startsWith('/ui/login');
  return { csrf: csrfToken(doc), heading: doc?.querySelector?.('main h1')?.textContent?.trim() || '', loggedIn };
}

/** setCSRFToken replaces the page's <meta name="csrf-token">. */
export function setCSRFToken(token, doc = globalThis.document) {
  const m = doc?.querySelector?.('meta[name="csrf-token"]');
  if (m && token) m.setAttribute('content', token);
}
