import http from 'node:http';
import { readFileSync } from 'node:fs';
import { launchChromium } from './lib/chromium.ts';
import { execFileSync } from 'node:child_process';
// a 192px jpeg thumbnail
execFileSync('ffmpeg', ['-y', '-loglevel', 'error', '-i', '/work/bench-photos/' + process.argv[2], '-vf', 'scale=-1:192', '-q:v', '4', '/tmp/mb/t.jpg']);
const jpg = readFileSync('/tmp/mb/t.jpg');
console.log('thumb bytes', jpg.length);
const html = `<!doctype html><body><script>
window.t0 = performance.now();
</script></body>`;
const server = http.createServer((req, res) => {
  if (req.url === '/t.jpg') { res.setHeader('content-type', 'image/jpeg'); res.end(jpg); return; }
  res.setHeader('content-type', 'text/html'); res.end(html);
}).listen(0, '127.0.0.1');
await new Promise((r) => server.once('listening', r));
const port = (server.address() as any).port;
const c = await launchChromium({ name: 'mb' });
const p = await c.page();
await p.goto(`http://127.0.0.1:${port}/`);
// fill: 32 blobs and 32 buffers
await p.evaluate(async () => {
  const bytes = new Uint8Array(await (await fetch('/t.jpg')).arrayBuffer());
  const db: IDBDatabase = await new Promise((res) => { const r = indexedDB.open('x', 1); r.onupgradeneeded = () => { r.result.createObjectStore('b'); r.result.createObjectStore('a'); }; r.onsuccess = () => res(r.result); });
  const tx = db.transaction(['a', 'b'], 'readwrite');
  for (let i = 0; i < 2000; i++) { const copy = bytes.slice(); copy[copy.length - 3] = i & 255; tx.objectStore('b').put({ blob: new Blob([copy], { type: 'image/jpeg' }) }, i); tx.objectStore('a').put({ bytes: copy.buffer }, i); }
  await new Promise((r) => (tx.oncomplete = r));
  db.close();
});
for (let round = 0; round < 3; round++) {
  for (const kind of ['b', 'a', 'd', 'c'] as const) {
    const q = await c.page();
    await q.goto(`http://127.0.0.1:${port}/`);
    const r = await q.evaluate(async (kind) => {
      const t0 = performance.now();
      const db: IDBDatabase = await new Promise((res) => { const r = indexedDB.open('x', 1); r.onsuccess = () => res(r.result); });
      const tOpen = performance.now();
      const store = db.transaction(kind === 'b' ? 'b' : 'a', 'readonly').objectStore(kind === 'b' ? 'b' : 'a');
      const vals: any[] = await Promise.all(Array.from({ length: 32 }, (_, i) => new Promise((res) => { const g = store.get(i * 7); g.onsuccess = () => res(g.result); })));
      const tGot = performance.now();
      if (kind === 'c') {
        const bitmaps = await Promise.all(vals.map((v) => createImageBitmap(new Blob([v.bytes], { type: 'image/jpeg' }))));
        for (const b of bitmaps) { const cv = document.createElement('canvas'); cv.width = b.width; cv.height = b.height; cv.getContext('bitmaprenderer')!.transferFromImageBitmap(b); document.body.append(cv); }
        return { nav: t0, open: tOpen - t0, get: tGot - tOpen, img: performance.now() - tGot };
      }
      const b64 = (u8: Uint8Array) => { let s = ''; for (let i = 0; i < u8.length; i++) s += String.fromCharCode(u8[i]!); return btoa(s); };
      const urls = kind === 'd' ? vals.map((v) => 'data:image/jpeg;base64,' + b64(new Uint8Array(v.bytes))) : vals.map((v) => URL.createObjectURL(v.blob ?? new Blob([v.bytes], { type: 'image/jpeg' })));
      const imgs = urls.map((u) => { const i = new Image(); i.src = u; document.body.append(i); return i; });
      await Promise.all(imgs.map((i) => new Promise((r) => { if (i.complete) r(0); i.onload = r; i.onerror = r; })));
      const tImg = performance.now();
      return { nav: t0, open: tOpen - t0, get: tGot - tOpen, img: tImg - tGot };
    }, kind);
    console.log(kind, JSON.stringify(r, (k, v) => typeof v === 'number' ? Math.round(v) : v));
    await q.close();
  }
}
await c.close();
server.close();
