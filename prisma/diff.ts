// Migrations tooling (dev only). Prisma 7's migrate commands need a native schema engine that cannot
// be fetched here, so we run Prisma 6.19's CLI (its WASM engine, a PGlite shadow database) by path:
//   npm run migrate:diff -- check        exit 1 when prisma/migrations drift from schema.prisma
//   npm run migrate:diff -- new <name>   write the missing SQL as a new migration folder
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..');
const cli = path.join(root, 'node_modules', 'prisma6', 'build', 'index.js');

/** SQL that takes the migrations folder to schema.prisma; empty when they agree. */
export function pendingSql(): string {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'cog-prisma6-'));
  try {
    // Prisma 6 wants a datasource url in the schema; Prisma 7 forbids it. It is never connected to.
    const schema = fs
      .readFileSync(path.join(here, 'schema.prisma'), 'utf8')
      .replace(/provider\s*=\s*"postgresql"/, 'provider = "postgresql"\n  url      = "postgresql://unused"');
    fs.writeFileSync(path.join(tmp, 'schema.prisma'), schema);
    const out = execFileSync(
      process.execPath,
      [
        cli,
        'migrate',
        'diff',
        '--config',
        path.join(here, 'prisma6.config.ts'),
        '--from-migrations',
        path.join(here, 'migrations'),
        '--to-schema-datamodel',
        path.join(tmp, 'schema.prisma'),
        '--script',
      ],
      {
        cwd: here,
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, PRISMA_QUERY_ENGINE_LIBRARY: process.execPath, PRISMA_SCHEMA_ENGINE_BINARY: process.execPath, PRISMA_HIDE_UPDATE_MESSAGE: '1' },
      },
    );
    return out
      .replace(/^Loaded Prisma config.*$/m, '')
      .replace(/^-- This is an empty migration\.\s*$/m, '')
      .trim();
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

function main(): void {
  const [cmd, name] = process.argv.slice(2);
  if (cmd === 'check') {
    const sql = pendingSql();
    if (sql) {
      console.error('prisma/migrations drift from schema.prisma; run `npm run migrate:diff -- new <name>`:\n' + sql);
      process.exit(1);
    }
    console.log('migrations match schema.prisma');
  } else if (cmd === 'new' && name && /^[a-z0-9_]+$/.test(name)) {
    const sql = pendingSql();
    if (!sql) {
      console.log('nothing to migrate');
      return;
    }
    const stamp = new Date()
      .toISOString()
      .replace(/[-:TZ.]/g, '')
      .slice(0, 14);
    const dir = path.join(here, 'migrations', `${stamp}_${name}`);
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, 'migration.sql'), sql + '\n');
    console.log(`wrote ${path.relative(root, dir)}/migration.sql`);
  } else {
    console.error('usage: tsx prisma/diff.ts check | new <snake_case_name>');
    process.exit(2);
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();
