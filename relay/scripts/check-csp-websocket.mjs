// Checks in real Chromium that the relay's Content-Security-Policy lets a page (and
// a dedicated worker) open its same-origin signaling WebSocket (`connect-src 'self'`
// covering ws:) and blocks a WebSocket to any other origin. Prints JSON; exits 1 on failure.
//
// Run in a private network namespace (nothing leaves the machine):
//   unshare -n sh -c 'ip link set lo up && node relay/scripts/check-csp-websocket.mjs RELAY_BIN'
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { chromium } from 'playwright-core';

const relayBin = process.argv[2];
if (!relayBin) {
  console.error('usage: check-csp-websocket.mjs RELAY_BIN');
  process.exit(2);
}

const dir = mkdtempSync(join(tmpdir(), 'linkfs-csp-'));
writeFileSync(join(dir, 'index.html'), '<!doctype html><title>csp</title><script src="/app.js"></script>');
writeFileSync(join(dir, 'app.js'), `
window.results = {};
function tryWs(name, url) {
  return new Promise((resolve) => {
    let ws;
    try { ws = new WebSocket(url); } catch (e) { resolve('threw: ' + e.name); return; }
    ws.onmessage = (ev) => { resolve('message: ' + ev.data); ws.close(); };
    ws.onerror = () => resolve('error');
  }).then((r) => { window.results[name] = r; });
}
const violations = [];
document.addEventListener('securitypolicyviolation', (e) => violations.push(e.violatedDirective + ' ' + e.blockedURI));
const fromWorker = new Promise((resolve) => {
  const w = new Worker('/worker.js');
  w.onmessage = (ev) => resolve(ev.data);
  w.onerror = () => resolve('worker failed to load');
}).then((r) => { window.results.worker = r; });
window.done = Promise.all([
  tryWs('same', 'ws://' + location.host + '/signal/csp-check-room?role=host'),
  tryWs('other', 'ws://127.0.0.2:' + location.port + '/signal/csp-check-room2?role=host'),
  fromWorker,
]).then(() => { window.results.violations = violations; });
`);
// The architecture opens the signaling socket from a worker: check that too.
writeFileSync(join(dir, 'worker.js'), `
const ws = new WebSocket('ws://' + location.host + '/signal/csp-check-room3?role=host');
ws.onmessage = (ev) => { postMessage('message: ' + ev.data); ws.close(); };
ws.onerror = () => postMessage('error');
`);

async function startRelay() {
  const relay = spawn(relayBin, ['--bind', '127.0.0.1:0', '--web-dir', dir], { stdio: ['ignore', 'pipe', 'inherit'] });
  const line = await new Promise((resolve, reject) => {
    createInterface({ input: relay.stdout }).once('line', resolve);
    relay.once('exit', (code) => reject(new Error('relay exited ' + code)));
  });
  return { relay, origin: line.slice(line.indexOf('http://')).trim() };
}

const { relay, origin } = await startRelay();
let ok = false;
const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--no-sandbox', '--headless', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const page = await browser.newPage();
  const response = await page.goto(origin + '/');
  const csp = response.headers()['content-security-policy'];
  await page.waitForFunction(() => window.done !== undefined);
  await page.evaluate(() => window.done);
  const results = await page.evaluate(() => window.results);
  ok = results.same.startsWith('message: {"t":"welcome"')
    && results.worker.startsWith('message: {"t":"welcome"')
    && results.other !== undefined && !results.other.startsWith('message')
    && results.violations.some((v) => v.startsWith('connect-src'));
  console.log(JSON.stringify({ ok, csp, results }));
} finally {
  await browser.close();
  relay.kill('SIGTERM');
  rmSync(dir, { recursive: true, force: true });
}
process.exit(ok ? 0 : 1);
