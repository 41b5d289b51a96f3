// Web build for linkfs: the app lives in web/, the build goes to web/dist, which the
// relay serves at `/`. The page must run under `script-src 'self' 'wasm-unsafe-eval'`,
// so nothing here may produce inline scripts.
import { defineConfig } from 'vite';

const repoRoot = import.meta.dirname;

export default defineConfig({
  root: 'web',
  // Relative asset URLs: the relay may serve the app at `/` or under a prefix.
  base: './',
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    assetsDir: 'assets',
    target: 'es2022',
    // Assets are referenced by URL (wasm, worker, images) and never inlined as data:
    // URLs, which keeps the CSP simple.
    assetsInlineLimit: 0,
    // No modulepreload polyfill: it is not needed by the browsers we target.
    modulePreload: { polyfill: false },
  },
  worker: {
    format: 'es',
  },
  server: {
    host: '127.0.0.1',
    fs: {
      // share.ts loads the wasm-bindgen output from ../core-wasm/pkg.
      allow: [repoRoot],
    },
  },
  preview: {
    host: '127.0.0.1',
  },
});
