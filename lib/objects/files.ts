// The ObjectStore port on the local file system (embedded mode): one file per key under rootDir.
// Writes go to a temp file that is fsynced and renamed into place, so a reader never sees half an
// object. Temp names contain "~", which no key may, so they never show up as keys.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { ObjectStore } from './port.ts';
import { assertObjectKey, assertObjectPrefix } from './keys.ts';

const isCode = (err: unknown, ...codes: string[]) => codes.includes((err as NodeJS.ErrnoException)?.code ?? '');

export class FileObjectStore implements ObjectStore {
  readonly root: string;

  constructor(rootDir: string) {
    this.root = path.resolve(rootDir);
  }

  /** Creates the root directory. */
  async init(): Promise<this> {
    await fs.mkdir(this.root, { recursive: true });
    return this;
  }

  private file(key: string): string {
    assertObjectKey(key);
    const file = path.join(this.root, ...key.split('/'));
    // Belt and braces: validation already rules this out.
    if (!file.startsWith(this.root + path.sep)) throw new Error('object key resolves outside the store');
    return file;
  }

  /**
   * Folders known to exist (made or seen by a put), so a put is one write and one rename, not a
   * mkdir each time. delete forgets the folders it removes; one removed behind the store's back
   * makes the write fail with ENOENT, and the put makes it again and retries once.
   */
  private readonly dirs = new Set<string>();

  async put(key: string, body: Uint8Array): Promise<void> {
    const file = this.file(key);
    const dir = path.dirname(file);
    const mkdir = async () => {
      await fs.mkdir(dir, { recursive: true });
      if (this.dirs.size >= 100_000) this.dirs.clear();
      this.dirs.add(dir);
    };
    if (!this.dirs.has(dir)) await mkdir();
    const tmp = `${file}~${randomBytes(6).toString('hex')}.tmp`;
    // flush: fsynced before the promise settles, so the rename publishes durable bytes.
    const write = () => fs.writeFile(tmp, body, { flag: 'wx', flush: true });
    try {
      try {
        await write();
      } catch (err) {
        if (!isCode(err, 'ENOENT')) throw err;
        await mkdir();
        await write();
      }
      await fs.rename(tmp, file);
    } catch (err) {
      await fs.rm(tmp, { force: true }).catch(() => {});
      if (isCode(err, 'EISDIR', 'ENOTDIR', 'EEXIST')) {
        throw new Error(`object key ${JSON.stringify(key)} clashes with an existing key used as a folder or file`);
      }
      throw err;
    }
  }

  async get(key: string): Promise<Uint8Array | null> {
    const file = this.file(key);
    try {
      const buf = await fs.readFile(file);
      return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
    } catch (err) {
      if (isCode(err, 'ENOENT', 'EISDIR', 'ENOTDIR')) return null;
      throw err;
    }
  }

  async has(key: string): Promise<boolean> {
    const file = this.file(key);
    try {
      return (await fs.stat(file)).isFile();
    } catch (err) {
      if (isCode(err, 'ENOENT', 'ENOTDIR')) return false;
      throw err;
    }
  }

  async delete(key: string): Promise<void> {
    const file = this.file(key);
    try {
      await fs.unlink(file);
    } catch (err) {
      if (isCode(err, 'ENOENT', 'ENOTDIR', 'EISDIR', 'EPERM')) return;
      throw err;
    }
    // Remove folders left empty, up to (not including) the root.
    for (let dir = path.dirname(file); dir !== this.root && dir.startsWith(this.root); dir = path.dirname(dir)) {
      try {
        await fs.rmdir(dir);
        this.dirs.delete(dir);
      } catch {
        break; // not empty (or already gone)
      }
    }
  }

  async list(prefix: string): Promise<string[]> {
    assertObjectPrefix(prefix);
    // Walk only the folder the prefix points into.
    const slash = prefix.lastIndexOf('/');
    const base = slash < 0 ? '' : prefix.slice(0, slash);
    const out: string[] = [];
    const walk = async (rel: string): Promise<void> => {
      let entries: import('node:fs').Dirent[];
      try {
        entries = await fs.readdir(path.join(this.root, ...(rel ? rel.split('/') : [])), { withFileTypes: true });
      } catch (err) {
        if (isCode(err, 'ENOENT', 'ENOTDIR')) return;
        throw err;
      }
      for (const e of entries) {
        if (e.name.includes('~')) continue; // temp file of a write in progress
        const key = rel ? `${rel}/${e.name}` : e.name;
        if (e.isDirectory()) {
          if ((key + '/').startsWith(prefix) || prefix.startsWith(key + '/')) await walk(key);
        } else if (e.isFile() && key.startsWith(prefix)) {
          out.push(key);
        }
      }
    };
    await walk(base);
    return out.sort();
  }

  async close(): Promise<void> {}
}
