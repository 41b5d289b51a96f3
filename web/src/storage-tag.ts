// Names for what the page stores about a share (its thumbnails, its kept folders,
// whether its link asks for a password) that do not reveal the link's key: a
// SHA-256 of a purpose and the key, in hex.
//
// Computed with @noble/hashes, not `crypto.subtle`: browsers offer `crypto.subtle`
// only in secure contexts (https, localhost), and a link to a sharer on the LAN is
// plain http (`linkfs share --bind`). Nothing on the way to opening a share may need a
// secure context (docs/browser-content.md, "Plain-http links"). The tags are the same
// SHA-256 as before, so what a browser kept under them is still found.

import { sha256 } from '@noble/hashes/sha2.js';

/** A SHA-256 of `purpose` + `key`, its first `bytes` bytes in hex. */
export function storageTag(key: string, purpose = '', bytes = 32): string {
  const digest = sha256(new TextEncoder().encode(`${purpose}${key}`));
  return Array.from(digest.subarray(0, bytes), (b) => b.toString(16).padStart(2, '0')).join('');
}
