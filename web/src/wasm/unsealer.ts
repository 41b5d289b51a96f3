// The index worker's side of the unseal worker (./unseal-worker.ts): the snapshot
// parts of a restore's later chunks are checked and decompressed there while this
// worker restores the chunk before, so a reopen uses two cores. The restore has at
// most two reads out (core's `restore_reads_ahead`), so at most two chunks' Blobs and
// parts are held here and there. If that worker cannot start or stops, the chunk's parts
// are given back as stored and the index worker unseals them itself: a restore
// never fails for want of it.

import { eachPartAsked, type UnsealAsk, type UnsealAnswer } from './unseal-parts';

type Waiting = { ask: UnsealAsk; resolve(parts: unknown[]): void };

export class Unsealer {
  private worker: Worker | null;
  private nextId = 1;
  private readonly waiting = new Map<number, Waiting>();

  constructor() {
    this.worker = this.start();
  }

  /** The parts `from..=to` of the group stored from part `first` in `blob` (parts of `lens` bytes each), in order. */
  unseal(blob: Blob, lens: number[], first: number, from: number, to: number): Promise<unknown[]> {
    const ask: UnsealAsk = { id: this.nextId++, blob, lens, first, from, to };
    const worker = this.worker;
    if (!worker) return asStored(ask);
    return new Promise((resolve) => {
      this.waiting.set(ask.id, { ask, resolve });
      worker.postMessage(ask);
    });
  }

  /** Ends the unseal worker (the restore is over); later asks are served as stored. */
  stop(): void {
    this.worker?.terminate();
    this.worker = null;
    for (const w of this.waiting.values()) void asStored(w.ask).then(w.resolve);
    this.waiting.clear();
  }

  private start(): Worker | null {
    if (typeof Worker !== 'function') return null;
    let worker: Worker;
    try {
      worker = new Worker(new URL('./unseal-worker.ts', import.meta.url), { type: 'module', name: 'linkfs-unseal' });
    } catch {
      return null;
    }
    worker.onmessage = (event: MessageEvent<UnsealAnswer>) => {
      const a = event.data;
      const w = this.waiting.get(a.id);
      if (!w) return;
      this.waiting.delete(a.id);
      if ('parts' in a) w.resolve(a.parts);
      else void asStored(w.ask).then(w.resolve);
    };
    worker.onerror = () => this.stop();
    return worker;
  }
}

/** The parts asked for, as stored: this worker unseals them itself. */
async function asStored(ask: UnsealAsk): Promise<unknown[]> {
  const parts: Uint8Array[] = [];
  eachPartAsked(await ask.blob.arrayBuffer(), ask, (stored) => parts.push(stored));
  return parts;
}
