// Harness of slogfeed's browser end-to-end tests: starts `slogfeed serve
// --demo` from the binary named by SLOGFEED_BIN (scripts/e2e builds it),
// launches Debian's chromium through playwright-core, watches every page
// for uncaught errors and Content-Security-Policy violations, and saves
// screenshots to SLOGFEED_ARTIFACTS (default: artifacts/ beside this file).
//
// Nothing here builds or downloads anything: a missing binary or browser is
// a failure that says what to run.

import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));

/** Where Debian's chromium package puts the browser. */
export const chromiumPath = process.env.SLOGFEED_CHROMIUM || '/usr/bin/chromium';

/** Directory the screenshots go to. */
export const artifactsDir = path.resolve(process.env.SLOGFEED_ARTIFACTS || path.join(here, 'artifacts'));

/** The two viewports every main page is photographed at. */
export const viewports = {
  desktop: { width: 1280, height: 800 },
  phone: { width: 390, height: 844 },
};

// Bounds on the server's start and stop, generous for 2 busy cores.
const startTimeout = 30_000;
const stopGrace = 5_000;

// Chromium flags for a closed network: without the background-networking
// ones it keeps trying to reach its vendor's services.
const chromiumArgs = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-dev-shm-usage',
];

const servers = new Set();
process.on('exit', () => {
  // Last resort when a test file dies without its after() hook.
  for (const s of servers) s.proc.kill('SIGKILL');
});

/** freePort asks the kernel for a free TCP port on addr. */
export function freePort(host = '127.0.0.1') {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, host, () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function binary() {
  const bin = process.env.SLOGFEED_BIN;
  if (!bin) {
    throw new Error('SLOGFEED_BIN is not set: run ./scripts/e2e, which builds slogfeed and sets it');
  }
  if (!existsSync(bin)) {
    throw new Error(`SLOGFEED_BIN=${bin} does not exist: run ./scripts/e2e`);
  }
  return bin;
}

/**
 * startServer runs `slogfeed serve --demo` with a fresh data directory and
 * resolves once /healthz answers.
 *
 * @param {object} [opts]
 * @param {string} [opts.addr] listen address (default 127.0.0.1:0, the
 *   kernel picks the port; the real one is read from the
 *   "slogfeed: serving on http://..." line of its stderr)
 * @param {string} [opts.token] SLOGFEED_TOKEN for the server
 * @param {string} [opts.connectHost] host to reach it at when it listens on
 *   a wildcard address (default 127.0.0.1)
 * @returns {Promise<{base: string, port: number, token?: string, log: () => string, stop: () => Promise<void>}>}
 */
export async function startServer(opts = {}) {
  const bin = binary();
  const data = mkdtempSync(path.join(tmpdir(), 'slogfeed-e2e-'));
  const env = { ...process.env, SLOGFEED_DATA: '', SLOGFEED_ADDR: '', SLOGFEED_TOKEN: opts.token ?? '' };
  const args = ['serve', '--demo', '--addr', opts.addr ?? '127.0.0.1:0', '--data', data];
  const proc = spawn(bin, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const keep = (chunk) => {
    output += chunk;
    if (output.length > 1 << 20) output = output.slice(-(1 << 19));
  };
  proc.stdout.setEncoding('utf8').on('data', keep);
  proc.stderr.setEncoding('utf8').on('data', keep);
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));

  const server = { proc, data, log: () => output };
  servers.add(server);
  server.stop = async () => {
    if (!servers.has(server)) return;
    servers.delete(server);
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), stopGrace);
      await exited;
      clearTimeout(timer);
    }
    rmSync(data, { recursive: true, force: true });
  };

  try {
    const deadline = Date.now() + startTimeout;
    let base;
    while (!base) {
      const m = /slogfeed: serving on (http:\/\/\S+)/.exec(output);
      if (m) base = m[1];
      else if (proc.exitCode !== null || proc.signalCode !== null) {
        throw new Error(`slogfeed serve exited (${proc.exitCode ?? proc.signalCode}) before serving:\n${output}`);
      } else if (Date.now() > deadline) {
        throw new Error(`slogfeed serve did not say where it serves within ${startTimeout} ms:\n${output}`);
      } else await sleep(50);
    }
    const url = new URL(base);
    const port = Number(url.port);
    if (['0.0.0.0', '[::]', '::'].includes(url.hostname)) {
      url.hostname = opts.connectHost ?? '127.0.0.1';
    }
    server.base = url.origin;
    server.port = port;
    server.token = opts.token;
    await waitFor(async () => {
      const res = await fetch(server.base + '/healthz').catch(() => null);
      return res?.ok && (await res.json()).status === 'ok';
    }, { timeout: Math.max(1000, deadline - Date.now()), what: `${server.base}/healthz` });
    return server;
  } catch (err) {
    await server.stop();
    throw err;
  }
}

/** sleep resolves after ms milliseconds. */
export function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * waitFor polls check until it returns a truthy value, which it resolves
 * with, and fails after timeout milliseconds naming what it waited for.
 */
export async function waitFor(check, { timeout = 10_000, interval = 250, what = 'condition' } = {}) {
  const deadline = Date.now() + timeout;
  let last;
  for (;;) {
    try {
      const v = await check();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeout} ms waiting for ${what}${last ? `: ${last.message}` : ''}`);
    }
    await sleep(interval);
  }
}

/** launchBrowser starts Debian's chromium headless. */
export async function launchBrowser() {
  if (!existsSync(chromiumPath)) {
    throw new Error(`${chromiumPath} is missing: run ./scripts/deps (apt-get install chromium)`);
  }
  return chromium.launch({ executablePath: chromiumPath, args: chromiumArgs, headless: true, timeout: 60_000 });
}

/**
 * Watch collects what a page must not do: throw an uncaught error, violate
 * its Content-Security-Policy or log an error to the console. Failed
 * requests that the test provokes on purpose (a 400 for a bad URL, a 401
 * for a wrong token) show in the console as "Failed to load resource":
 * they are kept in `network` and do not count as problems.
 */
export class Watch {
  constructor() {
    this.problems = [];
    this.network = [];
  }

  /** attach listens on every page of context, the present and future ones. */
  async attach(context) {
    await context.exposeBinding('__slogfeedCSPViolation', ({ page }, v) => {
      this.problems.push(`CSP violation on ${page?.url()}: ${v.directive} blocked ${v.blocked} (${v.source}:${v.line})`);
    });
    await context.addInitScript(() => {
      document.addEventListener('securitypolicyviolation', (e) => {
        globalThis.__slogfeedCSPViolation({
          directive: e.effectiveDirective || e.violatedDirective,
          blocked: e.blockedURI,
          source: e.sourceFile,
          line: e.lineNumber,
        });
      });
    });
    const watchPage = (page) => {
      page.on('pageerror', (err) => this.problems.push(`uncaught error on ${page.url()}: ${err.message}`));
      page.on('console', (msg) => {
        if (msg.type() !== 'error') return;
        const text = msg.text();
        if (/^Failed to load resource: the server responded with a status of [45]\d\d/.test(text)) {
          this.network.push(`${page.url()}: ${text} (${msg.location()?.url ?? ''})`);
          return;
        }
        this.problems.push(`console error on ${page.url()}: ${text}`);
      });
    };
    context.pages().forEach(watchPage);
    context.on('page', watchPage);
  }

  /** check throws when a page misbehaved since the last check. */
  check() {
    if (this.problems.length === 0) return;
    const list = this.problems.splice(0);
    throw new Error(`the pages misbehaved:\n  ${list.join('\n  ')}`);
  }
}

/**
 * newSession opens a browser context of the given viewport with a Watch
 * attached, and one page in it.
 */
export async function newSession(browser, { viewport = viewports.desktop, baseURL } = {}) {
  const context = await browser.newContext({ viewport, baseURL, serviceWorkers: 'block' });
  context.setDefaultTimeout(15_000);
  context.setDefaultNavigationTimeout(20_000);
  const watch = new Watch();
  await watch.attach(context);
  const page = await context.newPage();
  return { context, page, watch };
}

function safeName(s) {
  return s.replace(/[^A-Za-z0-9._-]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 100);
}

/** screenshot saves a full-page PNG of page as artifacts/NAME.png. */
export async function screenshot(page, name) {
  mkdirSync(artifactsDir, { recursive: true });
  const file = path.join(artifactsDir, `${safeName(name)}.png`);
  await page.screenshot({ path: file, fullPage: true, animations: 'disabled', timeout: 20_000 });
  return file;
}

/**
 * screenshots photographs page at both viewports (NAME-desktop.png,
 * NAME-phone.png), then restores the viewport it had.
 */
export async function screenshots(page, name) {
  const was = page.viewportSize();
  for (const [label, size] of Object.entries(viewports)) {
    await page.setViewportSize(size);
    await screenshot(page, `${name}-${label}`);
  }
  if (was) await page.setViewportSize(was);
}

/**
 * e2e registers, for the calling test file, hooks that start a server
 * (startServer(serverOpts)) and the browser before its tests and stop them
 * after, also when a test failed. It returns the file's context: `server`,
 * `browser`, a desktop `session` ({context, page, watch}) and `test`, which
 * declares a test that gets that context, checks the page watch when the
 * body passes, and on failure saves FAIL-NAME.png and the server's log
 * beside the screenshots before failing.
 */
export function e2e(serverOpts = {}) {
  const ctx = {};
  before(async () => {
    ctx.server = await startServer(serverOpts);
    ctx.browser = await launchBrowser();
    ctx.session = await newSession(ctx.browser, { baseURL: ctx.server.base });
    ctx.page = ctx.session.page;
  });
  after(async () => {
    await ctx.session?.context.close().catch(() => {});
    await ctx.browser?.close().catch(() => {});
    await ctx.server?.stop();
  });
  ctx.test = (name, body) =>
    test(name, async (t) => {
      const { page, watch } = ctx.session;
      try {
        await body({ ...ctx, t });
        watch.check();
      } catch (err) {
        await saveFailure(name, page, ctx.server, watch);
        throw err;
      }
    });
  return ctx;
}

/** saveFailure keeps what helps to understand a failed test. */
export async function saveFailure(name, page, server, watch) {
  try {
    await screenshot(page, `FAIL-${name}`);
  } catch {
    // the page may be gone; the test's own error is what matters
  }
  mkdirSync(artifactsDir, { recursive: true });
  const notes = [
    `page: ${page?.url?.() ?? '(none)'}`,
    ...(watch ? watch.network.map((n) => `network: ${n}`) : []),
    ...(watch ? watch.problems.map((n) => `problem: ${n}`) : []),
    '--- server log ---',
    server?.log?.() ?? '(no server)',
  ];
  writeFileSync(path.join(artifactsDir, `FAIL-${safeName(name)}.log`), notes.join('\n'));
}

/** api calls slogfeed's JSON API and returns the parsed answer. */
export async function api(server, method, route, body, { token } = {}) {
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (token) headers.Authorization = `Bearer ${token}`;
  const res = await fetch(server.base + route, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text, headers: res.headers };
}
