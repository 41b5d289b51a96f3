// Reads for the sharing tab's visitors: a piece of a file, taken afresh and checked
// against what the index says of it (size and modification time), so a file changed
// since it was listed is never served stale. The share (wasm) turns a "changed" answer
// into an update every visitor hears of.
//
// A `File` is a snapshot: Chromium and Firefox refuse to read one whose file changed
// on disk since (NotReadableError). So the file taken for one read serves that read's
// pieces (asked for several at once), and is taken afresh when reading it fails; a
// new read takes it afresh. A folder input's files cannot be taken afresh: a changed
// one is found out only when the browser refuses to read it.

import type { FileSource } from './folder-walk';
import { entryFile } from './folder-walk';

/** Reads going on at once whose file is kept (a large file is read in many pieces). */
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

/** One read going on: the file taken for it (checked), and where the next piece starts. */
interface Stream {
  file: Promise<File>;
  until: number;
}

export class FileReads {
  /** The reads going on, a few files at a time (least recently used first). */
  private readonly streams = new Map<number, Stream>();
  /** The last block read of a few files: entry -> where it starts, its bytes. */
  private readonly blocks = new Map<number, { file: File; start: number; end: number; bytes: Promise<Uint8Array> }>();
  /** Bytes read for visitors so far. */
  bytes = 0;

  constructor(private readonly sources: (FileSource | undefined)[]) {}

  /**
   * Bytes [offset, offset + len) of file `entry`, which the index says is `size`
   * bytes modified at `mtimeMs`. A piece that goes on where the last one asked for
   * ended (the pieces of one large read, asked for several at once) shares the file
   * taken for that read; any other read takes the file afresh and checks it, so a
   * file changed since is never served from what was read of it before.
   */
  async read(entry: number, offset: number, len: number, size: number, mtimeMs: number, again = false): Promise<Uint8Array> {
    let stream = this.streams.get(entry);
    if (!stream || stream.until !== offset) {
      stream = { file: this.checked(entry, size, mtimeMs), until: offset };
      this.streams.delete(entry);
      this.streams.set(entry, stream);
      this.blocks.delete(entry);
      if (this.streams.size > KEPT) {
        const oldest = this.streams.keys().next().value;
        if (oldest !== undefined) this.streams.delete(oldest);
      }
    }
    stream.until = offset + len;
    const held = stream;
    const forget = (): void => {
      if (this.streams.get(entry) === held) this.streams.delete(entry);
      this.blocks.delete(entry);
    };
    let file: File;
    try {
      file = await held.file;
    } catch (error) {
      forget();
      throw error;
    }
    try {
      return await this.slice(file, offset, len, entry);
    } catch (error) {
      // The file changed on disk since it was taken (the browser refuses to read
      // it): once more afresh, which finds out how.
      forget();
      if (again) throw error;
      return this.read(entry, offset, len, size, mtimeMs, true);
    }
  }

  /** The file afresh, if it is still what the index says. */
  private async checked(entry: number, size: number, mtimeMs: number): Promise<File> {
    const file = await this.fresh(entry);
    if (file.size !== size || file.lastModified !== mtimeMs) {
      const refusal: ReadRefusal = { changed: { size: file.size, mtimeMs: file.lastModified } };
      throw refusal;
    }
    return file;
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
}
