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
/**
 * A read takes this much of the file at once, and the next chunks come from it: each
 * read of a File is a call into the browser (about a millisecond), so reading chunk by
 * chunk (60 KiB) held a 1 GiB read to 23 MB/s.
 */
const BLOCK = 1 << 20;
/** Files whose last block is kept. */
const BLOCKS = 4;

/** What the share is told when a file is not what the index says. */
export type ReadRefusal = { changed: { size: number; mtimeMs: number } } | { gone: true };

export class FileReads {
  private readonly kept = new Map<number, File>();
  /** The last block read of a few files: entry -> where it starts, its bytes. */
  private readonly blocks = new Map<number, { file: File; start: number; end: number; bytes: Promise<Uint8Array> }>();
  /** Bytes read for visitors so far. */
  bytes = 0;

  constructor(private readonly sources: (FileSource | undefined)[]) {}

  async read(entry: number, offset: number, len: number, size: number, mtimeMs: number): Promise<Uint8Array> {
    const kept = this.kept.get(entry);
    if (kept && kept.size === size && kept.lastModified === mtimeMs) {
      try {
        return await this.slice(kept, offset, len, entry);
      } catch {
        this.kept.delete(entry); // changed since: take it afresh
        this.blocks.delete(entry);
      }
    }
    const file = await this.fresh(entry);
    if (file.size !== size || file.lastModified !== mtimeMs) {
      const refusal: ReadRefusal = { changed: { size: file.size, mtimeMs: file.lastModified } };
      throw refusal;
    }
    const bytes = await this.slice(file, offset, len, entry);
    this.keep(entry, file);
    return bytes;
  }

  /**
   * Bytes [offset, offset + len) of `file` (entry `entry`), from its kept block if that
   * holds them (reads in flight at once share one block being read).
   */
  private async slice(file: File, offset: number, len: number, entry: number): Promise<Uint8Array> {
    let block = this.blocks.get(entry);
    if (!block || block.file !== file || offset < block.start || offset + len > block.end) {
      const end = Math.min(file.size, offset + Math.max(len, BLOCK));
      const bytes = file.slice(offset, end).arrayBuffer().then((b) => new Uint8Array(b));
      block = { file, start: offset, end, bytes };
      this.blocks.delete(entry);
      this.blocks.set(entry, block);
      if (this.blocks.size > BLOCKS) {
        const oldest = this.blocks.keys().next().value;
        if (oldest !== undefined) this.blocks.delete(oldest);
      }
    }
    const held = block;
    let whole: Uint8Array;
    try {
      whole = await held.bytes;
    } catch (error) {
      if (this.blocks.get(entry) === held) this.blocks.delete(entry);
      throw error;
    }
    const from = offset - held.start;
    const bytes = whole.slice(from, from + len);
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
