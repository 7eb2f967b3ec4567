#!/usr/bin/env node
// ui-check: the browser check of `hypercloud trace serve`'s page, run by
// `hack/local-up.sh --ui --smoke` in the background of the demo (Node 20, Debian's chromium
// driven by playwright-core; both installed by hack/ui-tools.sh).
//
//   node hack/lib/ui-check.mjs --url URL --done-file FILE --traces DIR --screenshot PNG
//        [--expect-taint-removed NODE] [--timeout SECONDS (default 600)]
//     opens the page, waits until FILE exists (the demo is over), then checks that the page
//     holds every call of DIR/*.jsonl in order, updated live without a reload, showed NODE's
//     uninitialized taint and then its removal, asked nothing but loopback, listed no errors.
//   node hack/lib/ui-check.mjs --url URL --compare --screenshot PNG
//     checks the --compare page: two layouts, explained differences, none unexplained.
//
// Environment: HYPERCLOUD_PLAYWRIGHT (playwright-core's npm prefix; default the one
// hack/ui-tools.sh installs), HYPERCLOUD_CHROMIUM (default /usr/bin/chromium), HYPERCLOUD_CACHE.
// Prints `ui-check: OK: ...` and exits 0, or `ui-check: FAILED: <what>` and exits 1; the
// screenshot is saved either way.
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const TAINT = 'node.cloudprovider.kubernetes.io/uninitialized:NoSchedule';
const CHROMIUM_FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

const log = (msg) => process.stderr.write(`ui-check: ${msg}\n`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

class Failed extends Error {}

function parseArgs(argv) {
  const a = { timeout: 600, compare: false };
  const takes = { '--url': 'url', '--done-file': 'doneFile', '--traces': 'traces', '--screenshot': 'screenshot',
    '--expect-taint-removed': 'node', '--timeout': 'timeout' };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--compare') a.compare = true;
    else if (takes[argv[i]] && i + 1 < argv.length) a[takes[argv[i]]] = argv[++i];
    else throw new Failed(`unknown or incomplete argument ${JSON.stringify(argv[i])}`);
  }
  a.timeout = Number(a.timeout);
  const need = a.compare ? ['url', 'screenshot'] : ['url', 'doneFile', 'traces', 'screenshot'];
  const missing = need.filter((k) => !a[k]);
  if (missing.length || !(a.timeout > 0)) {
    throw new Failed('usage: ui-check.mjs --url URL --done-file FILE --traces DIR --screenshot PNG '
      + '[--expect-taint-removed NODE] [--timeout SECONDS] | --url URL --compare --screenshot PNG');
  }
  return a;
}

function loadPlaywright() {
  let prefix = process.env.HYPERCLOUD_PLAYWRIGHT;
  if (!prefix) {
    // The prefix hack/ui-tools.sh installs into, from the pin in hack/versions.env.
    const env = fs.readFileSync(new URL('../versions.env', import.meta.url), 'utf8');
    const version = /^PLAYWRIGHT_CORE_VERSION=(\S+)/m.exec(env)?.[1];
    const cache = process.env.HYPERCLOUD_CACHE || path.join(os.homedir(), '.cache', 'hypercloud');
    prefix = path.join(cache, 'ui-tools', `playwright-core-${version}`);
  }
  try {
    return createRequire(path.join(path.resolve(prefix), 'node_modules', 'index.js'))('playwright-core');
  } catch (e) {
    throw new Failed(`cannot load playwright-core from ${prefix} (run hack/ui-tools.sh install): ${e.message.split('\n')[0]}`);
  }
}

function isLoopback(url) {
  if (url.startsWith('data:')) return true;
  let host;
  try { host = new URL(url).hostname; } catch { return false; }
  return host === 'localhost' || host === '[::1]' || host === '::1' || /^127(\.\d{1,3}){3}$/.test(host);
}

// Every call of the trace files as "component method ts" keys (a multiset as a Map of counts).
// A last line without its newline may still be being written and is left for the next read.
function traceCalls(dir) {
  const counts = new Map();
  let files;
  try { files = fs.readdirSync(dir).filter((f) => f.endsWith('.jsonl')).sort(); } catch (e) {
    throw new Failed(`cannot read the trace directory ${dir}: ${e.message}`);
  }
  for (const f of files) {
    const text = fs.readFileSync(path.join(dir, f), 'utf8');
    const lines = text.split('\n');
    if (!text.endsWith('\n')) lines.pop();
    lines.forEach((line, i) => {
      if (!line.trim()) return;
      let r;
      try { r = JSON.parse(line); } catch { throw new Failed(`${f}:${i + 1} is not a JSON trace record`); }
      const k = `${r.component} ${r.method} ${r.ts_unix_ms}`;
      counts.set(k, (counts.get(k) || 0) + 1);
    });
  }
  return counts;
}

const total = (m) => [...m.values()].reduce((a, b) => a + b, 0);

// What `a` holds more often than `b`, as up to 5 keys.
function excess(a, b) {
  const out = [];
  for (const [k, n] of a) if (n > (b.get(k) || 0)) out.push(`${k} (${n - (b.get(k) || 0)}x)`);
  return out;
}

// The call rows of the page in DOM order, and whether their data-ts never decreases.
async function pageCalls(page) {
  return page.$$eval('#rows [data-type=call]', (rows) => {
    let sorted = true, last = -Infinity;
    const keys = rows.map((r) => {
      const ts = Number(r.dataset.ts);
      if (ts < last) sorted = false;
      last = ts;
      return `${r.dataset.component} ${r.dataset.method} ${r.dataset.ts}`;
    });
    return { keys, sorted };
  });
}

function counts(keys) {
  const m = new Map();
  for (const k of keys) m.set(k, (m.get(k) || 0) + 1);
  return m;
}

async function checkCalls(page, dir) {
  // The demo's components may still be calling: the page must come to hold every call the files
  // held when the demo was done, and nothing the files do not hold after each look at the page.
  const deadline = Date.now() + 30_000;
  const before = traceCalls(dir);
  let why = '';
  for (;;) {
    const { keys, sorted } = await pageCalls(page);
    const after = traceCalls(dir);
    const shown = counts(keys);
    const missing = excess(before, shown), extra = excess(shown, after);
    if (!sorted) why = 'the call rows are not in time order (data-ts decreases)';
    else if (missing.length) why = `${missing.length} calls of the trace files are not on the page, e.g. ${missing.slice(0, 5).join('; ')}`;
    else if (extra.length) why = `${extra.length} calls on the page are not in the trace files, e.g. ${extra.slice(0, 5).join('; ')}`;
    else if (!keys.length) why = 'no calls at all, on the page or in the trace files';
    else return `${keys.length} calls in order, as in ${dir}/*.jsonl (${total(before)} when done, ${total(after)} now)`;
    if (Date.now() > deadline) throw new Failed(why);
    await sleep(500);
  }
}

async function waitForDoneFile(file, seconds) {
  const deadline = Date.now() + seconds * 1000;
  let next = Date.now() + 60_000;
  while (!fs.existsSync(file)) {
    if (Date.now() > deadline) throw new Failed(`timed out after ${seconds}s waiting for the done file ${file}`);
    if (Date.now() > next) { log(`still waiting for ${file}`); next += 60_000; }
    await sleep(500);
  }
}

// Moves the timeline to row `which` ('first-node', 'untainted': the change that took the taint
// away, or 'last') and returns the Node's taints and providerID.
async function nodeAt(page, node, which) {
  const moved = await page.evaluate(([node, which, taint]) => {
    const rows = [...document.querySelectorAll('#rows [data-seq]')];
    const isNode = (r) => r.dataset.type === 'object' && r.dataset.kind === 'Node' && r.dataset.name === node;
    const i = which === 'last' ? rows.length - 1
      : which === 'untainted' ? rows.findIndex((r) => isNode(r) && r.textContent.includes(`- taint ${taint}`))
        : rows.findIndex(isNode);
    if (i < 0) return -1;
    const range = document.getElementById('timeline');
    range.value = String(i);
    range.dispatchEvent(new Event('input', { bubbles: true }));
    range.dispatchEvent(new Event('change', { bubbles: true }));
    return i;
  }, [node, which, TAINT]);
  if (moved < 0) throw new Failed(`the page has no ${which === 'untainted' ? `row saying "- taint ${TAINT}" for` : 'object row for'} Node ${node}`);
  await page.waitForFunction((i) => document.querySelector('#rows .current')
    && [...document.querySelectorAll('#rows [data-seq]')].indexOf(document.querySelector('#rows .current')) === i,
  moved, { timeout: 5000 }).catch(() => { throw new Failed(`the timeline did not move to row ${moved}`); });
  return page.evaluate((node) => {
    const card = document.querySelector(`#objects [data-kind=Node][data-name="${CSS.escape(node)}"]`);
    if (!card) return null;
    return {
      taints: [...card.querySelectorAll('.taint')].map((t) => t.textContent.trim()),
      providerId: card.querySelector('.provider-id')?.textContent.trim() || '',
    };
  }, node);
}

async function checkTaint(page, node, shot) {
  const follow = page.locator('#follow');
  if (await follow.isChecked()) await follow.uncheck();
  const first = await nodeAt(page, node, 'first-node');
  if (!first) throw new Failed(`at Node ${node}'s first row the objects panel does not show it`);
  if (!first.taints.includes(TAINT)) {
    throw new Failed(`at Node ${node}'s first row its taints are [${first.taints.join(', ')}], without ${TAINT}`);
  }
  const last = await nodeAt(page, node, 'last');
  if (!last) throw new Failed(`at the last row the objects panel does not show Node ${node}`);
  if (last.taints.includes(TAINT)) throw new Failed(`at the last row Node ${node} still has ${TAINT}`);
  if (!last.providerId || last.providerId === 'none') throw new Failed(`at the last row Node ${node} shows no providerID`);
  // The step the cloud-node controller initialised the Node at, pictured for the guide
  // (docs/guide/trace-view.png is such a picture).
  const at = await nodeAt(page, node, 'untainted');
  if (at?.taints.includes(TAINT)) throw new Failed(`at the row that removed ${TAINT} Node ${node} still shows it`);
  if (shot) {
    await page.screenshot({ path: shot, timeout: 30_000 });
    log(`screenshot of Node ${node}'s initialisation: ${shot}`);
  }
  return `Node ${node} first tainted, then untainted with providerID ${last.providerId}`;
}

async function checkCompare(page) {
  await page.waitForSelector('#differences', { timeout: 60_000 })
    .catch(() => { throw new Failed('no #differences panel within 60s'); });
  await page.waitForFunction(() => document.querySelectorAll('.layout').length >= 2, null, { timeout: 30_000 })
    .catch(() => {});
  const got = await page.evaluate(() => ({
    layouts: [...document.querySelectorAll('.layout')].map((l) => l.dataset.layout),
    explained: document.querySelectorAll('#differences .explained').length,
    unexplained: [...document.querySelectorAll('#differences .unexplained')]
      .map((u) => `${u.dataset.side || '?'}: ${(u.querySelector('code') || u).textContent.trim().slice(0, 160)}`),
  }));
  if (got.layouts.length !== 2) throw new Failed(`${got.layouts.length} .layout diagrams, not 2`);
  if (got.unexplained.length) throw new Failed(`${got.unexplained.length} unexplained differences: ${got.unexplained.join(' | ')}`);
  if (!got.explained) throw new Failed('no explained difference shown');
  return `layouts ${got.layouts.join(' and ')}, ${got.explained} explained differences, none unexplained`;
}

async function run(args, state) {
  const { chromium } = loadPlaywright();
  const executablePath = process.env.HYPERCLOUD_CHROMIUM || '/usr/bin/chromium';
  state.userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ui-check-chromium-'));
  state.context = await chromium.launchPersistentContext(state.userDataDir, {
    executablePath, headless: true, args: CHROMIUM_FLAGS, viewport: { width: 1600, height: 1000 }, timeout: 60_000,
  });
  const ctx = state.context;
  const requests = [], violations = [], pageErrors = [];
  ctx.on('request', (r) => requests.push(r.url()));
  await ctx.route('**/*', (route) => {
    const url = route.request().url();
    if (isLoopback(url)) return route.continue();
    violations.push(url);
    return route.abort('blockedbyclient');
  });
  const page = ctx.pages()[0] || await ctx.newPage();
  state.page = page;
  page.setDefaultTimeout(30_000);
  let navigations = 0;
  page.on('framenavigated', (f) => { if (f === page.mainFrame()) navigations++; });
  page.on('pageerror', (e) => pageErrors.push(`uncaught ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && /Content.Security.Policy|Refused to/i.test(m.text())) pageErrors.push(m.text());
  });

  // The server may still be starting: try again for a minute.
  for (const deadline = Date.now() + 60_000; ;) {
    try {
      await page.goto(args.url, { waitUntil: 'load', timeout: 30_000 });
      break;
    } catch (e) {
      const why = e.message.split('\n')[0];
      if (Date.now() > deadline || !/ERR_CONNECTION_REFUSED|ERR_EMPTY_RESPONSE|ERR_CONNECTION_RESET/.test(why)) {
        throw new Failed(`cannot open ${args.url}: ${why}`);
      }
      await sleep(1000);
    }
  }
  const navAtLoad = navigations;
  const results = [];
  if (args.compare) {
    results.push(await checkCompare(page));
  } else {
    await page.waitForSelector('#rows', { timeout: 60_000 })
      .catch(() => { throw new Failed('the page showed no #rows within 60s'); });
    const atLoad = await page.locator('#rows [data-type=call]').count();
    log(`page loaded with ${atLoad} calls; waiting for ${args.doneFile}`);
    await waitForDoneFile(args.doneFile, args.timeout);
    await page.selectOption('#page-size', 'all');
    results.push(await checkCalls(page, args.traces));
    const atEnd = await page.locator('#rows [data-type=call]').count();
    if (!(atLoad < atEnd)) throw new Failed(`the page did not update live: ${atLoad} calls at load, ${atEnd} at the end`);
    if (navigations !== navAtLoad) throw new Failed(`the page navigated ${navigations - navAtLoad} more times after it loaded (reloaded?)`);
    results.push(`live: ${atLoad} calls at load, ${atEnd} at the end, no reload`);
    if (args.node) results.push(await checkTaint(page, args.node, args.screenshot.replace(/\.png$/, '') + '-initialised.png'));
    const errors = await page.$$eval('#errors > *', (es) => es.map((e) => e.textContent.trim()));
    if (errors.length) throw new Failed(`the page lists ${errors.length} errors: ${errors.slice(0, 5).join(' | ')}`);
  }
  if (violations.length) {
    throw new Failed(`requests to other hosts than loopback (aborted): ${[...new Set(violations)].slice(0, 10).join(', ')}`);
  }
  if (!requests.length) throw new Failed('the page made no request at all');
  if (pageErrors.length) throw new Failed(`page errors: ${pageErrors.slice(0, 5).join(' | ')}`);
  results.push(`${requests.length} requests, all to loopback`);
  return results.join('; ');
}

async function main() {
  const state = {};
  let code = 1;
  let args;
  // Whatever happens, never outlive the timeout by much.
  const watchdog = setTimeout(() => {
    console.log('ui-check: FAILED: the check itself hung; giving up');
    process.exit(1);
  }, 1000 * (Number(process.argv[process.argv.indexOf('--timeout') + 1]) || 600) + 300_000);
  watchdog.unref();
  try {
    args = parseArgs(process.argv.slice(2));
    const summary = await run(args, state);
    console.log(`ui-check: OK: ${summary}`);
    code = 0;
  } catch (e) {
    const what = e instanceof Failed ? e.message : `${e.name}: ${e.message.split('\n')[0]}`;
    console.log(`ui-check: FAILED: ${what}`);
  } finally {
    if (state.page && args?.screenshot) {
      try {
        fs.mkdirSync(path.dirname(path.resolve(args.screenshot)), { recursive: true });
        await state.page.screenshot({ path: args.screenshot, fullPage: true, timeout: 30_000 });
        log(`screenshot: ${args.screenshot}`);
      } catch (e) {
        log(`no screenshot: ${e.message.split('\n')[0]}`);
      }
    }
    if (state.context) await Promise.race([state.context.close().catch(() => {}), sleep(15_000)]);
    if (state.userDataDir) fs.rmSync(state.userDataDir, { recursive: true, force: true });
  }
  process.exit(code);
}

main();
