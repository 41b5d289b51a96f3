// The index worker's side of the serving path (../serve/protocol.ts): one served
// resource (a file, or a ZIP of a selection) answers the service worker's requests
// on its MessagePort. Each request is a stream of the resource's bytes [start,
// end), sent chunk by chunk only as far as the service worker's credit allows, so
// the browser's reading pace bounds what is in memory. Also the path for saving
// without a service worker: `open` gives the same bytes as a ReadableStream.

import type { FromSource, ToSource } from '../serve/protocol.ts';

/** Where a served resource's bytes come from. */
export interface ByteSource {
  readonly size: number;
  /**
   * The stream's chunks are the source's to give away (sent by transfer, not copied).
   * Not so for a ZIP: client-zip reads a chunk's length after handing it out.
   */
  readonly ownsChunks: boolean;
  /** Bytes [start, end); a source that cannot seek (a ZIP) is only asked for [0, size). */
  open(start: number, end: number): ReadableStream<Uint8Array>;
}

/** How much of a served resource went out (for the page's progress and figures). */
export interface ServeProgress {
  /** Bytes sent by the stream that started at 0 (a download), or by all streams (media). */
  sent: number;
  /** Streams answered so far. */
  streams: number;
}

export interface ServeEvents {
  progress(p: ServeProgress): void;
  /** A stream that started at 0 and covered the whole resource ended: ok, or why not. */
  finished(ok: boolean, message: string): void;
}

interface Outgoing {
  reader: ReadableStreamDefaultReader<Uint8Array>;
  credit: number;
  pumping: boolean;
  whole: boolean;
  /** Everything was sent; waiting for the browser to read the rest. */
  done: boolean;
}

/** Serves `source` on `port` until closed. */
export class SourceServer {
  private readonly streams = new Map<number, Outgoing>();
  private sent = 0;
  private opened = 0;
  private closed = false;

  /** `coalesce`: bytes gathered into one message before it goes (0: every chunk at once). */
  constructor(
    private readonly port: MessagePort,
    private readonly source: ByteSource,
    private readonly events: ServeEvents,
    private readonly coalesce = 0,
  ) {
    port.onmessage = (event: MessageEvent<ToSource>) => this.onMessage(event.data);
  }

  close(reason: string): void {
    if (this.closed) return;
    this.closed = true;
    for (const [id, s] of this.streams) {
      if (s.done) continue; // all sent: the browser reads the rest from the service worker
      void s.reader.cancel(reason).catch(() => undefined);
      this.post({ type: 'error', stream: id, message: reason });
    }
    this.streams.clear();
    this.port.close();
  }

  private post(m: FromSource, transfer: Transferable[] = []): void {
    this.port.postMessage(m, transfer);
  }

  private onMessage(m: ToSource): void {
    if (this.closed) return;
    switch (m.type) {
      case 'open': {
        const end = Math.min(m.end, this.source.size);
        const start = Math.min(m.start, end);
        const whole = start === 0 && end === this.source.size;
        let reader: ReadableStreamDefaultReader<Uint8Array>;
        try {
          reader = this.source.open(start, end).getReader();
        } catch (error) {
          this.post({ type: 'error', stream: m.stream, message: messageOf(error) });
          if (whole) this.events.finished(false, messageOf(error));
          return;
        }
        this.opened += 1;
        const s: Outgoing = { reader, credit: m.credit, pumping: false, whole, done: false };
        this.streams.set(m.stream, s);
        void this.pump(m.stream, s);
        return;
      }
      case 'credit': {
        const s = this.streams.get(m.stream);
        if (!s) return;
        s.credit += m.bytes;
        if (!s.pumping) void this.pump(m.stream, s);
        return;
      }
      case 'drained': {
        const s = this.streams.get(m.stream);
        if (!s) return;
        this.streams.delete(m.stream);
        if (s.whole) this.events.finished(true, '');
        return;
      }
      case 'cancel': {
        const s = this.streams.get(m.stream);
        if (!s) return;
        this.streams.delete(m.stream);
        void s.reader.cancel('the browser stopped reading').catch(() => undefined);
        if (s.whole && !s.done) this.events.finished(false, 'The browser stopped the download.');
        return;
      }
    }
  }

  private async pump(id: number, s: Outgoing): Promise<void> {
    s.pumping = true;
    // Chunks gathered into one message of about `coalesce` bytes (downloads: fewer,
    // bigger messages to the service worker; media: none, a seek wants bytes now).
    let parts: Uint8Array[] = [];
    let size = 0;
    const flush = (): void => {
      if (size === 0) return;
      let chunk: ArrayBuffer;
      if (parts.length === 1) {
        chunk = this.source.ownsChunks ? ownBuffer(parts[0]!) : copyOf(parts[0]!);
      } else {
        const joined = new Uint8Array(size);
        let at = 0;
        for (const p of parts) {
          joined.set(p, at);
          at += p.byteLength;
        }
        chunk = joined.buffer;
      }
      s.credit -= size;
      this.sent += size;
      parts = [];
      size = 0;
      this.post({ type: 'data', stream: id, chunk }, [chunk]);
      this.events.progress({ sent: this.sent, streams: this.opened });
    };
    try {
      while (s.credit - size > 0 && !s.done && this.streams.get(id) === s) {
        const { value, done } = await s.reader.read();
        if (this.streams.get(id) !== s) return;
        if (done) {
          flush();
          s.done = true;
          this.post({ type: 'end', stream: id });
          return;
        }
        parts.push(value);
        size += value.byteLength;
        if (size >= this.coalesce || size >= s.credit) flush();
      }
      flush();
    } catch (error) {
      if (this.streams.get(id) !== s) return;
      this.streams.delete(id);
      this.post({ type: 'error', stream: id, message: messageOf(error) });
      if (s.whole) this.events.finished(false, messageOf(error));
    } finally {
      s.pumping = false;
    }
  }
}

/** The chunk's bytes in an ArrayBuffer of their own (transferable without taking anything else along). */
export function ownBuffer(chunk: Uint8Array): ArrayBuffer {
  const b = chunk.buffer;
  if (b instanceof ArrayBuffer && chunk.byteOffset === 0 && chunk.byteLength === b.byteLength) return b;
  return chunk.slice().buffer as ArrayBuffer;
}

/** A copy of the chunk's bytes in a buffer of their own. */
export function copyOf(chunk: Uint8Array): ArrayBuffer {
  return chunk.slice().buffer as ArrayBuffer;
}

export function messageOf(error: unknown): string {
  if (error instanceof Error && error.message) return error.message;
  return typeof error === 'string' && error ? error : 'unknown error';
}
