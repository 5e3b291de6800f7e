// Dev-only: Prisma 6.19's CLI with its bundled WASM schema engine and a PGlite adapter, so that
// `migrate diff` runs offline (Prisma 7's migrate needs a native engine). Used by prisma/diff.ts.
import { defineConfig } from 'prisma6/config';
import { PGlite } from '@electric-sql/pglite';
import { PrismaPGlite } from 'pglite-prisma-adapter';

// The schema engine replays each migration into a shadow database as one multi-statement script;
// the PGlite adapter sends that through a prepared statement, which PostgreSQL refuses. Run
// parameterless SQL through PGlite's exec (simple query protocol) instead.
function scriptFriendly(lite: PGlite) {
  const base = new PrismaPGlite(lite);
  return {
    provider: base.provider,
    adapterName: base.adapterName,
    async connect() {
      const a = await base.connect();
      return wrap(a, lite);
    },
    async connectToShadowDb() {
      const shadow = new PGlite();
      const a = await new PrismaPGlite(shadow).connect();
      return wrap(a, shadow);
    },
  };
}

function wrap<T extends object>(adapter: T, lite: PGlite): T {
  return new Proxy(adapter, {
    get(target, prop, receiver) {
      if (prop === 'executeScript') return async (script: string) => void (await lite.exec(script));
      if (prop === 'executeRaw') {
        return async (q: { sql: string; args: unknown[] }) => {
          if (!q.args?.length && q.sql.includes(';')) {
            await lite.exec(q.sql);
            return 0;
          }
          return (target as { executeRaw(q: unknown): Promise<number> }).executeRaw(q);
        };
      }
      const v = Reflect.get(target, prop, receiver);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
}

export default defineConfig({
  experimental: { adapter: true },
  engine: 'js',
  schema: 'schema.prisma',
  migrations: { path: 'migrations' },
  adapter: async () => scriptFriendly(new PGlite()),
} as never);
