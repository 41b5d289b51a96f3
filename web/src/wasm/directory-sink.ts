// Saving a folder or a selection into a directory the user chose (File System
// Access), structure kept, in the index worker.
//
// Everything goes into ONE new folder inside the chosen directory, named by the page
// (../folder-names.ts: the folder's own name when one folder is saved, "<share> (N
// items)" for a selection, " (2)", " (3)"… when taken, so nothing already on the
// user's disk is written into). A retry (after a failure or a cancel) writes into
// the same folder and skips every file already there at its full size.
//
// Names: the plan (./zip-source.ts) already made names unique ignoring case and
// replaced `\`; then names a disk cannot hold portably (`:*?"<>|`, control
// characters, a trailing dot or space, CON/NUL/COM1…), which Chromium refuses in a
// folder on disk anyway, are changed to the nearest portable name (those characters
// become `_`, a trailing dot or space is dropped, a reserved name gets a leading `_`,
// " (2)" if that is taken) and reported, never dropped. A name the browser still
// refuses (rules we do not know) becomes `renamed-N`, reported too. Symbolic links are left out and reported (the API cannot make them).
// Modification times cannot be set through the API: files carry the time they were
// written.
//
// Small files are written several at once (each costs a round trip to the sharer
// and a file creation); a big file streams alone with the bulk read-ahead window,
// so memory stays bounded whatever the sizes.

import type { RangeReader } from './entry-stream';
import { entryStream } from './entry-stream';
import type { ZipFacts } from '../api';
import type { PlanMember } from './zip-source';
import { portableName } from '../folder-names';

/** Files up to this size are written several at once… */
const SMALL_FILE = 256 * 1024;
/** …at most this many. */
const SMALL_AT_ONCE = 8;
/** Notes kept for the page (all are counted). */
const MAX_NOTES = 1000;

export interface DirectorySaved {
  /** The folder written into, in the chosen directory. */
  folder: string;
  /** Bytes of file contents written or found complete. */
  written: number;
  /** Names changed while writing, beyond the plan's own notes. */
  notes: string[];
  notesTotal: number;
}

function reasonOf(signal: AbortSignal): string {
  const r: unknown = signal.reason;
  return r instanceof Error ? r.message : 'cancelled';
}

/** An error that says how far it got. */
class DirectorySaveError extends Error {
  constructor(
    message: string,
    readonly written: number,
  ) {
    super(message);
  }
}

export interface DirectoryJob {
  reader: RangeReader;
  plan: ZipFacts;
  members: PlanMember[];
  /** The chosen directory. */
  target: FileSystemDirectoryHandle;
  /** The folder to write into there (made if missing). */
  folder: string;
  /** A retry: skip files already there at full size. */
  resume: boolean;
  signal: AbortSignal;
  onSent(sent: number): void;
}

export async function saveToDirectory(job: DirectoryJob): Promise<DirectorySaved> {
  const { reader, members, target, signal } = job;
  const notes: string[] = [];
  let notesTotal = 0;
  const note = (text: string): void => {
    notesTotal += 1;
    if (notes.length < MAX_NOTES) notes.push(text);
  };

  const { folder } = job;
  let written = 0;
  let root: FileSystemDirectoryHandle;
  try {
    root = await target.getDirectoryHandle(folder, { create: true });
  } catch (error) {
    throw new DirectorySaveError(`Could not make the folder "${folder}" in the chosen folder: ${messageOf(error)}`, 0);
  }

  // A single folder saved: its members go straight into `folder`, not folder/folder.
  const strip = members.length > 0 && members[0]!.dir && members.every((m) => m.path.startsWith(members[0]!.path)) ? members[0]!.path.length : 0;
  /** A path as the user knows it (the plan's, the saved folder's name first). */
  const shownOf = (path: string): string => (strip > 0 ? `${members[0]!.path}${path}` : path);

  /** Folders made so far, by their path in the plan. */
  const folders = new Map<string, Promise<FileSystemDirectoryHandle>>([['', Promise.resolve(root)]]);
  /** Names used in each folder, lower case (after the browser's rules changed some). */
  const used = new Map<string, Set<string>>();
  /**
   * Makes `wanted` in the folder at `parentPath` through `make`: under its own name
   * if the browser takes it and no other entry there has it (ignoring case), else
   * under the nearest name that works, reported. Names are reserved before the
   * first await, so entries made at once never share a name.
   */
  const nameIn = async (parentPath: string, wanted: string, shown: string, make: (name: string) => Promise<unknown>): Promise<void> => {
    const taken = used.get(parentPath) ?? new Set<string>();
    used.set(parentPath, taken);
    const reserve = (name: string): boolean => {
      const key = name.toLowerCase();
      if (taken.has(key)) return false;
      taken.add(key);
      return true;
    };
    // Names are made portable first (Chromium refuses these in a folder on disk; doing
    // it here makes the result the same on every system and browser).
    const portable = portableName(wanted);
    let why = portable !== wanted ? 'a name that Windows, macOS or this browser cannot hold' : 'another entry there was saved under that name';
    if (portable === wanted && reserve(wanted)) {
      try {
        await make(wanted);
        return;
      } catch (error) {
        taken.delete(wanted.toLowerCase());
        if (!(error instanceof TypeError)) throw error;
        why = 'a name this browser cannot write';
      }
    }
    const safe = portable;
    const dot = safe.lastIndexOf('.');
    const [stem, ext] = dot > 0 ? [safe.slice(0, dot), safe.slice(dot)] : [safe, ''];
    let name = safe;
    for (let n = 2; !reserve(name); n += 1) name = `${stem} (${n})${ext}`;
    try {
      await make(name);
    } catch (error) {
      if (!(error instanceof TypeError)) throw error;
      // Rules this code does not know: a plain name that any browser takes.
      const plainExt = /^\.[A-Za-z0-9]{1,8}$/.test(ext) ? ext : '';
      for (let n = 1; !reserve((name = `renamed-${n}${plainExt}`)); n += 1);
      await make(name);
    }
    note(`${shown}: saved as "${name}" (${why})`);
  };

  const parentOf = (path: string): [string, string] => {
    const cut = path.lastIndexOf('/');
    return cut < 0 ? ['', path] : [path.slice(0, cut), path.slice(cut + 1)];
  };

  const folderAt = (path: string): Promise<FileSystemDirectoryHandle> => {
    const known = folders.get(path);
    if (known) return known;
    const [parentPath, name] = parentOf(path);
    const made = (async () => {
      const parent = await folderAt(parentPath);
      let handle!: FileSystemDirectoryHandle;
      await nameIn(parentPath, name, shownOf(path), async (n) => {
        handle = await parent.getDirectoryHandle(n, { create: true });
      });
      return handle;
    })();
    folders.set(path, made);
    return made;
  };

  const writeFile = async (m: PlanMember, path: string): Promise<void> => {
    const [parentPath, name] = parentOf(path);
    const parent = await folderAt(parentPath);
    let handle!: FileSystemFileHandle;
    await nameIn(parentPath, name, shownOf(path), async (n) => {
      handle = await parent.getFileHandle(n, { create: true });
    });
    if (job.resume && (await handle.getFile()).size === m.size) {
      written += m.size;
      job.onSent(written);
      return;
    }
    const writable = await handle.createWritable();
    try {
      const stream = entryStream(reader, m.id, 0, m.size);
      const chunks = stream.getReader();
      const stop = (): void => void chunks.cancel(reasonOf(signal)).catch(() => undefined);
      signal.addEventListener('abort', stop, { once: true });
      let at = 0;
      try {
        for (;;) {
          const { value, done } = await chunks.read();
          if (signal.aborted) throw new Error(reasonOf(signal));
          if (done) break;
          if (at + value.byteLength > m.size) throw new Error(`${path} grew while it was being saved; save again to get its new contents.`);
          await writable.write(value as Uint8Array<ArrayBuffer>);
          at += value.byteLength;
          written += value.byteLength;
          job.onSent(written);
        }
      } finally {
        signal.removeEventListener('abort', stop);
      }
      if (at !== m.size) throw new Error(`${path} shrank while it was being saved; save again to get its new contents.`);
      await writable.close();
    } catch (error) {
      // Nothing half-written is left under the file's name.
      await writable.abort().catch(() => undefined);
      throw error;
    }
  };

  const running = new Set<Promise<void>>();
  let failure: unknown = null;
  const settle = async (all: boolean): Promise<void> => {
    while (running.size > 0 && (all || running.size >= SMALL_AT_ONCE)) await Promise.race(running);
    if (failure !== null) throw failure;
  };
  try {
    for (const m of members) {
      if (signal.aborted) throw new Error(reasonOf(signal));
      const path = m.path.slice(strip).replace(/\/$/, '');
      if (path === '') continue;
      if (m.dir) {
        await folderAt(path);
        continue;
      }
      // Big files stream alone; small ones run several at once.
      if (m.size > SMALL_FILE) await settle(true);
      else await settle(false);
      const run = writeFile(m, path).then(
        () => undefined,
        (error: unknown) => {
          failure ??= error;
        },
      );
      const tracked = run.finally(() => running.delete(tracked));
      running.add(tracked);
      if (m.size > SMALL_FILE) await settle(true);
    }
    await settle(true);
  } catch (error) {
    await Promise.allSettled(running);
    throw new DirectorySaveError(messageOf(error), written);
  }
  return { folder, written, notes, notesTotal };
}

function messageOf(error: unknown): string {
  if (error instanceof DOMException && error.name === 'QuotaExceededError') return 'The disk is full: free some space, then press Retry (files already saved are kept and skipped).';
  if (error instanceof DOMException && error.name === 'NotAllowedError') return 'The browser no longer allows writing to the chosen folder: press Retry and allow it again.';
  return error instanceof Error ? error.message : String(error);
}
