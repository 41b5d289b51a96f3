// Walks a local directory the way a user would describe it: every entry below the root
// with its kind, size, whole-second mtime, permission bits and symlink target, never
// following symlinks. This is the "expected" side of every comparison with a share.

import { createHash } from 'node:crypto';
import { createReadStream, type BigIntStats } from 'node:fs';
import { lstat, readdir, readlink } from 'node:fs/promises';

export type EntryKind = 'file' | 'dir' | 'symlink';

export interface TreeEntry {
  /** Relative to the root, '/'-separated, no leading '/'. Invalid UTF-8 shows as U+FFFD. */
  path: string;
  kind: EntryKind;
  /** Bytes for files; what lstat says for the others. */
  size: number;
  /** Seconds since the epoch, rounded down. */
  mtime: number;
  /** mode & 0o7777 */
  mode: number;
  /** Symlinks only: the target exactly as stored (not resolved). */
  target?: string;
  /** Files only, when hashing was asked for: lowercase hex SHA-256 of the content. */
  sha256?: string;
  /** The path as raw bytes, for opening the file. */
  raw: Buffer;
}

export interface OtherEntry {
  path: string;
  /** 'fifo', 'socket', 'char-device', 'block-device' */
  kind: string;
}

export interface Tree {
  /** Sorted by path. The root itself is not included. */
  entries: TreeEntry[];
  /** Entries that are neither file, directory nor symlink; shares are not expected to list them. */
  others: OtherEntry[];
}

const utf8 = new TextDecoder('utf-8'); // not fatal: invalid bytes become U+FFFD, as in the UI

/**
 * An lstat's mtime in whole seconds, rounded down as the sharer does, from the
 * nanoseconds (`lstat(…, { bigint: true })`). Not from `mtimeMs`: a double of
 * milliseconds cannot hold the nanoseconds, and x.999999999 s rounds up to the next
 * second (one file in the 10M scale tree showed it).
 */
export function mtimeSeconds(st: { mtimeNs: bigint }): number {
  const s = st.mtimeNs / 1_000_000_000n;
  return Number(st.mtimeNs < 0n && s * 1_000_000_000n !== st.mtimeNs ? s - 1n : s);
}

/** SHA-256 of a file's content, lowercase hex. */
export async function sha256File(file: string | Buffer): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file, { highWaterMark: 1 << 20 })) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

function otherKind(st: import('node:fs').BigIntStats): string {
  if (st.isFIFO()) return 'fifo';
  if (st.isSocket()) return 'socket';
  if (st.isCharacterDevice()) return 'char-device';
  if (st.isBlockDevice()) return 'block-device';
  return 'unknown';
}

/**
 * Lists everything under `root` with lstat (one call per entry), never following
 * symlinks. With `hash: true` also reads every regular file and records its SHA-256.
 */
/** Names of one folder looked at together (their `lstat`s in flight at once). */
const WALK_AT_ONCE = 128;

export async function walkTree(root: string, options: { hash?: boolean } = {}): Promise<Tree> {
  const entries: TreeEntry[] = [];
  const others: OtherEntry[] = [];
  const rootRaw = Buffer.from(root);
  const pending: Array<{ raw: Buffer; path: string }> = [{ raw: rootRaw, path: '' }];
  const visit = async (dir: { raw: Buffer; path: string }, name: Buffer, raw: Buffer, st: BigIntStats): Promise<void> => {
    const rel = dir.path === '' ? utf8.decode(name) : `${dir.path}/${utf8.decode(name)}`;
    const common = { path: rel, size: Number(st.size), mtime: mtimeSeconds(st), mode: Number(st.mode & 0o7777n), raw };
    if (st.isSymbolicLink()) {
      const target = utf8.decode(await readlink(raw, { encoding: 'buffer' }));
      entries.push({ ...common, kind: 'symlink', target });
    } else if (st.isDirectory()) {
      entries.push({ ...common, kind: 'dir' });
      pending.push({ raw, path: rel });
    } else if (st.isFile()) {
      const entry: TreeEntry = { ...common, kind: 'file' };
      if (options.hash) entry.sha256 = await sha256File(raw);
      entries.push(entry);
    } else {
      others.push({ path: rel, kind: otherKind(st) });
    }
  };
  while (pending.length > 0) {
    const dir = pending.pop()!;
    const names = await readdir(dir.raw, { encoding: 'buffer' });
    // WALK_AT_ONCE names at a time: one lstat awaited after another took 15 s
    // for 100,000 files beside a busy browser.
    for (let at = 0; at < names.length; at += WALK_AT_ONCE) {
      const batch = names.slice(at, at + WALK_AT_ONCE).map((name) => ({ name, raw: Buffer.concat([dir.raw, Buffer.from('/'), name]) }));
      const stats = await Promise.all(batch.map(({ raw }) => lstat(raw, { bigint: true })));
      for (let k = 0; k < batch.length; k += 1) await visit(dir, batch[k]!.name, batch[k]!.raw, stats[k]!);
    }
  }
  entries.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  others.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  return { entries, others };
}

/** Totals a user would quote: entry count and file bytes. */
export function treeTotals(tree: Tree): { entries: number; files: number; dirs: number; symlinks: number; bytes: number } {
  let files = 0;
  let dirs = 0;
  let symlinks = 0;
  let bytes = 0;
  for (const e of tree.entries) {
    if (e.kind === 'file') {
      files += 1;
      bytes += e.size;
    } else if (e.kind === 'dir') dirs += 1;
    else symlinks += 1;
  }
  return { entries: tree.entries.length, files, dirs, symlinks, bytes };
}
