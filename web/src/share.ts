// TEMPORARY: the lead replaces this with the wasm-backed implementation.
export { openShare } from '../dev/fake-share';
