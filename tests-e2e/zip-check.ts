// The page's ZIP writer (web/src/wasm/zip-source.ts over client-zip) past every
// 32-bit limit, checked in Node: a folder of 70,000 small files (past 65,535
// entries) and a 4.1 GiB file (sparse, random at its start, middle and end: past
// 4 GiB of offset and of one member's size) become one ZIP whose length is exactly
// what the plan predicted before the first byte, and which Python's zipfile reads
// back member by member equal to the files (tests-e2e/lib/check_zip.py).
//
// This is the page's own planning and streaming code; only what the browser puts
// around it is replaced: the index is a walk of the folder (`walkIndex`) and the
// sharer's range reads are reads of the files (`FileRangeReader`). The browser's part,
// a ZIP streamed through the service worker to the download manager, is content test
// r's; it runs with a smaller file, since moving 4.1 GiB through the page took 5 of
// the CI's 45 minutes (LINKFS_CONTENT_BIG_GIB=4.1 runs it past 4 GiB in the browser).
//
//   node_modules/.bin/tsx tests-e2e/zip-check.ts [--keep]

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { closeSync, lstatSync, openSync, readdirSync, readSync, writeFileSync } from 'node:fs';
import { mkdir, mkdtemp, open, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { EntryId, EntryRow, ReadHandle } from '../web/src/api.ts';
import type { RangeReader, ReadSink } from '../web/src/wasm/entry-stream.ts';
import { planZip, zipSource } from '../web/src/wasm/zip-source.ts';
import { sparseWithRandomRegions } from './lib/fixture.ts';
import { mtimeSeconds } from './lib/tree.ts';

const GIB = 1024 ** 3;
const BIG = Math.floor(4.1 * GIB);
/** Past 65,535 entries: most empty (each costs a file on disk), every hundredth not. */
const SMALL_FILES = 70_000;

/**
 * Every entry under `root`, as the index would hold it; ids are positions. Synchronous
 * calls: 70,000 awaited `lstat`s one after another took 13 s here, these well under one.
 */
function walkIndex(root: string): { rows: EntryRow[]; paths: string[]; children: Map<number, number[]> } {
  const rows: EntryRow[] = [];
  const paths: string[] = [];
  const children = new Map<number, number[]>();
  const add = (full: string, name: string, parent: number): number => {
    const st = lstatSync(full, { bigint: true });
    const id = rows.length;
    const kind = st.isDirectory() ? 'dir' : st.isSymbolicLink() ? 'symlink' : 'file';
    rows.push({ id: id as EntryId, parent: parent as EntryId, name, kind, size: kind === 'file' ? Number(st.size) : 0, mtime: mtimeSeconds(st), mode: Number(st.mode & 0o777n) });
    paths.push(full);
    if (id !== parent) children.get(parent)!.push(id);
    if (kind === 'dir') {
      children.set(id, []);
      for (const child of readdirSync(full).sort()) add(path.join(full, child), child, id);
      rows[id]!.children = children.get(id)!.length;
    }
    return id;
  };
  add(root, '', 0);
  return { rows, paths, children };
}

/**
 * The sharer's range reads, as reads of the files (1 MiB at a time, in order), each
 * chunk handed over in a later task as the network would. Synchronous reads: 70,000
 * small files opened, read and closed through awaited calls took most of a minute here.
 */
class FileRangeReader implements RangeReader {
  private next = 1;
  private readonly cancelled = new Set<number>();
  /** Files open now (each read closes its own). */
  openFiles = 0;
  constructor(private readonly paths: string[]) {}

  start(entry: EntryId, offset: number, len: number, sink: ReadSink): ReadHandle {
    const handle = this.next++;
    void (async () => {
      await Promise.resolve();
      const fd = openSync(this.paths[entry]!, 'r');
      this.openFiles += 1;
      try {
        for (let at = offset; at < offset + len && !this.cancelled.has(handle); ) {
          const want = Math.min(1 << 20, offset + len - at);
          const buf = Buffer.allocUnsafe(want);
          const bytesRead = readSync(fd, buf, 0, want, at);
          if (bytesRead === 0) throw new Error(`${this.paths[entry]} ended at ${at}`);
          sink.data(new Uint8Array(buf.buffer, buf.byteOffset, bytesRead));
          at += bytesRead;
          await Promise.resolve();
        }
        if (!this.cancelled.has(handle)) sink.done();
      } catch (e) {
        sink.failed(String(e));
      } finally {
        this.openFiles -= 1;
        closeSync(fd);
      }
    })();
    return handle as ReadHandle;
  }

  cancel(handle: ReadHandle): void {
    this.cancelled.add(handle);
  }
}

/** A share whose own name climbs (the sharer names its root): no member leaves the folder it unpacks into. */
function aClimbingRootNameStaysInside(): void {
  for (const rootName of ['../../../.config/autostart', '..', '.', '/etc', 'a/../../b', 'x\0y']) {
    const rows: EntryRow[] = [
      { id: 0 as EntryId, parent: 0 as EntryId, name: rootName, kind: 'dir', size: 0, mtime: 9e15, mode: 0o755, children: 1 },
      { id: 1 as EntryId, parent: 0 as EntryId, name: 'x.desktop', kind: 'file', size: 0, mtime: 1, mode: 0o644 },
    ];
    const list = (dir: EntryId, start: number, count: number) =>
      dir === 0 ? { total: 1, rows: [rows[1]!].slice(start, start + count) } : { total: 0, rows: [] };
    const { members } = planZip([rows[0]!], list, 'share');
    for (const m of members) {
      const parts = m.path.split('/').filter((p, i, all) => i < all.length - 1 || p !== '');
      assert.ok(
        !m.path.startsWith('/') && parts.every((p) => p !== '..' && p !== '.' && p !== '' && !p.includes('\0')),
        `a member of a share named ${JSON.stringify(rootName)} is ${JSON.stringify(m.path)}`,
      );
    }
    assert.equal(members.length, 2, 'the folder and its file');
  }
}

async function main(): Promise<void> {
  aClimbingRootNameStaysInside();
  const keep = process.argv.includes('--keep');
  const base = await mkdtemp(path.join(tmpdir(), 'linkfs-zip-check-'));
  try {
    const folder = path.join(base, 'past-limits');
    const many = path.join(folder, 'many');
    await mkdir(many, { recursive: true });
    for (let i = 0; i < SMALL_FILES; i++) writeFileSync(path.join(many, `f${i}.txt`), i % 100 === 0 ? `file ${i}\n` : '');
    await sparseWithRandomRegions(path.join(folder, 'huge.img'), BIG);
    await writeFile(path.join(folder, 'after the huge one.txt'), 'a member whose header sits past 4 GiB\n');

    const { rows, paths, children } = walkIndex(folder);
    const list = (dir: EntryId, start: number, count: number) => {
      const ids = children.get(dir) ?? [];
      return { total: ids.length, rows: ids.slice(start, start + count).map((id) => rows[id]!) };
    };
    const { plan, members } = planZip([rows[0]!], list, 'past-limits');
    assert.equal(plan.files, SMALL_FILES + 2, 'files planned');
    assert.ok(plan.size > 4 * GIB, `the ZIP is planned at ${plan.size} bytes, past 4 GiB`);

    const reader = new FileRangeReader(paths);
    const out = path.join(base, 'past-limits.zip');
    const fh = await open(out, 'w');
    const started = performance.now();
    let written = 0;
    try {
      const stream = zipSource(reader, plan, members).open(0, plan.size);
      // client-zip gives a few small chunks per member: written 8 MiB at a time. A
      // block of zeros (most of the sparse file) is left a hole: the file reads the
      // same, and this disk wrote the 4.4 GB at about 100 MB/s, most of the check's time.
      const held: Uint8Array[] = [];
      let heldBytes = 0;
      let at = 0;
      const zeros = Buffer.alloc(8 << 20);
      const flush = async (): Promise<void> => {
        const block = Buffer.concat(held);
        if (block.length > zeros.length || !block.equals(zeros.subarray(0, block.length))) await fh.write(block, 0, block.length, at);
        at += block.length;
        held.length = 0;
        heldBytes = 0;
      };
      for await (const chunk of stream as unknown as AsyncIterable<Uint8Array>) {
        held.push(chunk.slice());
        heldBytes += chunk.byteLength;
        written += chunk.byteLength;
        if (heldBytes >= 8 << 20) await flush();
      }
      await flush();
      await fh.truncate(at);
    } finally {
      await fh.close();
    }
    const seconds = (performance.now() - started) / 1000;
    assert.equal(written, plan.size, `the ZIP came out at ${written} bytes; the plan promised ${plan.size} (the page's progress and Content-Length)`);
    assert.equal(reader.openFiles, 0, 'every file read was closed');

    const check = spawnSync('python3', [path.join(import.meta.dirname, 'lib', 'check_zip.py'), out, folder, 'past-limits'], { encoding: 'utf8' });
    assert.equal(check.status, 0, `Python's zipfile found problems in the ZIP: ${check.stdout}${check.stderr}`);
    const report = JSON.parse(check.stdout) as { members: number; files: number; renamed: number };
    assert.equal(report.files, SMALL_FILES + 2, `the ZIP holds ${report.files} files`);
    assert.equal(report.renamed, 0, 'no member renamed');
    console.log(JSON.stringify({ zip_bytes: written, members: report.members, files: report.files, write_seconds: Number(seconds.toFixed(1)) }));
  } finally {
    if (keep) console.log(`kept ${base}`);
    else await rm(base, { recursive: true, force: true });
  }
}

await main();
