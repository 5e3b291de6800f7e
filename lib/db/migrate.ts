// Applies prisma/migrations/*/migration.sql in order at start, through the same driver the
// Prisma adapter uses. Each migration runs in a transaction and is recorded with its checksum in
// _cog_migrations; an edited, already-applied migration stops the start. On PostgreSQL an
// advisory lock keeps several starting processes from migrating at once.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const migrationsDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../prisma/migrations');

/** The minimum a driver must offer: run a multi-statement script, and a parameterised query. */
export interface SqlDriver {
  exec(sql: string): Promise<void>;
  /**
   * `prepare`: the statement is one the process sends again and again (the hot path's composed
   * statements): PostgreSQL keeps it prepared per connection, parsed and planned once, not on every
   * call; PGlite too (lib/db/pglite-prepared.ts).
   */
  query<T = Record<string, unknown>>(sql: string, params?: unknown[], opts?: { prepare?: boolean }): Promise<T[]>;
}

export interface Migration {
  name: string;
  sql: string;
  checksum: string;
}

export function readMigrations(dir = migrationsDir): Migration[] {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .filter((d) => d.isDirectory() && fs.existsSync(path.join(dir, d.name, 'migration.sql')))
    .map((d) => d.name)
    .sort()
    .map((name) => {
      const sql = fs.readFileSync(path.join(dir, name, 'migration.sql'), 'utf8');
      return { name, sql, checksum: createHash('sha256').update(sql).digest('hex') };
    });
}

export async function migrate(driver: SqlDriver, opts: { lock?: boolean } = {}): Promise<string[]> {
  const applied: string[] = [];
  if (opts.lock) await driver.query('SELECT pg_advisory_lock(727272)');
  try {
    await driver.exec(
      'CREATE TABLE IF NOT EXISTS _cog_migrations (name TEXT PRIMARY KEY, checksum TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())',
    );
    const done = new Map(
      (await driver.query<{ name: string; checksum: string }>('SELECT name, checksum FROM _cog_migrations')).map((r) => [r.name, r.checksum]),
    );
    for (const m of readMigrations()) {
      const prior = done.get(m.name);
      if (prior !== undefined) {
        if (prior !== m.checksum) throw new Error(`migration ${m.name} was changed after it was applied (checksum differs)`);
        continue;
      }
      const name = m.name.replace(/'/g, "''");
      await driver.exec(`BEGIN;\n${m.sql}\nINSERT INTO _cog_migrations (name, checksum) VALUES ('${name}', '${m.checksum}');\nCOMMIT;`);
      applied.push(m.name);
    }
  } catch (e) {
    await driver.exec('ROLLBACK').catch(() => {});
    throw e;
  } finally {
    if (opts.lock) await driver.query('SELECT pg_advisory_unlock(727272)');
  }
  return applied;
}
