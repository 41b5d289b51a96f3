// The unseal worker: while the index worker restores a stored index, this one
// reads the next chunk of its snapshot from the Blob IndexedDB gave, checks each
// part's checksum (BLAKE3) and decompresses it (LZ4) with the wasm's `unsealPart`.
// That is a quarter of the restore's work, and it now runs on a second core. The
// fourth module that touches the wasm (with ./page.ts, ./worker.ts and
// ./password-worker.ts); it loads its own instance, only while a restore runs.

/// <reference lib="webworker" />

import init, { unsealPart } from '../../../core-wasm/pkg/linkfs_core_wasm.js';
import wasmUrl from '../../../core-wasm/pkg/linkfs_core_wasm_bg.wasm?url';
import { eachPartAsked, type UnsealAnswer, type UnsealAsk, type UnsealedParts } from './unseal-parts';

declare const self: DedicatedWorkerGlobalScope;

const ready = init({ module_or_path: wasmUrl });

self.onmessage = (event: MessageEvent<UnsealAsk>) => {
  const ask = event.data;
  void (async () => {
    let answer: UnsealAnswer;
    try {
      await ready;
      const parts: UnsealedParts = [];
      eachPartAsked(await ask.blob.arrayBuffer(), ask, (stored) => {
        try {
          parts.push({ plain: unsealPart(stored) });
        } catch {
          // Not a part this page stored (damaged): handed back as stored, and
          // the index worker's own check refuses it with what is wrong.
          parts.push(stored.slice());
        }
      });
      answer = { id: ask.id, parts };
      const moved = parts.map((p) => (p instanceof Uint8Array ? p.buffer : p.plain.buffer));
      self.postMessage(answer, moved);
    } catch (error) {
      answer = { id: ask.id, error: error instanceof Error ? error.message : String(error) };
      self.postMessage(answer);
    }
  })();
};
