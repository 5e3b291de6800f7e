// A migrated, empty PGlite cluster made once per schema (by `cog generate`, under generated/), so a
// first start copies it into the data dir instead of running initdb and every migration in WASM
// (the largest part of a first start's time). Named by the hash of the migrations and the PGlite
// version: a template of other migrations is never used (and the migrator still runs at open, so
// a copied cluster is checked like any other). Building is atomic (a folder renamed into place),
// so processes that start at once never copy half a template.
import fs from 'node:fs';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { migrate, readMigrations } from './migrate.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const templatesDir = path.join(root, 'generated', 'pglite-template');

function pgliteVersion(): string {
  try {
    const req = createRequire(path.join(root, 'package.json'));
    return (JSON.parse(fs.readFileSync(req.resolve('@electric-sql/pglite/package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

/** The template's folder for the migrations on disk (it may not exist). */
export function templatePath(): string {
  const h = createHash('sha256').update(pgliteVersion());
  for (const m of readMigrations()) h.update(m.name).update('\0').update(m.checksum).update('\0');
  return path.join(templatesDir, h.digest('hex').slice(0, 24));
}

/** True when `dir` holds no cluster yet (PGlite would run initdb there). */
export function freshCluster(dir: string): boolean {
  return !fs.existsSync(path.join(dir, 'PG_VERSION'));
}

/** Copies the current template into an empty cluster folder; false when there is none. */
export function copyTemplate(dir: string): boolean {
  const t = templatePath();
  if (!fs.existsSync(path.join(t, 'PG_VERSION'))) return false;
  try {
    fs.cpSync(t, dir, { recursive: true });
  } catch (e) {
    // Half a copy is no cluster: PGlite then creates one in the emptied folder.
    for (const name of fs.readdirSync(dir)) fs.rmSync(path.join(dir, name), { recursive: true, force: true });
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return false; // the template was pruned meanwhile
    throw e;
  }
  return true;
}

/** Builds the template for the current migrations unless it exists; returns its folder. */
export async function ensureTemplate(): Promise<string> {
  const t = templatePath();
  if (fs.existsSync(path.join(t, 'PG_VERSION'))) return t;
  fs.mkdirSync(templatesDir, { recursive: true });
  const tmp = `${t}.tmp-${process.pid}`;
  fs.rmSync(tmp, { recursive: true, force: true });
  const { PGlite } = await import('@electric-sql/pglite');
  const lite = await PGlite.create(tmp);
  try {
    await migrate({ exec: async (sql) => void (await lite.exec(sql)), query: async (sql, params) => (await lite.query(sql, params)).rows as never });
    // A checkpoint, so the copy starts without replaying the migrations' WAL.
    await lite.exec('CHECKPOINT');
  } finally {
    await lite.close();
  }
  try {
    fs.renameSync(tmp, t);
  } catch (e) {
    fs.rmSync(tmp, { recursive: true, force: true });
    if (!fs.existsSync(path.join(t, 'PG_VERSION'))) throw e; // else another process got there first
  }
  // Templates of earlier migrations are of no use (one an hour old is no longer being copied).
  for (const name of fs.readdirSync(templatesDir)) {
    const other = path.join(templatesDir, name);
    try {
      if (other !== t && Date.now() - fs.statSync(other).mtimeMs > 3600_000) fs.rmSync(other, { recursive: true, force: true });
    } catch {
      // another process removed it
    }
  }
  return t;
}
