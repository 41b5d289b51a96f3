// What adding a big file through the page costs: a file of UPLOAD_MIB (default 4096)
// added in Chromium through an upload link, its rate, and the browser's memory while
// it goes (the JS heaps of the page and its workers, both wasm memories, and the
// renderers' resident memory, sampled every second against a sample before). The
// page must stream the file from disk: its growth is expected to stay far below the
// file's size. The rate is the whole add (hashing included: the file is read twice).
// Then the page saves the same file (as a user's click does) for the ratio to the
// download direction. Prints one JSON line (`lanes`: the most extra connections the
// page showed while it added the file).
//
//   bash tests-e2e/run upload-bench                      a share of its own on this host
//   UPLOAD_MIB=1024 bash tests-e2e/run upload-bench
//   LINK=... UPLOAD_FILE=F bash tests-e2e/run upload-bench
//       adds F through an upload link shared elsewhere (bench:wan does, across its
//       line); the caller compares what landed.

import { spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { MemorySampler, type BrowserMemory } from './lib/browser-memory.ts';
import { launchChromium, openLink } from './lib/chromium.ts';
import { downloadThroughPage } from './lib/page-download.ts';
import { binary, scratchDir } from './lib/paths.ts';
import { startShare, type ShareProcess } from './lib/share-process.ts';

const log = (line: string) => console.error(line);

await mkdir(scratchDir, { recursive: true });
const src = await mkdtemp(path.join(scratchDir, 'upload-bench-src-'));
let file = process.env.UPLOAD_FILE ?? '';
if (file === '') {
  file = path.join(src, 'big.bin');
  const made = spawnSync('sh', ['-c', `head -c ${Number(process.env.UPLOAD_MIB ?? 4096) * 1048576} /dev/urandom > '${file}'`]);
  if (made.status !== 0) throw new Error(`could not make ${file}`);
}
const bytes = (await stat(file)).size;

// The link: given, or an upload link of a share made here.
let link = process.env.LINK ?? '';
let dir: string | null = null;
let s: ShareProcess | null = null;
if (link === '') {
  dir = await mkdtemp(path.join(scratchDir, 'upload-bench-share-'));
  await writeFile(path.join(dir, 'readme.txt'), 'bench\n');
  s = await startShare(dir, { args: ['--no-qr'] });
  const r = spawnSync(binary('linkfs'), ['link', 'add', '--allow-upload', '--dir', dir], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`link add: ${r.stderr}`);
  link = r.stdout.trim();
}

const chromium = await launchChromium({ name: 'upload-bench', log });
let result: Record<string, unknown> = {};
try {
  const page = await chromium.page();
  await openLink(page, link, ['connected'], 60_000);
  await page.waitForSelector('[data-testid=add-files]', { state: 'visible', timeout: 30_000 });
  const sampler = await MemorySampler.attach(page, chromium.browserPid);
  await new Promise((r) => setTimeout(r, 1000));
  const before = await sampler.sample(true);
  let peak: BrowserMemory = before;
  const t0 = performance.now();
  await page.setInputFiles('[data-testid=upload-files-input]', file);
  let landed = '';
  // The most lanes the page's connection info showed beside its link meanwhile.
  let lanes = 0;
  for (;;) {
    const shown = await page
      .$eval('[data-testid=connection-info]', (e) => Number((e as HTMLElement).dataset['lanes'] ?? 0))
      .catch(() => 0);
    lanes = Math.max(lanes, Number.isFinite(shown) ? shown : 0);
    const state = await page
      .$eval('[data-testid=upload]', (e) => ({ state: (e as HTMLElement).dataset['state'] ?? '', detail: e.querySelector('.download-detail')?.textContent ?? '' }))
      .catch(() => null);
    if (state?.state === 'done') {
      // "Added as NAME (that name was taken)" or "Added (size)".
      landed = /^Added as (.*) \(that name was taken\)$/.exec(state.detail)?.[1] ?? path.basename(file);
      break;
    }
    if (state?.state === 'failed') throw new Error(`the upload failed: ${state.detail}`);
    const m = await sampler.sample();
    peak = { ...(m.total > peak.total ? m : peak), rendererRss: Math.max(m.rendererRss, peak.rendererRss) };
    await new Promise((r) => setTimeout(r, 1000));
  }
  const seconds = (performance.now() - t0) / 1000;
  // "Added" is said when the file landed; the listing shows it once the
  // sharer's watch took it in (a live change: within about half a second).
  const listedT0 = performance.now();
  while ((await page.evaluate((p) => window.linkfsShare!.lookup(p), landed)) === null) {
    if (performance.now() - listedT0 > 10_000) throw new Error(`${landed} was added but is not in the listing 10 s later`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const listedMs = Math.round(performance.now() - listedT0);
  await sampler.detach();
  if (dir !== null) {
    const same = spawnSync('cmp', ['-s', file, path.join(dir, landed)]).status === 0;
    if (!same) throw new Error('the file on the sharer\'s disk is not the one added');
  }
  // The other direction in the same run: the page saves the file it added.
  const down = await downloadThroughPage(page, { target: landed, out: path.join(src, 'saved.bin'), browserPid: chromium.browserPid, log });
  result = {
    bytes,
    landed,
    seconds: Number(seconds.toFixed(2)),
    mb_per_s: Number((bytes / 1e6 / seconds).toFixed(1)),
    lanes,
    listed_after_added_ms: listedMs,
    page_memory_growth_bytes: peak.total - before.total,
    renderer_rss_growth_bytes: peak.rendererRss - before.rendererRss,
    before,
    peak,
    staging_left: dir === null ? null : (await readdir(path.join(dir, '.linkfs-incoming'))).length,
    download_mb_per_s: down.mb_per_s,
    upload_vs_download: Number((bytes / 1e6 / seconds / down.mb_per_s).toFixed(2)),
    error: null,
  };
} catch (error) {
  result = { bytes, mb_per_s: null, error: error instanceof Error ? error.message : String(error) };
} finally {
  await chromium.close();
  await s?.kill();
  if (dir !== null) await rm(dir, { recursive: true, force: true });
  await rm(src, { recursive: true, force: true });
}
console.log(JSON.stringify(result));
process.exit(result.error === null ? 0 : 1);
