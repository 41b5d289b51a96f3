// Reads for the sharing tab's visitors: a piece of a file, taken afresh and checked
// against what the index says of it (size and modification time), so a file changed
// since it was listed is never served stale. The share (wasm) turns a "changed" answer
// into an update every visitor hears of.
//
// A `File` is a snapshot: Chromium and Firefox refuse to read one whose file changed
// on disk since (NotReadableError). So the last few files read are kept and reused
// while they read, and taken afresh when they do not.

import type { FileSource } from './folder-walk';
import { entryFile } from './folder-walk';

/** Files kept open between reads (a large file is read in many pieces). */
const KEPT = 16;

/** What the share is told when a file is not what the index says. */
export type ReadRefusal = { changed: { size: number; mtimeMs: number } } | { gone: true };

export class FileReads {
  private readonly kept = new Map<number, File>();
  /** Bytes read for visitors so far. */
  bytes = 0;

  constructor(private readonly sources: (FileSource | undefined)[]) {}

  async read(entry: number, offset: number, len: number, size: number, mtimeMs: number): Promise<Uint8Array> {
    const kept = this.kept.get(entry);
    if (kept && kept.size === size && kept.lastModified === mtimeMs) {
      try {
        return await this.slice(kept, offset, len);
      } catch {
        this.kept.delete(entry); // changed since: take it afresh
      }
    }
    const file = await this.fresh(entry);
    if (file.size !== size || file.lastModified !== mtimeMs) {
      const refusal: ReadRefusal = { changed: { size: file.size, mtimeMs: file.lastModified } };
      throw refusal;
    }
    const bytes = await this.slice(file, offset, len);
    this.keep(entry, file);
    return bytes;
  }

  private async slice(file: File, offset: number, len: number): Promise<Uint8Array> {
    const bytes = new Uint8Array(await file.slice(offset, offset + len).arrayBuffer());
    this.bytes += bytes.length;
    return bytes;
  }

  private async fresh(entry: number): Promise<File> {
    const source = this.sources[entry];
    if (!source) throw new Error(`entry ${entry} has no file here`);
    try {
      switch (source.kind) {
        case 'handle':
          return await source.handle.getFile();
        case 'entry':
          return await entryFile(source.entry);
        case 'file':
          return source.file;
      }
    } catch (error) {
      if (error instanceof DOMException && error.name === 'NotFoundError') {
        const refusal: ReadRefusal = { gone: true };
        throw refusal;
      }
      throw error;
    }
  }

  private keep(entry: number, file: File): void {
    this.kept.delete(entry);
    this.kept.set(entry, file);
    if (this.kept.size > KEPT) {
      const oldest = this.kept.keys().next().value;
      if (oldest !== undefined) this.kept.delete(oldest);
    }
  }
}
