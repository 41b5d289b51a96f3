// Names for what the page stores about a share (its thumbnails, its kept folders,
// whether its link asks for a password) that do not reveal the link's key: a
// SHA-256 of a purpose and the key, in hex.

/** A SHA-256 of `purpose` + `key`, its first `bytes` bytes in hex. */
export async function storageTag(key: string, purpose = '', bytes = 32): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(`${purpose}${key}`));
  return Array.from(new Uint8Array(digest).subarray(0, bytes), (b) => b.toString(16).padStart(2, '0')).join('');
}
