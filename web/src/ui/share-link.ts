// The page address: `#<room>.<secret>` opens a share, `#<room>.<secret>/photos/2024`
// opens a folder inside it. The part before the first '/' is the share key; it only
// ever lives in the fragment and is handed to openShare, never put in a query string
// or a request. The folder path follows as URI-encoded segments.

export interface ShareLocation {
  /** `<room>.<secret>`, exactly as it appears in the link. */
  key: string;
  /** Folder names from the share root down, decoded. */
  path: string[];
}

/** Parses a fragment such as `#room.secret/a%20b/c` (the leading '#' is optional). */
export function parseFragment(fragment: string): ShareLocation {
  const text = fragment.startsWith('#') ? fragment.slice(1) : fragment;
  const slash = text.indexOf('/');
  const key = slash < 0 ? text : text.slice(0, slash);
  const rest = slash < 0 ? '' : text.slice(slash + 1);
  const path = rest
    .split('/')
    .filter((segment) => segment.length > 0)
    .map(decodeSegment);
  return { key, path };
}

/** The fragment (with '#') that shows `path` inside the share `key`. */
export function fragmentFor(key: string, path: readonly string[]): string {
  return `#${key}${path.map((name) => `/${encodeURIComponent(name)}`).join('')}`;
}

/** The path in the form `ShareApi.lookup` takes: '' for the root, else 'a/b/c'. */
export function lookupPath(path: readonly string[]): string {
  return path.join('/');
}

function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    // A hand-edited link with a stray '%': take the segment as written.
    return segment;
  }
}
