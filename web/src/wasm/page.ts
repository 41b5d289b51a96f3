// The page's side of the wasm module: loads it (lazily, once), opens the data links
// the worker's visit asks for (signaling + the browser's RTCPeerConnection, in
// wasm) and starts the index worker (./worker.ts; it and ./password-worker.ts are
// the other modules that touch the wasm).

import type { DataLink, DataLinkHandlers, TabShare, TabShareHandlers } from '../../../core-wasm/pkg/linkfs_core_wasm.js';

export type { DataLink, DataLinkHandlers, LinkState, TabLink, TabShare, TabShareEvent, TabShareHandlers, TabVisitor } from '../../../core-wasm/pkg/linkfs_core_wasm.js';

type WasmModule = typeof import('../../../core-wasm/pkg/linkfs_core_wasm.js');

/** The page's wasm memory, for the figures in `linkfsStats`. */
let pageWasmMemory: WebAssembly.Memory | null = null;
let loading: Promise<WasmModule> | null = null;
let loaded: WasmModule | null = null;

/** Loads the wasm module on the page (once). */
export function loadWasm(): Promise<WasmModule> {
  loading ??= (async () => {
    const wasm = await import('../../../core-wasm/pkg/linkfs_core_wasm.js');
    const { default: wasmUrl } = await import('../../../core-wasm/pkg/linkfs_core_wasm_bg.wasm?url');
    const exports = await wasm.default({ module_or_path: wasmUrl });
    pageWasmMemory = exports.memory;
    loaded = wasm;
    return wasm;
  })();
  return loading;
}

/**
 * `?ice=relay` in the page's address: connect only through the relay's TURN server
 * (the sharer never learns this browser's addresses; for testing TURN, too).
 */
export function icePolicy(): 'relay' | 'all' {
  return new URLSearchParams(window.location.search).get('ice') === 'relay' ? 'relay' : 'all';
}

/** Opens the data link to the sharer of `link` (the page's origin + fragment). */
export async function openDataLink(link: string, handlers: DataLinkHandlers): Promise<DataLink> {
  const wasm = await loadWasm();
  return new wasm.DataLink(link, icePolicy(), handlers);
}

/**
 * Starts sharing a folder from this tab through this page's relay (`kept`: a share
 * kept from before, to go on under the same link).
 */
export async function openTabShare(folderName: string, folderMtimeMs: number, kept: string | undefined, keptLinks: string | undefined, handlers: TabShareHandlers): Promise<TabShare> {
  const wasm = await loadWasm();
  return new wasm.TabShare(window.location.origin, folderName, folderMtimeMs, kept, keptLinks, handlers);
}

/** `text` (a link) as a QR code, an SVG image's source; null if it cannot be one. */
export function qrSvg(text: string): string | null {
  try {
    return loaded?.qrSvg(text) ?? null;
  } catch {
    return null;
  }
}

/** Decodes the protocol's test vectors with this page's wasm build; returns how many. */
export function wasmSelfTest(): number {
  if (loaded === null) throw new Error('the wasm module is not loaded yet');
  return loaded.selfTest();
}

/** Bytes of the page's wasm memory (0 before it is loaded). */
export function pageWasmMemoryBytes(): number {
  return pageWasmMemory?.buffer.byteLength ?? 0;
}

/** Starts the index worker. */
export function startIndexWorker(): Worker {
  return new Worker(new URL('./worker.ts', import.meta.url), { type: 'module', name: 'linkfs-index' });
}
