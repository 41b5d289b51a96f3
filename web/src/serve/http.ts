// HTTP details of answering for a served resource (../sw.ts): byte ranges and the
// Content-Disposition header. Pure functions, tested in Node (tests-e2e/selftest.ts).

/** Types a served resource may be shown inline as; anything else is an attachment. */
export const INLINE_TYPES = /^(video|audio)\/[\w.+-]+$|^application\/pdf$/;

/** `bytes=a-b`, `bytes=a-`, `bytes=-n` (the first range of a list) against `size`; null if unsatisfiable. */
export function parseRange(header: string, size: number): { start: number; end: number } | null | undefined {
  const m = /^bytes=\s*(\d*)\s*-\s*(\d*)\s*(?:,|$)/.exec(header.trim());
  if (!m) return undefined; // not a byte range we understand: answer the whole
  const [, a = '', b = ''] = m;
  if (a === '' && b === '') return undefined;
  if (a === '') {
    const n = Number(b);
    if (n === 0) return null;
    return { start: Math.max(0, size - n), end: size };
  }
  const start = Number(a);
  const end = b === '' ? size : Math.min(size, Number(b) + 1);
  if (start >= size || end <= start) return null;
  return { start, end };
}

/** `filename="ascii"; filename*=UTF-8''percent-encoded` for any name. */
export function dispositionOf(kind: 'inline' | 'attachment', name: string): string {
  const ascii = name.replace(/[^\x20-\x7e]/g, '_').replace(/["\\]/g, '_');
  const encoded = encodeURIComponent(name).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return `${kind}; filename="${ascii}"; filename*=UTF-8''${encoded}`;
}

