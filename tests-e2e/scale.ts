// The scale benchmark (prints figures; budgets are compared by people, not asserted):
//   bash tests-e2e/run scale            (npm run e2e:scale)
//   SCALE_FILES=1000000 bash tests-e2e/run scale
// Builds (once, cached under tests-e2e/.tmp) a tree of SCALE_FILES small files in
// directories of 1,000, shares it, opens it in Chromium and measures:
//   index_seconds       sharer spawn -> page's index complete
//   persisted_seconds   sharer spawn -> every entry committed to IndexedDB
//   wire_bytes_per_entry, the page's longest main-thread task while the index filled,
//   first-byte latency of small reads with everything indexed (p50, p99),
// then checks the whole index against the tree (paths, kinds, sizes, mtimes, modes).
// The LAST stdout line is one JSON object. Exit 1 on an error or a mismatch.

import { mkdir, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { launchChromium, openLink, type ChromiumInstance } from './lib/chromium.ts';
import { scratchDir } from './lib/paths.ts';
import { startShare, type ShareProcess } from './lib/share-process.ts';
import { walkTree } from './lib/tree.ts';
import { compareIndex, enumerateIndex, formatMismatch, indexWireBytes, readInPage, waitForComplete } from './lib/verify.ts';

const log = (line: string) => console.log(line);
const perDir = 1000;

/** The cached tree for `files` files; rebuilt if an earlier build did not finish. */
async function scaleTree(files: number): Promise<string> {
  const dir = path.join(scratchDir, `scale-${files}`);
  const marker = path.join(scratchDir, `scale-${files}.done`);
  const done = await readFile(marker, 'utf8').catch(() => '');
  if (done === `${files}\n`) return dir;
  await rm(dir, { recursive: true, force: true });
  log(`scale: writing ${files} files under ${dir} ...`);
  const t0 = performance.now();
  const mtime = 1_700_000_000;
  for (let d = 0; d * perDir < files; d += 1) {
    const sub = path.join(dir, `d${String(d).padStart(4, '0')}`);
    await mkdir(sub, { recursive: true });
    const n = Math.min(perDir, files - d * perDir);
    await Promise.all(
      Array.from({ length: n }, (_, i) => writeFile(path.join(sub, `file-${String(i).padStart(4, '0')}.txt`), `${d}/${i}\n`)),
    );
    await utimes(sub, mtime, mtime);
  }
  await writeFile(marker, `${files}\n`);
  log(`scale: wrote the tree in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  return dir;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

const round = (x: number, digits = 3) => Math.round(x * 10 ** digits) / 10 ** digits;

async function main(): Promise<Record<string, unknown>> {
  const files = Number(process.env.SCALE_FILES ?? '100000');
  if (!Number.isInteger(files) || files < 1) throw new Error(`SCALE_FILES=${process.env.SCALE_FILES ?? ''} is not a positive integer`);
  const dir = await scaleTree(files);
  const tree = await walkTree(dir);
  const entries = tree.entries.length;

  let chromium: ChromiumInstance | undefined;
  let share: ShareProcess | undefined;
  try {
    chromium = await launchChromium({ name: 'scale', log });
    // Record main-thread long tasks from the first moment of the page's life.
    await chromium.context.addInitScript({
      content: `globalThis.__longTasks = []; try { new PerformanceObserver((l) => { for (const e of l.getEntries()) globalThis.__longTasks.push(e.duration); }).observe({ type: 'longtask', buffered: true }); } catch {}`,
    });
    const page = await chromium.page();
    share = await startShare(dir);
    const linkMs = share.linkMs;
    log(`scale: link after ${(linkMs / 1000).toFixed(3)} s`);
    await openLink(page, share.link, ['connected'], 60_000);
    const indexSeconds = await waitForComplete(page, share.spawnedAt, 600_000);
    log(`scale: index complete after ${indexSeconds.toFixed(3)} s`);
    const persistedHandle = await page.waitForFunction(
      () => {
        const p = window.linkfsShare?.progress();
        return p !== undefined && p.complete && p.persisted >= p.received;
      },
      undefined,
      { polling: 10, timeout: 600_000 },
    );
    await persistedHandle.dispose();
    const persistedSeconds = (performance.now() - share.spawnedAt) / 1000;
    const wire = await indexWireBytes(page);
    const longTasks = await page.evaluate(() => ((globalThis as unknown as { __longTasks?: number[] }).__longTasks ?? []).slice());
    const stats = await page.evaluate(() => window.linkfsStats?.() ?? null);
    const heap = await page.evaluate(() => (performance as unknown as { memory?: { usedJSHeapSize: number } }).memory?.usedJSHeapSize ?? null);

    const { entries: remote, problems } = await enumerateIndex(page);
    const mismatches = [...problems, ...compareIndex(tree, remote)];
    for (const m of mismatches.slice(0, 50)) log(`MISMATCH ${formatMismatch(m)}`);
    if (mismatches.length > 50) log(`... and ${mismatches.length - 50} more mismatches`);

    // First-byte latency: small files, one at a time, spread over the tree.
    const remoteFiles = remote.filter((r) => r.kind === 'file');
    const sample = Array.from({ length: Math.min(200, remoteFiles.length) }, (_, i) => remoteFiles[Math.floor((i * remoteFiles.length) / Math.min(200, remoteFiles.length))]!.id);
    const { results } = await readInPage(page, sample, 1, 10_000);
    const readErrors = results.filter((r) => r.error !== null);
    for (const r of readErrors.slice(0, 5)) log(`scale: read of entry ${r.id} failed: ${r.error}`);
    const latencies = results.filter((r) => r.error === null).map((r) => r.ms).sort((a, b) => a - b);

    await chromium.close();
    chromium = undefined;
    await share.stop();
    share = undefined;
    return {
      files,
      entries,
      link_seconds: round(linkMs / 1000),
      index_seconds: round(indexSeconds),
      persisted_seconds: round(persistedSeconds),
      entries_per_second: Math.round(entries / indexSeconds),
      wire_bytes_per_entry: wire === null ? null : round(wire / entries, 2),
      longest_main_thread_task_ms: longTasks.length === 0 ? 0 : Math.round(Math.max(...longTasks)),
      main_thread_tasks_over_100ms: longTasks.filter((d) => d > 100).length,
      page_js_heap_bytes_per_entry: heap === null ? null : round(heap / entries, 1),
      small_read_ms_p50: round(percentile(latencies, 50), 2),
      small_read_ms_p99: round(percentile(latencies, 99), 2),
      read_errors: readErrors.length,
      mismatches: mismatches.length,
      page_stats: stats,
      error: mismatches.length > 0 || readErrors.length > 0 ? `${mismatches.length} mismatches, ${readErrors.length} failed reads` : null,
    };
  } finally {
    await chromium?.close().catch(() => undefined);
    await share?.kill();
  }
}

let figures: Record<string, unknown>;
try {
  figures = await main();
} catch (e) {
  figures = { error: e instanceof Error ? e.message : String(e) };
}
if (figures.error !== null) log(`scale: FAILED: ${String(figures.error)}`);
console.log(JSON.stringify(figures));
process.exit(figures.error === null ? 0 : 1);
