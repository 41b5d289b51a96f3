// Names for saving into a directory through File System Access, shared by the page
// (which picks the new folder's name) and the index worker (which writes into it).
//
// Chromium refuses names a disk cannot hold portably: `/` and `\`, `:*?"<>|`,
// control and some invisible formatting characters, a trailing dot or space, ".",
// "..", and Windows' reserved device names (CON, NUL, COM1…). `portableName` makes
// the nearest name it takes.

/** Characters the browser refuses in a name (and `/`, `\`, which split paths). */
const ILLEGAL = /["*/:<>?\\|\u0000-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2028\u2029\ufeff\ufff9-\ufffb]/gu;
const RESERVED = /^(con|prn|aux|nul|com[0-9¹²³]|lpt[0-9¹²³])(\..*)?$/i;

/** A name the browser's File System Access rules accept, as near to `name` as possible. */
export function portableName(name: string): string {
  let safe = name.replace(ILLEGAL, '_').replace(/[. ]+$/u, '');
  if (safe === '' || safe === '.' || safe === '..') safe = `_${safe}`;
  if (RESERVED.test(safe)) safe = `_${safe}`;
  return safe;
}

function isNotFound(error: unknown): boolean {
  return error instanceof DOMException && (error.name === 'NotFoundError' || error.name === 'TypeMismatchError');
}

/** Does `dir` hold an entry named `name` (file or folder)? */
async function exists(dir: FileSystemDirectoryHandle, name: string): Promise<boolean> {
  for (const get of [() => dir.getDirectoryHandle(name), () => dir.getFileHandle(name)]) {
    try {
      await get();
      return true;
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
  }
  return false;
}

/**
 * The name of a new folder for `wanted` in `dir`: portable, and with " (2)", " (3)"…
 * when taken, so nothing already there is ever written into.
 */
export async function freeFolderName(dir: FileSystemDirectoryHandle, wanted: string): Promise<string> {
  const base = portableName(wanted);
  let name = base;
  for (let n = 2; await exists(dir, name); n += 1) name = `${base} (${n})`;
  return name;
}
