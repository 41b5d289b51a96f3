// A Chromium performance trace of one page (CDP Tracing), and what made its long
// main-thread tasks long: for diagnosing a "longest main-thread task" figure, not for
// asserting anything. `SCALE_TRACE=1 npm run e2e:scale` uses it.

import type { CDPSession, Page } from 'playwright-core';

interface TraceEvent {
  name: string;
  ph: string;
  ts: number;
  dur?: number;
  /** Thread (CPU) time; far below `dur` when the thread waited for a core. */
  tdur?: number;
  pid: number;
  tid: number;
  args?: { name?: string; data?: { functionName?: string; url?: string; frame?: string } };
}

export interface Trace {
  /** Ends the trace and returns its events. */
  stop(): Promise<TraceEvent[]>;
}

const categories = ['devtools.timeline', 'disabled-by-default-devtools.timeline', 'v8', 'v8.execute', 'blink.user_timing', 'disabled-by-default-v8.gc', 'toplevel'];

export async function startTrace(page: Page): Promise<Trace> {
  const cdp: CDPSession = await page.context().newCDPSession(page);
  const events: TraceEvent[] = [];
  cdp.on('Tracing.dataCollected', (e) => {
    events.push(...(e.value as unknown as TraceEvent[]));
  });
  // SCALE_TRACE=profile (or any TRACE_PROFILE) adds V8's sampling profiler: where JS time goes.
  const profile = process.env.SCALE_TRACE === 'profile' || process.env.TRACE_PROFILE !== undefined;
  const included = profile ? [...categories, 'disabled-by-default-v8.cpu_profiler'] : categories;
  await cdp.send('Tracing.start', { traceConfig: { includedCategories: included, recordMode: 'recordContinuously' }, transferMode: 'ReportEvents' });
  return {
    async stop() {
      const done = new Promise<void>((resolve) => cdp.once('Tracing.tracingComplete', () => resolve()));
      await cdp.send('Tracing.end');
      await done;
      await cdp.detach().catch(() => undefined);
      return events;
    },
  };
}

/**
 * The main-thread tasks of the page's renderer longer than `overMs`, each with the
 * events inside it that took the most time (name, function or URL, wall ms / CPU
 * ms). One line each.
 */
export function longTaskReport(events: TraceEvent[], overMs = 40): string[] {
  return longTasks(events, overMs).lines;
}

/** As `longTaskReport`, with the longest task's wall and CPU (thread) time, ms. */
export function longTasks(events: TraceEvent[], overMs = 40): { lines: string[]; longestWallMs: number; longestCpuMs: number } {
  const mainThreads = new Set(events.filter((e) => e.ph === 'M' && e.name === 'thread_name' && e.args?.name === 'CrRendererMain').map((e) => `${e.pid}:${e.tid}`));
  const onMain = events.filter((e) => e.ph === 'X' && mainThreads.has(`${e.pid}:${e.tid}`) && typeof e.dur === 'number');
  const all = onMain.filter((e) => e.name === 'RunTask');
  const longestWallMs = all.reduce((m, e) => Math.max(m, e.dur! / 1000), 0);
  const longestCpuMs = all.reduce((m, e) => Math.max(m, (e.tdur ?? e.dur!) / 1000), 0);
  const tasks = all.filter((e) => e.dur! / 1000 > overMs);
  const lines: string[] = [];
  for (const t of tasks) {
    const end = t.ts + t.dur!;
    const inner = onMain.filter((e) => e !== t && e.pid === t.pid && e.tid === t.tid && e.ts >= t.ts && e.ts + e.dur! <= end && e.name !== 'RunTask' && e.name !== 'ThreadControllerImpl::RunTask');
    const byName = new Map<string, number>();
    const cpuOf = new Map<string, number>();
    for (const e of inner) {
      const d = e.args?.data;
      const what = d?.functionName ? `${e.name}(${d.functionName} ${(d.url ?? '').split('/').pop() ?? ''})` : e.name;
      byName.set(what, Math.max(byName.get(what) ?? 0, e.dur! / 1000));
      if (e.tdur !== undefined) cpuOf.set(what, Math.max(cpuOf.get(what) ?? 0, e.tdur / 1000));
    }
    const top = [...byName.entries()].sort((a, b) => b[1] - a[1]).slice(0, 8).map(([n, ms]) => `${n} ${ms.toFixed(1)}${cpuOf.has(n) ? `/${cpuOf.get(n)!.toFixed(1)}` : ''}`);
    const cpu = t.tdur === undefined ? '' : ` (${(t.tdur / 1000).toFixed(1)} ms on a core)`;
    lines.push(`task ${(t.dur! / 1000).toFixed(1)} ms${cpu} at ${(t.ts / 1000).toFixed(0)}: ${top.join(' | ')}`);
  }
  return { lines, longestWallMs, longestCpuMs };
}

/**
 * Where the page's main thread spent its CPU over the whole trace: the CPU time of
 * its tasks summed by what each task ran (the task's first event inside it: an
 * animation frame, a message, a timer, with the function's name), the top `n` lines.
 */
export function mainThreadCpuReport(events: TraceEvent[], n = 12): string[] {
  const mainThreads = new Set(events.filter((e) => e.ph === 'M' && e.name === 'thread_name' && e.args?.name === 'CrRendererMain').map((e) => `${e.pid}:${e.tid}`));
  const onMain = events.filter((e) => e.ph === 'X' && mainThreads.has(`${e.pid}:${e.tid}`) && typeof e.dur === 'number').sort((a, b) => a.ts - b.ts || b.dur! - a.dur!);
  const cpu = new Map<string, { cpu: number; wall: number; count: number }>();
  let task: TraceEvent | null = null;
  let named = false;
  let total = 0;
  for (const e of onMain) {
    if (e.name === 'RunTask') {
      task = e;
      named = false;
      total += (e.tdur ?? 0) / 1000;
      continue;
    }
    if (task === null || named || e.ts > task.ts + task.dur! || e.name === 'ThreadControllerImpl::RunTask') continue;
    named = true;
    const d = e.args?.data;
    const what = d?.functionName ? `${e.name}(${d.functionName})` : e.name;
    const c = cpu.get(what) ?? { cpu: 0, wall: 0, count: 0 };
    c.cpu += (task.tdur ?? 0) / 1000;
    c.wall += task.dur! / 1000;
    c.count += 1;
    cpu.set(what, c);
  }
  const lines = [`main thread: ${total.toFixed(0)} ms of CPU in tasks`];
  for (const [what, c] of [...cpu.entries()].sort((a, b) => b[1].cpu - a[1].cpu).slice(0, n)) lines.push(`${what}: ${c.cpu.toFixed(1)} ms CPU, ${c.wall.toFixed(1)} ms wall, ${c.count} tasks`);
  return lines;
}
