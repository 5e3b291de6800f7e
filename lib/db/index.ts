// The database: Prisma 7 over a driver adapter. PGlite (embedded PostgreSQL in WASM) under the
// data dir by default; PostgreSQL through @prisma/adapter-pg when a URL is given.
import fs from 'node:fs';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { PrismaPGlite } from 'pglite-prisma-adapter';
import { PrismaPg } from '@prisma/adapter-pg';
import pg from 'pg';
import { PrismaClient } from '../../generated/prisma/client.ts';
import { migrate, type SqlDriver } from './migrate.ts';

export type { PrismaClient };
export type Db = PrismaClient;
/** The client handed to a transaction callback. */
export type Tx = Parameters<Parameters<PrismaClient['$transaction']>[0]>[0];

export interface Database {
  prisma: PrismaClient;
  /** Raw driver, for the migrator and for tests that count queries. */
  driver: SqlDriver;
  kind: 'pglite' | 'postgres';
  /** Number of SQL statements sent through Prisma since open (DataLoader tests count these). */
  queryCount(): number;
  close(): Promise<void>;
}

export async function openDatabase(opts: { databaseUrl?: string; dataDir: string; poolSize?: number; inMemory?: boolean }): Promise<Database> {
  let queries = 0;
  if (opts.databaseUrl) {
    const pool = new pg.Pool({ connectionString: opts.databaseUrl, max: opts.poolSize ?? 10 });
    pool.on('error', () => {}); // an idle client lost its server: the pool replaces it
    const driver: SqlDriver = {
      exec: async (sql) => void (await pool.query(sql)),
      query: async (sql, params) => (await pool.query(sql, params as unknown[])).rows,
    };
    // Migrate on one connection so BEGIN/COMMIT and the advisory lock share a session.
    const client = await pool.connect();
    try {
      await migrate({ exec: async (s) => void (await client.query(s)), query: async (s, p) => (await client.query(s, p as unknown[])).rows }, { lock: true });
    } finally {
      client.release();
    }
    const prisma = new PrismaClient({ adapter: new PrismaPg(pool) as never, log: [{ emit: 'event', level: 'query' }] });
    (prisma as unknown as { $on(e: 'query', cb: () => void): void }).$on('query', () => void queries++);
    return { prisma, driver, kind: 'postgres', queryCount: () => queries, close: async () => { await prisma.$disconnect(); await pool.end(); } };
  }
  let dir = 'memory://';
  if (!opts.inMemory) {
    dir = path.join(opts.dataDir, 'db');
    fs.mkdirSync(dir, { recursive: true });
  }
  const lite = await PGlite.create(dir);
  const driver: SqlDriver = {
    exec: async (sql) => void (await lite.exec(sql)),
    query: async (sql, params) => (await lite.query(sql, params as unknown[])).rows as never,
  };
  await migrate(driver);
  const prisma = new PrismaClient({ adapter: new PrismaPGlite(lite) as never, log: [{ emit: 'event', level: 'query' }] });
  (prisma as unknown as { $on(e: 'query', cb: () => void): void }).$on('query', () => void queries++);
  return { prisma, driver, kind: 'pglite', queryCount: () => queries, close: async () => { await prisma.$disconnect(); await lite.close(); } };
}
