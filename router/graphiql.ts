// GraphiQL at /graphiql, served from the npm packages on this machine (no CDN): on while
// introspection is on (development), off with COG_GRAPHQL_INTROSPECTION=off.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import type { FastifyInstance } from 'fastify';

const require = createRequire(import.meta.url);
// react's "exports" hides its UMD builds; resolve the package folder and read them from there.
const pkgDir = (name: string) => path.dirname(require.resolve(`${name}/package.json`));

const assets: Record<string, { file: string; type: string }> = {
  'react.js': { file: path.join(pkgDir('react'), 'umd/react.production.min.js'), type: 'text/javascript' },
  'react-dom.js': { file: path.join(pkgDir('react-dom'), 'umd/react-dom.production.min.js'), type: 'text/javascript' },
  'graphiql.js': { file: path.join(pkgDir('graphiql'), 'graphiql.min.js'), type: 'text/javascript' },
  'graphiql.css': { file: path.join(pkgDir('graphiql'), 'graphiql.min.css'), type: 'text/css' },
};

const page = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Cognitive Agent Platform — GraphiQL</title>
<link rel="stylesheet" href="/graphiql/assets/graphiql.css">
<style>body{margin:0;height:100vh}#graphiql{height:100vh}</style></head>
<body><div id="graphiql">Loading…</div>
<script src="/graphiql/assets/react.js"></script>
<script src="/graphiql/assets/react-dom.js"></script>
<script src="/graphiql/assets/graphiql.js"></script>
<script>
  const fetcher = GraphiQL.createFetcher({ url: '/graphql' });
  ReactDOM.createRoot(document.getElementById('graphiql')).render(
    React.createElement(GraphiQL, { fetcher, defaultQuery: '{\\n  stacks(first: 10) { id name kind sleeves { id embodimentType alive } }\\n}\\n' }));
</script></body></html>`;

export function mountGraphiql(app: FastifyInstance): void {
  app.get('/graphiql', async (_req, reply) => reply.type('text/html; charset=utf-8').send(page));
  app.get<{ Params: { name: string } }>('/graphiql/assets/:name', async (req, reply) => {
    const a = Object.hasOwn(assets, req.params.name) ? assets[req.params.name] : undefined;
    if (!a) return reply.callNotFound();
    return reply.type(a.type).header('cache-control', 'public, max-age=86400').send(fs.createReadStream(a.file));
  });
}
