// A reference fake of `linkfs share DIR`, for testing the harness itself (not a model
// of the protocol): it walks DIR, serves a page whose window.linkfsShare reads the
// index and the files over plain HTTP from 127.0.0.1, prints the link as its first
// stdout line and exits 0 on SIGTERM. A wrong secret gets 403 ('invalid-link').
//
//   LINKFS_BIN_DIR=tests-e2e/fake/bin <harness command>
//
// LINKFS_FAKE_FAULTS injects differences the harness must report, ';'-separated:
//   drop:PATH     leave PATH out of the index        corrupt:PATH  flip PATH's first byte
//   mtime:PATH    report PATH's mtime one second on  extra:NAME    list a file NAME at the root
//   stall:PATH    send PATH's first bytes, then nothing

import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { walkTree } from '../lib/tree.ts';

interface FakeEntry {
  id: number;
  parent: number;
  name: string;
  kind: 'file' | 'dir' | 'symlink';
  size: number;
  mtime: number;
  mode: number;
  target?: string;
  children?: number;
}

function parseArgs(argv: string[]): string {
  if (argv[0] !== 'share') throw new Error(`fake linkfs: only 'share' is implemented, got ${JSON.stringify(argv)}`);
  const rest = argv.slice(1);
  const positional: string[] = [];
  for (let i = 0; i < rest.length; i += 1) {
    if (rest[i] === '--relay' || rest[i] === '--bind') i += 1; // accepted, ignored
    else positional.push(rest[i]!);
  }
  if (positional.length !== 1) throw new Error(`fake linkfs share: expected one DIR, got ${JSON.stringify(positional)}`);
  return path.resolve(positional[0]!);
}

function faults(): Array<{ kind: string; arg: string }> {
  return (process.env.LINKFS_FAKE_FAULTS ?? '')
    .split(';')
    .filter((f) => f !== '')
    .map((f) => ({ kind: f.slice(0, f.indexOf(':')), arg: f.slice(f.indexOf(':') + 1) }));
}

const dir = parseArgs(process.argv.slice(2));
if (!(await stat(dir)).isDirectory()) throw new Error(`fake linkfs share: ${dir} is not a directory`);
const secret = randomBytes(16).toString('base64url');
const injected = faults();
const has = (kind: string, p: string) => injected.some((f) => f.kind === kind && f.arg === p);

const tree = await walkTree(dir);
const entries: FakeEntry[] = [{ id: 0, parent: 0, name: '', kind: 'dir', size: 0, mtime: 0, mode: 0o755 }];
const idOf = new Map<string, number>([['', 0]]);
const rawOf = new Map<number, Buffer>();
for (const e of tree.entries) {
  const id = entries.length;
  idOf.set(e.path, id);
  rawOf.set(id, e.raw);
  const parentPath = e.path.includes('/') ? e.path.slice(0, e.path.lastIndexOf('/')) : '';
  const entry: FakeEntry = { id, parent: idOf.get(parentPath)!, name: e.path.slice(e.path.lastIndexOf('/') + 1), kind: e.kind, size: e.size, mtime: e.mtime, mode: e.mode };
  if (e.target !== undefined) entry.target = e.target;
  if (has('mtime', e.path)) entry.mtime += 1;
  if (!has('drop', e.path)) entries.push(entry);
  else entries.push({ ...entry, parent: -1 }); // keeps ids stable; unreachable from the root
}
for (const f of injected.filter((x) => x.kind === 'extra')) entries.push({ id: entries.length, parent: 0, name: f.arg, kind: 'file', size: 0, mtime: 0, mode: 0o644 });
const pathOfId = new Map([...idOf].map(([p, id]) => [id, p]));

const here = path.dirname(fileURLToPath(import.meta.url));
const pageJs = await readFile(path.join(here, 'page.js'));
const html = '<!doctype html><meta charset="utf-8"><title>linkfs (fake)</title><body data-state="connecting"><p data-testid="status">Connecting</p><script src="/page.js"></script></body>';
const indexJson = JSON.stringify(entries.filter((e) => e.parent !== -1));

const server = http.createServer((req, res) => {
  const url = new URL(req.url ?? '/', 'http://x');
  if (url.pathname === '/') {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(html);
  } else if (url.pathname === '/page.js') {
    res.writeHead(200, { 'content-type': 'text/javascript' }).end(pageJs);
  } else if (url.pathname === '/alive' || url.pathname === '/favicon.ico') {
    res.writeHead(204).end();
  } else if (url.pathname === '/index') {
    if (req.headers['x-secret'] !== secret) res.writeHead(403).end('wrong secret');
    else res.writeHead(200, { 'content-type': 'application/json' }).end(indexJson);
  } else if (url.pathname.startsWith('/file/')) {
    const id = Number(url.pathname.slice('/file/'.length));
    const entry = entries[id];
    const raw = rawOf.get(id);
    if (entry === undefined || raw === undefined || entry.kind !== 'file') {
      res.writeHead(403).end('not a file in this share');
      return;
    }
    const p = pathOfId.get(id)!;
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    if (has('stall', p)) {
      res.write(Buffer.alloc(Math.min(1000, entry.size)));
      return; // never ends
    }
    let first = true;
    const stream = createReadStream(raw);
    stream.on('data', (chunk) => {
      const b = chunk as Buffer;
      if (first && has('corrupt', p) && b.length > 0) b[0] = b[0]! ^ 0xff;
      first = false;
      res.write(b);
    });
    stream.on('end', () => res.end());
    stream.on('error', () => res.destroy());
  } else {
    res.writeHead(404).end();
  }
});
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  console.log(`http://127.0.0.1:${port}/#fakeroom0000000.${secret}`);
});
process.on('SIGTERM', () => {
  server.close();
  server.closeAllConnections();
  process.exit(0);
});
