// A ZIP of a selection (files and whole folders) as a byte source, streamed by
// client-zip (a well-kept, dependency-free streaming ZIP writer: stored entries,
// data descriptors, Zip64 past 4 GiB or 65,535 entries, and `predictLength`, so
// the exact size is known before the first byte and the progress bar is true).
//
// The plan (every member's path, id, size, time) is taken from the index once,
// when the download starts; the bytes are read file by file as the ZIP is
// written. Names a ZIP cannot carry safely are changed and reported, never
// dropped silently: a `\` (a separator to Windows' extractors) becomes `_`, two
// members that end up with the same name get " (2)", " (3)"…; symlinks are left
// out and reported (client-zip writes no symlinks); names that were not valid
// UTF-8 on the sharer's side arrive with U+FFFD and are reported.

import { makeZip, predictLength } from 'client-zip';
import type { EntryId, EntryRow, ZipFacts } from '../api.ts';
import type { RangeReader } from './entry-stream.ts';
import { entryStream } from './entry-stream.ts';
import type { ByteSource } from './serve.ts';

/** Members of one ZIP, at most (the plan is held in the worker while it is written). */
export const MAX_ZIP_MEMBERS = 1_000_000;

/** Lists one folder's children (the worker's index query). */
export type ListChildren = (dir: EntryId, start: number, count: number) => { total: number; rows: EntryRow[] };

/** One file or folder of a ZIP or a folder save; `path` is `/`-separated, folders end in `/`. */
export interface PlanMember {
  path: string;
  id: EntryId;
  size: number;
  mtime: number;
  mode: number;
  dir: boolean;
}

const MAX_NOTES = 1000;
/** Files up to this size are read ahead of the ZIP writer… */
const SMALL_FILE = 256 * 1024;
/** …at most this many at once… */
const AHEAD_FILES = 64;
/** …holding at most about this many bytes. */
const AHEAD_BYTES = 8 * 1024 * 1024;

/** All of a stream's bytes (a small file's), in one array. */
async function readAll(stream: ReadableStream<Uint8Array>, size: number): Promise<Uint8Array> {
  const out = new Uint8Array(size);
  let at = 0;
  const reader = stream.getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    if (at + value.byteLength > size) throw new Error('a file grew while it was being zipped');
    out.set(value, at);
    at += value.byteLength;
  }
  if (at !== size) throw new Error('a file shrank while it was being zipped');
  return out;
}
const PAGE = 2000;

/**
 * Plans the ZIP of `roots` (rows of the index; the share's root, which has no name,
 * is named `rootName`); throws with the reason if it cannot be made.
 */
export function planZip(roots: EntryRow[], list: ListChildren, rootName: string): { plan: ZipFacts; members: PlanMember[] } {
  const members: PlanMember[] = [];
  const notes: string[] = [];
  let notesTotal = 0;
  const note = (text: string): void => {
    notesTotal += 1;
    if (notes.length < MAX_NOTES) notes.push(text);
  };
  const taken = new Set<string>();
  const unique = (folder: string, name: string, shown: string): string => {
    let safe = name.replace(/\\/g, '_');
    if (safe !== name) note(`${shown}: "\\" replaced by "_" (Windows reads it as a folder separator)`);
    // The index refuses these in every name but the share's own (the root's), which
    // the sharer chooses too: a member never climbs out of the folder it unpacks into.
    const unclimbing = safe.replace(/[/\0]/g, '_');
    if (unclimbing !== safe || unclimbing === '.' || unclimbing === '..' || unclimbing === '') {
      safe = unclimbing === '.' || unclimbing === '..' || unclimbing === '' ? '_' : unclimbing;
      note(`${shown}: saved as "${safe}" ("/", "..", "." and empty names would name another folder)`);
    }
    if (safe.includes('\uFFFD')) note(`${shown}: the name is not valid UTF-8 on the sharer's side; saved with U+FFFD in place of the invalid bytes`);
    let path = `${folder}${safe}`;
    if (taken.has(path.toLowerCase())) {
      const dot = safe.lastIndexOf('.');
      const [stem, ext] = dot > 0 ? [safe.slice(0, dot), safe.slice(dot)] : [safe, ''];
      let n = 2;
      while (taken.has(`${folder}${stem} (${n})${ext}`.toLowerCase())) n += 1;
      safe = `${stem} (${n})${ext}`;
      path = `${folder}${safe}`;
      note(`${shown}: saved as "${safe}" (another member has the same name, ignoring case)`);
    }
    taken.add(path.toLowerCase());
    return path;
  };
  const add = (row: EntryRow, folder: string, shown: string): void => {
    if (members.length >= MAX_ZIP_MEMBERS) {
      throw new Error(`A ZIP holds at most ${MAX_ZIP_MEMBERS.toLocaleString('en-US')} entries here; select fewer files or folders.`);
    }
    if (row.kind === 'symlink') {
      note(`${shown}: a symbolic link (→ ${row.target ?? '?'}), left out`);
      return;
    }
    const path = unique(folder, row.name, shown);
    if (row.kind === 'file') {
      members.push({ path, id: row.id, size: row.size, mtime: row.mtime, mode: row.mode & 0o777, dir: false });
      return;
    }
    members.push({ path: `${path}/`, id: row.id, size: 0, mtime: row.mtime, mode: row.mode & 0o777, dir: true });
    for (let start = 0; ; start += PAGE) {
      const page = list(row.id, start, PAGE);
      for (const child of page.rows) add(child, `${path}/`, `${shown}/${child.name}`);
      if (page.rows.length < PAGE || start + PAGE >= page.total) break;
    }
  };
  for (const root of roots) {
    const named = root.name === '' ? { ...root, name: rootName || 'share' } : root;
    add(named, '', named.name);
  }
  const size = Number(predictLength(members.map(metadataOf)));
  let files = 0;
  let contentBytes = 0;
  for (const m of members) {
    if (!m.dir) {
      files += 1;
      contentBytes += m.size;
    }
  }
  return { plan: { size, files, folders: members.length - files, contentBytes, notes, notesTotal }, members };
}

function metadataOf(m: PlanMember): { name: string } | { name: string; size: number } {
  return m.dir ? { name: m.path } : { name: m.path, size: m.size };
}

/** The ZIP of a plan as a byte source (whole only: a ZIP is not seekable here). */
export function zipSource(reader: RangeReader, plan: ZipFacts, members: PlanMember[]): ByteSource {
  return {
    size: plan.size,
    ownsChunks: false,
    open(start, end) {
      if (start !== 0 || end !== plan.size) throw new Error('A ZIP is streamed whole; it cannot be read from the middle.');
      // Small files are read ahead, several at once (each costs a round trip to
      // the sharer otherwise); big ones stream through one at a time.
      const ahead = new Map<number, Promise<Uint8Array>>();
      let nextAhead = 0;
      let aheadBytes = 0;
      const prefetch = (from: number): void => {
        nextAhead = Math.max(nextAhead, from);
        while (nextAhead < members.length && ahead.size < AHEAD_FILES && aheadBytes < AHEAD_BYTES) {
          const m = members[nextAhead]!;
          if (!m.dir && m.size > SMALL_FILE) break;
          if (!m.dir) {
            aheadBytes += m.size;
            const read = readAll(entryStream(reader, m.id, 0, m.size), m.size);
            read.catch(() => undefined); // awaited in turn below; an error surfaces there
            ahead.set(nextAhead, read);
          }
          nextAhead += 1;
        }
      };
      async function* inputs() {
        for (let i = 0; i < members.length; i++) {
          const m = members[i]!;
          // A time past what a Date holds (a sharer can send any number) is left out as 1980's.
          const lastModified = new Date(Number.isFinite(m.mtime) && Math.abs(m.mtime) <= 8.64e12 ? m.mtime * 1000 : 315532800000);
          prefetch(i);
          if (m.dir) {
            yield { name: m.path, lastModified, mode: m.mode };
            continue;
          }
          const early = ahead.get(i);
          if (early !== undefined) {
            ahead.delete(i);
            const bytes = await early;
            aheadBytes -= m.size;
            yield { name: m.path, lastModified, mode: m.mode, size: m.size, input: bytes };
          } else {
            yield { name: m.path, lastModified, mode: m.mode, size: m.size, input: entryStream(reader, m.id, 0, m.size) };
          }
          if (nextAhead <= i) nextAhead = i + 1;
        }
      }
      return makeZip(inputs(), { length: plan.size });
    },
  };
}
