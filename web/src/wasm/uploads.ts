// Files the visitor adds to the share, in the index worker: each is hashed
// (BLAKE3, in pieces: a 4 GiB file never sits in memory), handed to the visit
// (core's uploads: begun again on every connection, its bytes asked within a
// window, each chunk hashed), and its bytes read from the File when the visit
// asks, one read at a time per file, in the order asked. What happens is told
// to the page as `upload-state` messages. The wasm module is the worker's
// (./worker.ts hands in its hasher).

import type { FileHasher, Visit, VisitOutput } from '../../../core-wasm/pkg/linkfs_core_wasm.js';
import type { UploadState } from '../api';
import type { FromWorker } from './protocol';

/** Bytes hashed per step. */
const HASH_STEP = 8 * 1024 * 1024;
/** A file's state goes to the page at most this often while it moves, ms. */
const STATE_EVERY_MS = 100;
/** Bytes read from the File at once; the visit's chunk-sized reads are cut from them. */
const READ_BLOCK = 1024 * 1024;

interface Outgoing {
  id: number;
  file: File;
  path: string;
  visitId: number | null;
  /** The reads of this file, one after another. */
  chain: Promise<void>;
  cancelled: boolean;
  lastPostAt: number;
  /** The block read last (the next reads are in it, most often). */
  block: { start: number; bytes: Uint8Array } | null;
}

type UploadOutput = Extract<VisitOutput, { type: `upload-${string}` }>;

export class Uploads {
  private readonly byId = new Map<number, Outgoing>();
  private readonly byVisit = new Map<number, Outgoing>();

  constructor(
    private readonly post: (m: FromWorker) => void,
    private readonly flush: () => void,
    /** The wasm module's hasher (only the worker module loads the wasm). */
    private readonly newHasher: () => FileHasher,
  ) {}

  private state(o: Outgoing, state: UploadState, force = true): void {
    const now = performance.now();
    if (!force && now - o.lastPostAt < STATE_EVERY_MS) return;
    o.lastPostAt = now;
    this.post({ type: 'upload-state', id: o.id, state });
  }

  private forget(o: Outgoing): void {
    this.byId.delete(o.id);
    if (o.visitId !== null) this.byVisit.delete(o.visitId);
  }

  /** Hashes `file`, then hands it to the visit to go to `path` in the link's folder. */
  async start(id: number, file: File, path: string, visit: () => Visit | null): Promise<void> {
    const o: Outgoing = { id, file, path, visitId: null, chain: Promise.resolve(), cancelled: false, lastPostAt: 0, block: null };
    this.byId.set(id, o);
    const total = file.size;
    const hasher = this.newHasher();
    let hash: Uint8Array;
    try {
      for (let at = 0; at < total; ) {
        const piece = new Uint8Array(await file.slice(at, Math.min(total, at + HASH_STEP)).arrayBuffer());
        if (o.cancelled) return;
        if (piece.length === 0) throw new Error('the file got shorter while it was read');
        hasher.update(piece);
        at += piece.length;
        this.state(o, { phase: 'hashing', done: at, total }, at === total);
      }
      hash = hasher.finish();
    } catch (error) {
      this.forget(o);
      this.state(o, { phase: 'failed', done: 0, total, message: `cannot read ${file.name}: ${String(error)}` });
      return;
    } finally {
      hasher.free();
    }
    const v = visit();
    if (v === null || o.cancelled) {
      this.forget(o);
      return;
    }
    try {
      o.visitId = v.upload(path, total, hash);
    } catch (error) {
      this.forget(o);
      this.state(o, { phase: 'failed', done: 0, total, message: String(error) });
      return;
    }
    this.byVisit.set(o.visitId, o);
    this.state(o, { phase: 'waiting', done: 0, total });
    this.flush();
  }

  cancel(id: number, v: Visit): void {
    const o = this.byId.get(id);
    if (!o) return;
    o.cancelled = true;
    this.forget(o);
    if (o.visitId !== null) {
      v.cancelUpload(o.visitId);
      this.flush();
    }
    this.state(o, { phase: 'failed', done: 0, total: o.file.size, message: 'cancelled' });
  }

  /** `len` bytes at `offset`, from the block read last or a new one. */
  private async read(o: Outgoing, offset: number, len: number): Promise<Uint8Array> {
    const b = o.block;
    if (b === null || offset < b.start || offset + len > b.start + b.bytes.length) {
      const end = Math.min(o.file.size, Math.max(offset + len, offset + READ_BLOCK));
      o.block = { start: offset, bytes: new Uint8Array(await o.file.slice(offset, end).arrayBuffer()) };
    }
    const at = offset - o.block!.start;
    return o.block!.bytes.subarray(at, at + len);
  }

  /** Handles one of the visit's upload outputs. */
  output(out: UploadOutput, v: Visit): void {
    const o = this.byVisit.get(out.upload);
    if (!o) return;
    const total = o.file.size;
    switch (out.type) {
      case 'upload-read': {
        const { offset, len } = out;
        o.chain = o.chain.then(async () => {
          if (o.cancelled) return;
          try {
            const bytes = await this.read(o, offset, len);
            if (bytes.length !== len) throw new Error(`${bytes.length} bytes where ${len} were asked (did the file change?)`);
            v.uploadBytes(out.upload, offset, bytes);
          } catch (error) {
            v.uploadUnreadable(out.upload, `cannot read ${o.file.name} at byte ${offset}: ${String(error)}`);
          }
          this.flush();
        });
        return;
      }
      case 'upload-ready':
        this.state(o, { phase: 'sending', done: out.offset, total, resumedFrom: out.offset, path: out.path, changes: out.changes });
        return;
      case 'upload-progress':
        this.state(o, { phase: 'sending', done: out.written, total }, false);
        return;
      case 'upload-done':
        o.block = null;
        this.forget(o);
        this.state(o, { phase: 'done', done: total, total, path: out.path, renamed: out.renamed });
        return;
      case 'upload-refused':
      case 'upload-interrupted':
        o.block = null;
        this.forget(o);
        this.state(o, { phase: 'failed', done: 0, total, message: out.message, resumable: out.type === 'upload-interrupted' });
        return;
    }
  }
}
