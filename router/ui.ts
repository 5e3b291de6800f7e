// The inspector at /ui: the static build of ui/ (Vite, ui/dist), served by the gateway as files.
// It reads only through /graphql and its graphql-ws subscriptions, like any other client. Hashed
// assets are cached for good; index.html never (it names the current hashes). No build: a 503
// problem that says how to make one (bin/cog.mjs builds it at start when vite is installed).
import fs from 'node:fs';
import path from 'node:path';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { sendProblem } from '../lib/http.ts';
import { Problem } from '../lib/errors.ts';

export const UI_DIST = path.resolve(import.meta.dirname, '..', 'ui', 'dist');

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.html': 'text/html; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
  '.woff2': 'font/woff2',
};

// Everything the page loads is its own: scripts and styles from /ui, data from /graphql (HTTP and ws).
const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'";

export function mountUi(app: FastifyInstance, dist = UI_DIST): void {
  const index = async (reply: FastifyReply) => {
    const file = path.join(dist, 'index.html');
    if (!fs.existsSync(file)) {
      return sendProblem(
        reply,
        new Problem(503, 'UI_NOT_BUILT', 'Inspector not built', 'ui/dist is missing: run `npm run build:ui` (npm start builds it when vite is installed)'),
      );
    }
    return reply
      .type(TYPES['.html'])
      .header('cache-control', 'no-cache')
      .header('content-security-policy', CSP)
      .header('x-content-type-options', 'nosniff')
      .send(fs.createReadStream(file));
  };
  app.get('/ui', async (_req, reply) => index(reply));
  app.get<{ Params: { '*': string } }>('/ui/assets/*', async (req, reply) => {
    const name = req.params['*'];
    // Vite's asset names only: no separators, no dot-files, nothing outside ui/dist/assets.
    const missing = () => sendProblem(reply, new Problem(404, 'NOT_FOUND', 'Not found', 'No such inspector asset'));
    if (!/^[\w.-]+$/.test(name) || name.startsWith('.')) return missing();
    const file = path.join(dist, 'assets', name);
    const type = TYPES[path.extname(name)];
    if (!type || !fs.existsSync(file)) return missing();
    return reply
      .type(type)
      .header('cache-control', 'public, max-age=31536000, immutable')
      .header('x-content-type-options', 'nosniff')
      .send(fs.createReadStream(file));
  });
}
