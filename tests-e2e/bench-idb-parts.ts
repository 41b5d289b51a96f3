// How fast a page reads a stored snapshot back from IndexedDB, by how its parts are
// grouped into Blob records. Prints one JSON line.
//
//   node_modules/.bin/tsx tests-e2e/bench-idb-parts.ts
//   IDB_PARTS=496 IDB_PART_BYTES=450000 IDB_RUNS=3 (the defaults: a 10M index's 223 MB)
//
// A snapshot is stored as parts of about 450 KB (core::index::snapshot), and a reopen
// reads them a chunk of 16 at a time (core::visit::REST_CHUNK_PARTS). Here: one Blob
// per part (as the page stores them), 4 parts per Blob, and a chunk's 16 in one Blob;
// each read a chunk at a time, all of a chunk's records at once, in a page doing
// nothing else. Nothing leaves the machine: the page comes from 127.0.0.1.

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { launchChromium } from './lib/chromium.ts';

const parts = Number(process.env.IDB_PARTS ?? '496');
const partBytes = Number(process.env.IDB_PART_BYTES ?? '450000');
const runs = Number(process.env.IDB_RUNS ?? '3');
const CHUNK = 16;
const GROUPS = [1, 4, 16];

const page = `<!doctype html><meta charset="utf-8"><script>
function req(r) { return new Promise((res, rej) => { r.onsuccess = () => res(r.result); r.onerror = () => rej(r.error); }); }
async function openDb(name) { const r = indexedDB.open(name, 1); r.onupgradeneeded = () => r.result.createObjectStore('p'); return req(r); }
// Bytes that do not compress, as a stored (already compressed) part.
function part(i, size) { const a = new Uint8Array(size); let x = (i + 1) * 2654435761 >>> 0; for (let k = 0; k + 1 < size; k += 2) { x ^= x << 13; x ^= x >>> 17; x ^= x << 5; a[k] = x; a[k + 1] = x >>> 8; } return a; }
window.store = async (parts, size, group) => {
  const db = await openDb('group-' + group);
  for (let g = 0; g < parts; g += group) {
    const tx = db.transaction('p', 'readwrite');
    const bufs = []; for (let i = g; i < Math.min(parts, g + group); i++) bufs.push(part(i, size));
    tx.objectStore('p').put({ blob: new Blob(bufs), lens: bufs.map((b) => b.length) }, g);
    await new Promise((r, e) => { tx.oncomplete = r; tx.onerror = () => e(tx.error); });
  }
  db.close();
};
window.readBack = async (parts, group, chunk) => {
  const db = await openDb('group-' + group);
  const t0 = performance.now(); let bytes = 0;
  for (let c = 0; c < parts; c += chunk) {
    const st = db.transaction('p', 'readonly').objectStore('p');
    const keys = []; for (let g = c; g < Math.min(parts, c + chunk); g += group) keys.push(g);
    const values = await Promise.all(keys.map((k) => req(st.get(k))));
    const buffers = await Promise.all(values.map((v) => v.blob.arrayBuffer()));
    for (const b of buffers) bytes += b.byteLength;
  }
  db.close();
  return { ms: performance.now() - t0, bytes };
};
</script>`;

const server = http.createServer((_q, s) => {
  s.writeHead(200, { 'content-type': 'text/html' });
  s.end(page);
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const chromium = await launchChromium({ name: 'idb-parts' });
try {
  const tab = await chromium.page();
  await tab.goto(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
  type Fns = { store(p: number, s: number, g: number): Promise<void>; readBack(p: number, g: number, c: number): Promise<{ ms: number; bytes: number }> };
  for (const group of GROUPS) await tab.evaluate(([p, s, g]) => (window as unknown as Fns).store(p, s, g), [parts, partBytes, group] as const);
  const read: Record<string, number[]> = {};
  for (let run = 0; run < runs; run += 1) {
    for (const group of GROUPS) {
      const r = await tab.evaluate(([p, g, c]) => (window as unknown as Fns).readBack(p, g, c), [parts, group, CHUNK] as const);
      if (r.bytes !== parts * partBytes) throw new Error(`read ${r.bytes} bytes back, stored ${parts * partBytes}`);
      (read[`parts_per_blob_${group}`] ??= []).push(Math.round(r.bytes / 1e6 / (r.ms / 1000)));
    }
  }
  console.log(JSON.stringify({ parts, part_bytes: partBytes, chunk_parts: CHUNK, read_mb_per_s: read }));
} finally {
  await chromium.close();
  server.close();
}
