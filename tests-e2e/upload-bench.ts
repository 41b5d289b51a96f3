// What adding a big file through the page costs: a file of UPLOAD_MIB (default 4096)
// added in Chromium through an upload link to a real `linkfs share` on this host,
// its rate, and the browser's memory while it goes (the JS heaps of the page and its
// workers, both wasm memories, and the renderers' resident memory, sampled every
// second against a sample before). The page must stream the file from disk: its
// growth is expected to stay far below the file's size. The rate is the whole add
// (hashing included: the file is read twice). Then the page saves the same file
// (as a user's click does) for the ratio to the download direction. Prints one JSON
// line.
//
//   bash tests-e2e/run upload-bench
//   UPLOAD_MIB=1024 bash tests-e2e/run upload-bench

import { spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { MemorySampler, type BrowserMemory } from './lib/browser-memory.ts';
import { launchChromium, openLink } from './lib/chromium.ts';
import { binary, scratchDir } from './lib/paths.ts';
import { startShare } from './lib/share-process.ts';
import { downloadThroughPage } from './lib/page-download.ts';

const mib = Number(process.env.UPLOAD_MIB ?? 4096);
const bytes = mib * 1048576;
const log = (line: string) => console.error(line);

await mkdir(scratchDir, { recursive: true });
const dir = await mkdtemp(path.join(scratchDir, 'upload-bench-share-'));
const src = await mkdtemp(path.join(scratchDir, 'upload-bench-src-'));
const file = path.join(src, 'big.bin');
const made = spawnSync('sh', ['-c', `head -c ${bytes} /dev/urandom > '${file}'`]);
if (made.status !== 0) throw new Error(`could not make ${file}`);
await writeFile(path.join(dir, 'readme.txt'), 'bench\n');
const s = await startShare(dir, { args: ['--no-qr'] });
const chromium = await launchChromium({ name: 'upload-bench', log });
let result: Record<string, unknown> = {};
try {
  const r = spawnSync(binary('linkfs'), ['link', 'add', '--allow-upload', '--dir', dir], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`link add: ${r.stderr}`);
  const link = r.stdout.trim();
  const page = await chromium.page();
  await openLink(page, link, ['connected']);
  await page.waitForSelector('[data-testid=add-files]', { state: 'visible', timeout: 20_000 });
  const sampler = await MemorySampler.attach(page, chromium.browserPid);
  await new Promise((r) => setTimeout(r, 1000));
  const before = await sampler.sample(true);
  let peak: BrowserMemory = before;
  const t0 = performance.now();
  await page.setInputFiles('[data-testid=upload-files-input]', file);
  for (;;) {
    const state = await page.$eval('[data-testid=upload]', (e) => ({ state: (e as HTMLElement).dataset['state'] ?? '', detail: e.querySelector('.download-detail')?.textContent ?? '' })).catch(() => null);
    if (state?.state === 'done') break;
    if (state?.state === 'failed') throw new Error(`the upload failed: ${state.detail}`);
    const m = await sampler.sample();
    if (m.total > peak.total) peak = { ...m, rendererRss: Math.max(m.rendererRss, peak.rendererRss) };
    else if (m.rendererRss > peak.rendererRss) peak = { ...peak, rendererRss: m.rendererRss };
    await new Promise((r) => setTimeout(r, 1000));
  }
  const seconds = (performance.now() - t0) / 1000;
  const landed = await stat(path.join(dir, 'big.bin'));
  const same = spawnSync('cmp', ['-s', file, path.join(dir, 'big.bin')]).status === 0;
  if (!same || landed.size !== bytes) throw new Error('the file on the sharer\'s disk is not the one added');
  await sampler.detach();
  // The other direction in the same run: the page saves the file it added.
  const saved = path.join(src, 'saved.bin');
  const down = await downloadThroughPage(page, { target: 'big.bin', out: saved, browserPid: chromium.browserPid, log });
  result = {
    mib,
    seconds: Number(seconds.toFixed(2)),
    mb_per_s: Number((bytes / 1e6 / seconds).toFixed(1)),
    page_memory_growth_bytes: peak.total - before.total,
    renderer_rss_growth_bytes: peak.rendererRss - before.rendererRss,
    before,
    peak,
    staging_left: (await readdir(path.join(dir, '.linkfs-incoming'))).length,
    download_mb_per_s: down.mb_per_s,
    upload_vs_download: Number((bytes / 1e6 / seconds / down.mb_per_s).toFixed(2)),
  };
} finally {
  await chromium.close();
  await s.kill();
  await rm(dir, { recursive: true, force: true });
  await rm(src, { recursive: true, force: true });
}
console.log(JSON.stringify(result));
process.exit(0);
