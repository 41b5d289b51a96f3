// Following a share while its folder changes: wait (bounded) until what a receiver
// shows equals the directory again, then check the bytes of the files that changed.
// Used by the live-share e2e test and by `VERIFY_FOLLOW=1 npm run e2e:verify`.

import type { Page } from 'playwright-core';
import { sha256File, walkTree, type Tree, type TreeEntry } from './tree.ts';
import { compareIndex, enumerateIndex, verifyReads, type Mismatch, type RemoteEntry } from './verify.ts';

export interface Converged {
  /** The directory as it was when the receiver matched it (or at the deadline). */
  tree: Tree;
  /** Seconds from the call until the receiver matched (or the deadline). */
  seconds: number;
  /** Empty when the receiver matched the directory. */
  mismatches: Mismatch[];
}

/** Waits up to `timeoutMs` until the page's complete index equals `dir`. */
export async function convergeIndex(page: Page, dir: string, timeoutMs = 10_000): Promise<Converged & { remote: RemoteEntry[] }> {
  const started = performance.now();
  for (;;) {
    const tree = await walkTree(dir);
    const { entries: remote, problems } = await enumerateIndex(page);
    const mismatches = [...problems, ...compareIndex(tree, remote)];
    const seconds = (performance.now() - started) / 1000;
    if (mismatches.length === 0 || seconds * 1000 > timeoutMs) return { tree, remote, seconds, mismatches };
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Differences between what a mount shows and the directory (dir sizes are not compared). */
export function compareTrees(local: Tree, mounted: Tree): Mismatch[] {
  const out: Mismatch[] = [];
  const byPath = new Map(mounted.entries.map((e) => [e.path, e]));
  for (const l of local.entries) {
    const m = byPath.get(l.path);
    byPath.delete(l.path);
    if (m === undefined) {
      out.push({ path: l.path, field: 'presence', expected: `present (${l.kind})`, got: 'missing' });
      continue;
    }
    if (m.kind !== l.kind) {
      out.push({ path: l.path, field: 'kind', expected: l.kind, got: m.kind });
      continue;
    }
    if (l.kind === 'file' && m.size !== l.size) out.push({ path: l.path, field: 'size', expected: l.size, got: m.size });
    if (m.mtime !== l.mtime) out.push({ path: l.path, field: 'mtime', expected: l.mtime, got: m.mtime });
    if (l.kind !== 'symlink' && m.mode !== l.mode) out.push({ path: l.path, field: 'mode', expected: l.mode, got: m.mode });
    if (l.kind === 'symlink' && m.target !== l.target) out.push({ path: l.path, field: 'target', expected: l.target, got: m.target });
  }
  for (const m of byPath.values()) out.push({ path: m.path, field: 'presence', expected: 'absent', got: `present (${m.kind})` });
  return out;
}

/** Waits up to `timeoutMs` until the mount at `mnt` shows what `dir` holds. */
export async function convergeMount(mnt: string, dir: string, timeoutMs = 10_000): Promise<Converged> {
  const started = performance.now();
  for (;;) {
    const tree = await walkTree(dir);
    const mounted = await walkTree(mnt).catch((e: unknown) => {
      throw new Error(`cannot walk the mount ${mnt}: ${e instanceof Error ? e.message : String(e)}`);
    });
    const mismatches = compareTrees(tree, mounted);
    const seconds = (performance.now() - started) / 1000;
    if (mismatches.length === 0 || seconds * 1000 > timeoutMs) return { tree, seconds, mismatches };
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Files that are new or whose size or mtime differ from `before`. */
export function changedFiles(before: Tree | null, now: Tree): TreeEntry[] {
  const old = new Map((before?.entries ?? []).map((e) => [e.path, e]));
  return now.entries.filter((e) => {
    if (e.kind !== 'file') return false;
    const o = old.get(e.path);
    return o === undefined || o.kind !== 'file' || o.size !== e.size || o.mtime !== e.mtime;
  });
}

/** Hashes `files` locally (in place) and checks the page reads the same bytes. */
export async function checkBytesInPage(page: Page, files: TreeEntry[], remote: RemoteEntry[]): Promise<Mismatch[]> {
  for (const f of files) f.sha256 = await sha256File(f.raw);
  return (await verifyReads(page, files, remote)).mismatches;
}

/** Checks the mount at `mnt` gives the same bytes as `dir` for `files`. */
export async function checkBytesOnMount(mnt: string, files: TreeEntry[]): Promise<Mismatch[]> {
  const out: Mismatch[] = [];
  for (const f of files) {
    const want = await sha256File(f.raw);
    const got = await sha256File(`${mnt}/${f.path}`).catch((e: unknown) => `error: ${e instanceof Error ? e.message : String(e)}`);
    if (got !== want) out.push({ path: f.path, field: 'mount.sha256', expected: want, got });
  }
  return out;
}
