// Saving a byte source without the service worker, in the index worker:
// - into a file the user chose (File System Access): positional writes from
//   `resumeAt`, keeping what is already there, so a retried download continues at
//   its byte instead of starting over;
// - into a Blob in memory, the last resort, refused above a cap the UI states.

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

export async function saveToBlob(source: ByteSource, cap: number, signal: AbortSignal, onSent: (sent: number) => void): Promise<Saved> {
  if (source.size > cap) {
    throw new SaveError(
      `This browser can only save files up to ${Math.floor(cap / 2 ** 20)} MiB from this page (it has neither a service worker nor the File System Access API here; open the link over https or on localhost to save files of any size).`,
      0,
    );
  }
  const parts: Uint8Array[] = [];
  let sent = 0;
  const reader = source.open(0, source.size).getReader();
  signal.addEventListener('abort', () => void reader.cancel(reasonOf(signal)).catch(() => undefined), { once: true });
  for (;;) {
    const { value, done } = await reader.read();
    if (signal.aborted) throw new SaveError(reasonOf(signal), sent);
    if (done) break;
    parts.push(value);
    sent += value.byteLength;
    onSent(sent);
  }
  return { written: sent, blob: new Blob(parts as BlobPart[]) };
}
