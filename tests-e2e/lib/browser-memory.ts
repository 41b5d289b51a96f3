// The browser's memory for a share's page, as the download figures count it: the JS
// heaps of the page and its dedicated workers (over CDP, used size, no forced GC:
// what is live during the transfer), both wasm memories (the page's data link and
// the index worker's session, from `linkfsStats`), and what the service worker holds
// (the bytes in its stream queues, which it reports itself: attaching DevTools to a
// service worker makes Chromium cancel the downloads it streams, so its heap is not
// read over CDP). `rendererRss` is the cross-check that counts everything: the
// resident memory of all of this browser's renderer processes.

import { readdir, readFile } from 'node:fs/promises';

import type { CDPSession, Page } from 'playwright-core';

export interface BrowserMemory {
  rendererRss: number;
  pageHeap: number;
  workerHeap: number;
  serviceWorkerHeap: number;
  wasm: number;
  total: number;
}

interface RemoteReply {
  id: number;
  result?: { usedSize?: number };
}

/** A sampler that stays attached (one CDP session) for repeated samples. */
export class MemorySampler {
  private readonly replies = new Map<number, (m: RemoteReply) => void>();
  private readonly workers = new Set<string>();
  private nextId = 1;

  private constructor(
    private readonly page: Page,
    private readonly cdp: CDPSession,
    private readonly browserPid: number | null,
  ) {
    cdp.on('Target.attachedToTarget', (e) => {
      if (e.targetInfo.type === 'worker') this.workers.add(e.sessionId);
    });
    cdp.on('Target.detachedFromTarget', (e) => {
      if (e.sessionId !== undefined) this.workers.delete(e.sessionId);
    });
    cdp.on('Target.receivedMessageFromTarget', (e) => {
      const m = JSON.parse(e.message) as RemoteReply;
      this.replies.get(m.id)?.(m);
      this.replies.delete(m.id);
    });
  }

  /** `browserPid`: the browser's main process, for the renderer RSS (null: not measured). */
  static async attach(page: Page, browserPid: number | null = null): Promise<MemorySampler> {
    const cdp = await page.context().newCDPSession(page);
    const sampler = new MemorySampler(page, cdp, browserPid);
    await cdp.send('Target.setAutoAttach', { autoAttach: true, waitForDebuggerOnStart: false, flatten: false });
    return sampler;
  }

  private call(sessionId: string, method: string): Promise<RemoteReply> {
    const id = this.nextId++;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.replies.delete(id);
        resolve({ id });
      }, 2000);
      this.replies.set(id, (m) => {
        clearTimeout(timer);
        resolve(m);
      });
      void this.cdp.send('Target.sendMessageToTarget', { sessionId, message: JSON.stringify({ id, method, params: {} }) }).catch(() => undefined);
    });
  }

  /**
   * One sample. `workers: false` leaves the dedicated workers' heaps out (0):
   * DevTools calls into a worker while a download streams make Chromium cancel the
   * download, so during one only the rest is sampled.
   */
  async sample(gc = false, workers = true): Promise<BrowserMemory> {
    if (gc) await this.cdp.send('HeapProfiler.collectGarbage');
    const pageHeap = (await this.cdp.send('Runtime.getHeapUsage')).usedSize;
    let workerHeap = 0;
    for (const s of workers ? this.workers : []) {
      if (gc) await this.call(s, 'HeapProfiler.collectGarbage');
      workerHeap += (await this.call(s, 'Runtime.getHeapUsage')).result?.usedSize ?? 0;
    }
    const serviceWorkerHeap = await this.page
      .evaluate(async () => {
        const sw = navigator.serviceWorker?.controller;
        if (!sw) return 0;
        const channel = new MessageChannel();
        const answer = new Promise<number>((resolve) => {
          channel.port1.onmessage = (e: MessageEvent<{ heldBytes: number }>) => resolve(e.data.heldBytes);
          setTimeout(() => resolve(0), 1000);
        });
        sw.postMessage({ type: 'stats', reply: channel.port2 }, [channel.port2]);
        return answer;
      })
      .catch(() => 0);
    const stats = await this.page.evaluate(() => window.linkfsStats?.() ?? null).catch(() => null);
    const wasm = Number(stats?.wasmMemoryBytes ?? 0) + Number(stats?.pageWasmMemoryBytes ?? 0);
    const rendererRss = this.browserPid === null ? 0 : await rendererRssOf(this.browserPid);
    return { rendererRss, pageHeap, workerHeap, serviceWorkerHeap, wasm, total: pageHeap + workerHeap + serviceWorkerHeap + wasm };
  }

  async detach(): Promise<void> {
    await this.cdp.detach().catch(() => undefined);
  }
}

/** Sum of VmRSS of every `--type=renderer` process descending from `browserPid`. */
export async function rendererRssOf(browserPid: number): Promise<number> {
  return processTreeRss(browserPid, (cmdline) => cmdline.includes('--type=renderer'));
}

/**
 * Sum of VmRSS of `rootPid` and every process descending from it whose command line
 * `wanted` accepts (all of them by default): a whole browser, its blob store and
 * network processes included.
 */
export async function processTreeRss(rootPid: number, wanted: (cmdline: string) => boolean = () => true): Promise<number> {
  const parents = new Map<number, number>();
  const candidates = new Set<number>();
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const pid = Number(name);
    try {
      const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      parents.set(pid, ppid);
      const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8');
      if (wanted(cmdline)) candidates.add(pid);
    } catch {
      // exited meanwhile
    }
  }
  let total = 0;
  for (const pid of candidates) {
    let p: number | undefined = pid;
    let ours = false;
    for (let depth = 0; p !== undefined && p > 1 && depth < 8; depth++) {
      if (p === rootPid) {
        ours = true;
        break;
      }
      p = parents.get(p);
    }
    if (!ours) continue;
    const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
    total += Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024;
  }
  return total;
}
