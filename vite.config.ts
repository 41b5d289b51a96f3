// Web build for linkfs: the app lives in web/, the build goes to web/dist, which the
// relay serves at `/`. The page must run under `script-src 'self' 'wasm-unsafe-eval'`,
// so nothing here may produce inline scripts.
//
// `vite build --mode fake` (or `vite --mode fake`) builds the same UI over the
// development fake share (web/dev/fake-share.ts) into target/web-fake, for looking at
// and measuring the UI without a sharer. It never touches web/dist.
import { defineConfig } from 'vite';

const repoRoot = import.meta.dirname;

export default defineConfig(({ mode }) => {
  const fake = mode === 'fake';
  return {
    root: 'web',
    // Relative asset URLs: the relay may serve the app at `/` or under a prefix.
    base: './',
    resolve: {
      // In fake mode main.ts's `./share` is the development fake instead of the wasm share.
      alias: fake ? [{ find: /^\.\/share$/, replacement: `${repoRoot}/web/dev/fake-share.ts` }] : [],
    },
    build: {
      outDir: fake ? `${repoRoot}/target/web-fake` : 'dist',
      emptyOutDir: true,
      assetsDir: 'assets',
      target: 'es2022',
      // Assets are referenced by URL (wasm, worker, images) and never inlined as data:
      // URLs, which keeps the CSP simple.
      assetsInlineLimit: 0,
      // No modulepreload polyfill: it is not needed by the browsers we target.
      modulePreload: { polyfill: false },
      rollupOptions: {
        // The service worker is its own entry, at the app's root (its scope is the
        // app) under a fixed name; it imports nothing shared, so it is one script.
        input: { index: `${repoRoot}/web/index.html`, sw: `${repoRoot}/web/src/sw.ts` },
        output: {
          entryFileNames: (chunk) => (chunk.name === 'sw' ? 'sw.js' : 'assets/[name]-[hash].js'),
        },
      },
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
  };
});
