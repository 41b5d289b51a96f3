// Serves a built web app (web/dist, or target/web-fake) on 127.0.0.1 for development checks, with the Content-Security-Policy
// the relay is expected to send, so a CSP violation shows up here first.

import { createServer, type Server } from 'node:http';
import { readFile } from 'node:fs/promises';
import { extname, join, normalize, resolve } from 'node:path';

export const CSP = [
  "default-src 'self'",
  "script-src 'self' 'wasm-unsafe-eval'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' blob: data:",
  "connect-src 'self'",
  "worker-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.wasm': 'application/wasm',
  '.json': 'application/json',
  '.png': 'image/png',
};

export interface StaticServer {
  origin: string;
  /** Every path requested, with its query, in order. */
  requests: string[];
  close(): Promise<void>;
}

export async function serveDirectory(dir: string): Promise<StaticServer> {
  const root = resolve(dir);
  const requests: string[] = [];
  const server: Server = createServer((req, res) => {
    const url = req.url ?? '/';
    requests.push(url);
    const pathname = decodeURIComponent(url.split('?')[0] ?? '/');
    const file = normalize(join(root, pathname === '/' ? 'index.html' : pathname));
    if (!file.startsWith(root)) {
      res.writeHead(403).end();
      return;
    }
    readFile(file).then(
      (body) => {
        res.writeHead(200, {
          'content-type': TYPES[extname(file)] ?? 'application/octet-stream',
          'content-security-policy': CSP,
          'cache-control': 'no-store',
        });
        res.end(body);
      },
      () => res.writeHead(404).end('not found'),
    );
  });
  await new Promise<void>((ready) => server.listen(0, '127.0.0.1', ready));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('server has no port');
  return {
    origin: `http://127.0.0.1:${address.port}`,
    requests,
    close: () => new Promise((done) => server.close(() => done())),
  };
}
