// npm run openapi: writes the gateway's OpenAPI document to openapi.json at the repository root
// (the SDK generates its REST types from that file; test/openapi.test.ts fails when it is stale).
// The document is built the way the gateway builds it, from the same routes, without a platform:
// routes are only registered here, never called.
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { createHttp } from '../lib/http.ts';
import { createLogger } from '../lib/log.ts';
import type { Platform } from '../lib/platform.ts';
import { registerRest } from '../compat-rest/index.ts';
import { installOpenapi } from '../compat-rest/openapi.ts';
import { mountHealth } from '../router/service.ts';

export const openapiFile = path.resolve(import.meta.dirname, '../openapi.json');

/** Any use of the platform while describing the routes is a bug: they must not run. */
const notRunning = new Proxy(
  {},
  {
    get(_t, key) {
      throw new Error(`openapi: the routes are described, not run (platform.${String(key)} was read)`);
    },
  },
) as Platform;

/** The document, as the gateway serves it at /v1/openapi.json. */
export async function buildOpenapi(): Promise<Record<string, unknown>> {
  const app = createHttp({ name: 'openapi', log: createLogger({ level: 'silent' }) });
  await installOpenapi(app);
  mountHealth(app);
  await registerRest(app, notRunning);
  await app.ready();
  const doc = app.swagger() as unknown as Record<string, unknown>;
  await app.close();
  return doc;
}

/** The file's text: two-space JSON and a final newline. */
export const openapiText = (doc: unknown) => `${JSON.stringify(doc, null, 2)}\n`;

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const text = openapiText(await buildOpenapi());
  fs.writeFileSync(openapiFile, text);
  console.log(`wrote ${path.relative(process.cwd(), openapiFile)} (${Object.keys((JSON.parse(text) as { paths: object }).paths).length} paths)`);
}
