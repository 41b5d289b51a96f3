// Verifies any directory end to end:
//   SHARE_DIR=/some/dir npm run e2e:verify [-- extra linkfs share args]
// shares SHARE_DIR with the real `linkfs share`, opens the link in Chromium, waits for
// the complete index, compares every entry with the directory (paths, kinds, sizes,
// mtimes, modes, symlink targets), reads every file in the page and compares SHA-256.
// Every mismatch is printed (path, field, expected, got). Exits 1 on any mismatch or
// error. The LAST stdout line is always one JSON object with the figures:
//   entries, files, bytes, link_seconds, index_seconds, entries_per_second,
//   wire_bytes_per_entry, files_read, read_seconds, reads_per_second, read_mb_per_s,
//   mismatches, error
//
// Environment: LINKFS_VERIFY_READS=0 skips reading files; LINKFS_VERIFY_TIMEOUT=SECONDS
// bounds the wait for the complete index (default 600); LINKFS_VERIFY_STALL_MS aborts a
// read that makes no progress for that long (default 15000).
//
// VERIFY_FOLLOW=1: after the first verification (its JSON line printed at once), the
// share and the page stay open and lines are read from stdin. On each line `check`
// it waits (up to VERIFY_FOLLOW_TIMEOUT seconds, default 10) until the page's index
// equals the directory again, reads the files changed since the last check, and prints
// one JSON line: entries, mismatches, converge_seconds, files_checked. At the end of
// input it exits, 1 if any check had a mismatch. So anyone can drive a share through
// changes of their own and check it.

import { stat } from 'node:fs/promises';
import path from 'node:path';
import { launchChromium, openLink, type ChromiumInstance } from './lib/chromium.ts';
import { startShare, type ShareProcess } from './lib/share-process.ts';
import { treeTotals, walkTree } from './lib/tree.ts';
import { formatMismatch, verifyShare, type VerifyFigures } from './lib/verify.ts';
import { changedFiles, checkBytesInPage, convergeIndex } from './lib/follow.ts';
import { createInterface } from 'node:readline';
import type { Page } from 'playwright-core';
import type { Tree } from './lib/tree.ts';

const log = (line: string) => console.log(line);

/** The follow loop (see the header); returns how many checks had mismatches. */
async function follow(page: Page, dir: string, first: Tree, reads: boolean): Promise<number> {
  const timeoutMs = Number(process.env.VERIFY_FOLLOW_TIMEOUT ?? '10') * 1000;
  let before: Tree = first;
  let failed = 0;
  for await (const raw of createInterface({ input: process.stdin })) {
    const line = raw.trim();
    if (line === '') continue;
    if (line !== 'check') {
      log(`verify: unknown command ${JSON.stringify(line)} (the only one is "check")`);
      continue;
    }
    const c = await convergeIndex(page, dir, timeoutMs);
    const changed = changedFiles(before, c.tree);
    const mismatches = [...c.mismatches];
    if (mismatches.length === 0 && reads) mismatches.push(...(await checkBytesInPage(page, changed, c.remote)));
    for (const m of mismatches.slice(0, 40)) log(`MISMATCH ${formatMismatch(m)}`);
    if (mismatches.length > 0) failed += 1;
    before = c.tree;
    console.log(JSON.stringify({ entries: c.tree.entries.length, mismatches: mismatches.length, converge_seconds: Math.round(c.seconds * 1000) / 1000, files_checked: reads ? changed.length : 0 }));
  }
  return failed;
}

async function main(): Promise<{ figures: Partial<VerifyFigures>; error: string | null; printed?: boolean }> {
  const raw = process.env.SHARE_DIR;
  if (!raw) return { figures: {}, error: 'SHARE_DIR is not set: SHARE_DIR=/some/dir npm run e2e:verify' };
  const dir = path.resolve(raw);
  const st = await stat(dir).catch(() => null);
  if (st === null || !st.isDirectory()) return { figures: {}, error: `SHARE_DIR=${raw} is not a directory` };
  const reads = process.env.LINKFS_VERIFY_READS !== '0';
  const timeoutS = Number(process.env.LINKFS_VERIFY_TIMEOUT ?? '600');
  const stallMs = Number(process.env.LINKFS_VERIFY_STALL_MS ?? '15000');
  const shareArgs = process.argv.slice(2).filter((a) => a !== '--');

  log(`verify: walking ${dir}${reads ? ' and hashing its files' : ''} ...`);
  const t0 = performance.now();
  const tree = await walkTree(dir, { hash: reads });
  const totals = treeTotals(tree);
  log(`verify: ${totals.entries} entries (${totals.files} files, ${totals.dirs} directories, ${totals.symlinks} symlinks), ${(totals.bytes / 1e6).toFixed(1)} MB, in ${((performance.now() - t0) / 1000).toFixed(2)} s`);
  for (const o of tree.others) log(`verify: note: ${o.path} is a ${o.kind}; not expected in the share`);

  let share: ShareProcess | undefined;
  let chromium: ChromiumInstance | undefined;
  try {
    // The browser starts first: its start-up is not part of the sharer's index time.
    chromium = await launchChromium({ name: 'verify', log });
    const page = await chromium.page();
    share = await startShare(dir, { args: shareArgs });
    log(`verify: link ${share.link} after ${(share.linkMs / 1000).toFixed(3)} s`);
    await openLink(page, share.link, ['connected'], 60_000);
    const report = await verifyShare({ page, tree, spawnedAt: share.spawnedAt, linkMs: share.linkMs, reads, completeTimeoutMs: timeoutS * 1000, stallMs, log });
    for (const m of report.mismatches) log(`MISMATCH ${formatMismatch(m)}`);
    if (chromium.pageErrors.length > 0) log(`verify: uncaught errors in the page:\n  ${chromium.pageErrors.join('\n  ')}`);
    if (process.env.VERIFY_FOLLOW === '1') {
      const first = { figures: report.figures, error: report.mismatches.length > 0 ? `${report.mismatches.length} mismatches` : null };
      printFigures(first);
      const failedChecks = await follow(page, dir, tree, reads);
      await chromium.close();
      chromium = undefined;
      await share.stop();
      share = undefined;
      const error = first.error ?? (failedChecks > 0 ? `${failedChecks} checks had mismatches` : null);
      return { figures: report.figures, error, printed: true };
    }
    await chromium.close();
    chromium = undefined;
    await share.stop();
    share = undefined;
    return { figures: report.figures, error: report.mismatches.length > 0 ? `${report.mismatches.length} mismatches` : null };
  } finally {
    await chromium?.close().catch(() => undefined);
    await share?.kill();
  }
}

const empty: VerifyFigures = {
  entries: 0,
  files: 0,
  bytes: 0,
  link_seconds: 0,
  index_seconds: 0,
  entries_per_second: 0,
  wire_bytes_per_entry: null,
  files_read: 0,
  read_seconds: null,
  reads_per_second: null,
  read_mb_per_s: null,
  mismatches: 0,
};

function printFigures(outcome: { figures: Partial<VerifyFigures>; error: string | null }): void {
  const nulls = Object.fromEntries(Object.keys(empty).map((k) => [k, null]));
  console.log(JSON.stringify({ ...nulls, ...outcome.figures, error: outcome.error }));
}

let outcome: { figures: Partial<VerifyFigures>; error: string | null; printed?: boolean };
try {
  outcome = await main();
} catch (e) {
  outcome = { figures: {}, error: e instanceof Error ? e.message : String(e) };
}
if (outcome.error !== null) log(`verify: FAILED: ${outcome.error}`);
else log('verify: OK: the share matches the directory');
if (outcome.printed !== true) printFigures(outcome);
process.exit(outcome.error === null ? 0 : 1);
