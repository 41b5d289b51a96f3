// A file's bytes as a ReadableStream in the index worker, read on demand: the
// stream asks the receiver session for segments of SEGMENT bytes, at most
// MAX_SEGMENTS at once and only while what is requested and not yet taken by the
// stream's reader stays under WINDOW. Memory is bounded by the reader's pace,
// whatever the file's size. Reads keep going across a dropped connection (the
// session resumes them at their byte); a file that changes on the sharer's side,
// or a session that ends, errors the stream with the reason (the reader pins each
// file's version: see `rangeReader` in worker.ts).

import type { EntryId, ReadHandle } from '../api.ts';

/** What a read delivers to (the worker routes the session's read events here). */
export interface ReadSink {
  data(bytes: Uint8Array): void;
  done(): void;
  failed(message: string): void;
}

/** Starting and cancelling range reads on the visit. */
export interface RangeReader {
  /** Starts reading [offset, offset+len) of `entry`; throws with the reason if it cannot. */
  start(entry: EntryId, offset: number, len: number, sink: ReadSink): ReadHandle;
  cancel(handle: ReadHandle): void;
}

/** How far a stream reads ahead of its reader. */
export interface ReadAhead {
  /** Bytes per read asked of the session. */
  segment: number;
  /** Bytes asked for but not yet taken by the stream's reader, at most. */
  window: number;
}

/** For saving: enough in flight to keep the data channel full. */
export const BULK: ReadAhead = { segment: 4 * 1024 * 1024, window: 12 * 1024 * 1024 };
/** For a media element, which buffers ahead on its own: little beyond what it asks. */
export const MEDIA: ReadAhead = { segment: 512 * 1024, window: 1024 * 1024 };

const MAX_SEGMENTS = 2;
/** A segment's handle before its read started (the visit's handles start at 1). */
const NO_HANDLE = 0 as ReadHandle;

interface Segment {
  handle: ReadHandle;
  len: number;
  /** Bytes delivered so far (parts held until the segments before are done). */
  got: number;
  parts: Uint8Array[];
  finished: boolean;
}

/** Bytes [start, end) of file `entry`. */
export function entryStream(reader: RangeReader, entry: EntryId, start: number, end: number, ahead: ReadAhead = BULK): ReadableStream<Uint8Array> {
  const { segment: SEGMENT, window: WINDOW } = ahead;
  let next = start;
  const segments: Segment[] = [];
  let controller: ReadableStreamDefaultController<Uint8Array> | null = null;
  let wake: (() => void) | null = null;
  let over = false;

  const notify = (): void => {
    const w = wake;
    wake = null;
    w?.();
  };

  const fail = (message: string): void => {
    if (over) return;
    over = true;
    for (const s of segments) if (!s.finished) reader.cancel(s.handle);
    segments.length = 0;
    controller?.error(new Error(message));
    notify();
  };

  /** Hands the head segment's bytes to the stream, in order. */
  const drain = (): void => {
    const c = controller;
    if (!c || over) return;
    while (segments.length > 0) {
      const head = segments[0]!;
      for (const p of head.parts) c.enqueue(p);
      head.parts = [];
      if (!head.finished) break;
      segments.shift();
    }
    if (segments.length === 0 && next >= end) {
      over = true;
      c.close();
    }
    notify();
  };

  const inFlight = (): number => segments.reduce((sum, s) => sum + (s.len - s.got), 0);

  const fill = (): void => {
    const c = controller;
    if (!c || over) return;
    const queued = Math.max(0, WINDOW - (c.desiredSize ?? 0));
    while (next < end && segments.length < MAX_SEGMENTS && queued + inFlight() < WINDOW) {
      const len = Math.min(SEGMENT, end - next);
      const segment: Segment = { handle: NO_HANDLE, len, got: 0, parts: [], finished: false };
      const isHead = segments.length === 0;
      segments.push(segment);
      try {
        segment.handle = reader.start(entry, next, len, {
          data: (bytes) => {
            if (over) return;
            segment.got += bytes.byteLength;
            segment.parts.push(bytes);
            if (segments[0] === segment) drain();
          },
          done: () => {
            if (over) return;
            segment.finished = true;
            if (segments[0] === segment) drain();
          },
          failed: (message) => fail(message),
        });
      } catch (error) {
        fail(error instanceof Error ? error.message : String(error));
        return;
      }
      next += len;
      if (isHead && segment.finished) drain();
    }
  };

  return new ReadableStream<Uint8Array>(
    {
      start(c) {
        controller = c;
        if (end <= start) {
          over = true;
          c.close();
        }
      },
      pull() {
        fill();
        if (over) return;
        // Resolve once something arrived (or the stream ended); the stream calls
        // pull again while it wants more.
        return new Promise<void>((resolve) => {
          wake = resolve;
        });
      },
      cancel() {
        over = true;
        for (const s of segments) if (!s.finished) reader.cancel(s.handle);
        segments.length = 0;
      },
    },
    new ByteLengthQueuingStrategy({ highWaterMark: WINDOW }),
  );
}
