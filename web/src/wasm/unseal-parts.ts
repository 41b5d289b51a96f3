// What the index worker and the unseal worker (./unsealer.ts, ./unseal-worker.ts)
// say to each other, and how both cut a stored group into the parts asked for.

export type UnsealAsk = { id: number; blob: Blob; lens: number[]; first: number; from: number; to: number };
/** Each part unsealed (`{plain}`), or as stored where it could not be. */
export type UnsealedParts = ({ plain: Uint8Array } | Uint8Array)[];
export type UnsealAnswer = { id: number; parts: UnsealedParts } | { id: number; error: string };

/** Each part `ask` asks for in its group's bytes, in order, as stored (a view; one cut short if the group is). */
export function eachPartAsked(buffer: ArrayBuffer, ask: UnsealAsk, take: (stored: Uint8Array) => void): void {
  let at = 0;
  ask.lens.forEach((len, i) => {
    const n = ask.first + i;
    const end = Math.min(at + len, buffer.byteLength);
    if (n >= ask.from && n <= ask.to) take(new Uint8Array(buffer, at, end - at));
    at = end;
  });
}
