import http from 'node:http';
import { launchChromium } from './lib/chromium.ts';
const html = (busy: number) => `<!doctype html><head><script>
window.tCall = performance.now();
const r = indexedDB.open('x', 1); r.onupgradeneeded = () => r.result.createObjectStore('a');
r.onsuccess = () => { window.tOpen = performance.now(); };
const end = performance.now() + ${busy}; while (performance.now() < end) {}
window.tBusyDone = performance.now();
</script></head><body>x</body>`;
const server = http.createServer((req, res) => { res.setHeader('content-type', 'text/html'); res.end(html(Number(new URL(req.url!, 'http://x').searchParams.get('busy') ?? 0))); }).listen(0, '127.0.0.1');
await new Promise((r) => server.once('listening', r));
const port = (server.address() as any).port;
const c = await launchChromium({ name: 'mb' });
const p0 = await c.page();
await p0.goto(`http://127.0.0.1:${port}/?busy=0`);
for (const busy of [0, 0, 50, 50, 0]) {
  const q = await c.page();
  await q.goto(`http://127.0.0.1:${port}/?busy=${busy}`);
  await q.waitForFunction(() => (window as any).tOpen !== undefined);
  console.log(busy, await q.evaluate(() => ({ call: Math.round((window as any).tCall), busyDone: Math.round((window as any).tBusyDone), open: Math.round((window as any).tOpen) })));
  await q.close();
}
await c.close(); server.close();
