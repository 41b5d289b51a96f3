// The password worker: a tab share's link passwords hashed and checked with Argon2id
// (the wasm's `passwordHash` and `passwordMatches`, the same hashes `linkfs share`
// keeps), off the page's loop: each takes tens of milliseconds and 19 MiB, and the
// page serves visitors meanwhile. The third module that touches the wasm (with
// ./page.ts and ./worker.ts); it loads its own instance, only when a link has a password.

/// <reference lib="webworker" />

import init, { passwordHash, passwordMatches } from '../../../core-wasm/pkg/linkfs_core_wasm.js';
import wasmUrl from '../../../core-wasm/pkg/linkfs_core_wasm_bg.wasm?url';
import type { PasswordAsk, PasswordAnswer } from './passwords';

declare const self: DedicatedWorkerGlobalScope;

const ready = init({ module_or_path: wasmUrl });

self.onmessage = (event: MessageEvent<PasswordAsk>) => {
  const ask = event.data;
  void ready.then(
    () => {
      let answer: PasswordAnswer;
      try {
        answer = ask.op === 'hash' ? { id: ask.id, hash: passwordHash(ask.password) } : { id: ask.id, right: passwordMatches(ask.hash, ask.attempt) };
      } catch (error) {
        answer = { id: ask.id, error: error instanceof Error ? error.message : String(error) };
      }
      self.postMessage(answer);
    },
    (error: unknown) => self.postMessage({ id: ask.id, error: `the password checker did not start: ${String(error)}` } satisfies PasswordAnswer),
  );
};
