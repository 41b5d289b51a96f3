// Saving a byte source without the service worker, in the index worker:
// - into a file the user chose (File System Access): positional writes from
//   `resumeAt`, keeping what is already there, so a retried download continues at
//   its byte instead of starting over;
// - into a Blob the browser keeps on disk until it is complete (plain http: no
//   service worker, no File System Access), then handed to its download manager.

import type { ByteSource } from './serve';

export interface Saved {
  /** Bytes written by this run (from `resumeAt`). */
  written: number;
  blob?: Blob;
}

/** An error that says how far it got, so a retry can resume. */
class SaveError extends Error {
  constructor(
    message: string,
    readonly written: number,
  ) {
    super(message);
  }
}

function reasonOf(signal: AbortSignal): string {
  const r: unknown = signal.reason;
  return r instanceof Error ? r.message : 'cancelled';
}

export async function saveToFile(
  source: ByteSource,
  handle: FileSystemFileHandle,
  resumeAt: number,
  signal: AbortSignal,
  onSent: (sent: number) => void,
): Promise<Saved> {
  const start = Math.min(resumeAt, source.size);
  const writable = await handle.createWritable({ keepExistingData: start > 0 });
  let position = start;
  const reader = source.open(start, source.size).getReader();
  const stop = (): void => void reader.cancel(reasonOf(signal)).catch(() => undefined);
  signal.addEventListener('abort', stop, { once: true });
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (signal.aborted) throw new Error(reasonOf(signal));
      if (done) break;
      await writable.write({ type: 'write', position, data: value as Uint8Array<ArrayBuffer> });
      position += value.byteLength;
      onSent(position);
    }
    await writable.truncate(source.size);
    await writable.close();
    return { written: position };
  } catch (error) {
    // Keep what was written: a retry resumes at `position`.
    await writable.close().catch(() => undefined);
    throw new SaveError(error instanceof Error ? error.message : String(error), position);
  } finally {
    signal.removeEventListener('abort', stop);
  }
}

/**
 * Into a Blob the browser keeps on its own disk, for a page with neither a service
 * worker nor File System Access (a plain-http link; docs/browser-content.md,
 * "Plain-http links"). The bytes go through `new Response(stream).blob()`, which both
 * browsers fill from a stream and spill to disk as it grows (measured at 2 GiB:
 * Chromium's renderer stays near 200 MB and its blob store writes the bytes into the
 * profile; Firefox keeps them in a temporary file, its tab near 180 MB). A Blob built
 * from the chunks themselves (`new Blob(parts)`) held all 2 GiB twice in memory (4.2
 * GB of renderer in Chromium, 4.1 GB of tab plus 2.4 GB of parent process in Firefox).
 * The browser's download manager then copies the finished Blob to its file.
 */
export async function saveToBlob(source: ByteSource, signal: AbortSignal, onSent: (sent: number) => void): Promise<Saved> {
  let sent = 0;
  /** Why the source stopped, when it did (the sharer, the connection): said as it is. */
  let sourceError: Error | null = null;
  const reader = source.open(0, source.size).getReader();
  const counted = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        let next: ReadableStreamReadResult<Uint8Array>;
        try {
          next = await reader.read();
        } catch (error) {
          sourceError = error instanceof Error ? error : new Error(String(error));
          throw sourceError;
        }
        // A cancelled reader ends as if done: never let that pass as the whole file.
        if (signal.aborted) throw (sourceError = new Error(reasonOf(signal)));
        if (next.done) {
          controller.close();
          return;
        }
        sent += next.value.byteLength;
        onSent(sent);
        // A ZIP's writer reads a chunk's length after handing it out: give the Response a copy.
        controller.enqueue(source.ownsChunks ? next.value : next.value.slice());
      },
      cancel(reason) {
        return reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
  const stop = (): void => void reader.cancel(reasonOf(signal)).catch(() => undefined);
  signal.addEventListener('abort', stop, { once: true });
  try {
    const blob = await new Response(counted).blob();
    if (blob.size !== source.size) throw (sourceError = new Error(`the file ended after ${sent} of ${source.size} bytes`));
    return { written: sent, blob };
  } catch (error) {
    const message = (sourceError as Error | null)?.message;
    throw new SaveError(
      message ??
        `The browser could not keep the file while it was read (${error instanceof Error ? error.message : String(error)}). From a plain-http link it holds the whole file on its disk before saving it: free some disk space and try again, or open the link over https to save as it streams.`,
      sent,
    );
  } finally {
    signal.removeEventListener('abort', stop);
  }
}
