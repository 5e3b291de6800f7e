// One contract for the ObjectStore port, run against files in a temp dir and the S3 API (an
// s3rver started on a random loopback port over a temp dir).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import S3rver from 's3rver';
import type { ObjectStore } from '../../lib/objects/port.ts';
import { FileObjectStore } from '../../lib/objects/files.ts';
import { S3ObjectStore } from '../../lib/objects/s3.ts';
import { createObjectStore } from '../../lib/objects/index.ts';

const bytes = (s: string) => new TextEncoder().encode(s);
const text = (b: Uint8Array | null) => (b === null ? null : new TextDecoder().decode(b));
const tempDir = (tag: string) => fs.mkdtempSync(path.join(os.tmpdir(), `cog-objects-${tag}-`));

const adapters: { name: string; setup: () => Promise<{ store: ObjectStore; teardown(): Promise<void> }> }[] = [
  {
    name: 'files',
    async setup() {
      const dir = tempDir('files');
      const store = await new FileObjectStore(path.join(dir, 'objects')).init();
      return {
        store,
        async teardown() {
          await store.close();
          fs.rmSync(dir, { recursive: true, force: true });
        },
      };
    },
  },
  {
    name: 's3',
    async setup() {
      const dir = tempDir('s3');
      const server = new S3rver({ port: 0, address: '127.0.0.1', directory: dir, silent: true, configureBuckets: [{ name: 'test' }] });
      const { port } = await server.run();
      const opts = { endpoint: `http://127.0.0.1:${port}`, region: 'us-east-1', accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };
      const store = new S3ObjectStore({ ...opts, bucket: 'test' });
      // A missing bucket is created on first use.
      const fresh = new S3ObjectStore({ ...opts, bucket: 'created-on-demand' });
      await fresh.put('x', bytes('y'));
      expect(text(await fresh.get('x'))).toBe('y');
      await fresh.close();
      return {
        store,
        async teardown() {
          await store.close();
          await server.close();
          fs.rmSync(dir, { recursive: true, force: true });
        },
      };
    },
  },
];

describe.each(adapters)('ObjectStore contract: $name', ({ setup }) => {
  let store: ObjectStore;
  let teardown: () => Promise<void>;
  beforeAll(async () => {
    ({ store, teardown } = await setup());
  });
  afterAll(async () => teardown?.());

  it('puts, gets, overwrites, checks and deletes', async () => {
    expect(await store.get('shards/none')).toBeNull();
    expect(await store.has('shards/none')).toBe(false);
    await store.put('shards/a', bytes('first'));
    expect(text(await store.get('shards/a'))).toBe('first');
    expect(await store.has('shards/a')).toBe(true);
    await store.put('shards/a', bytes('second'));
    expect(text(await store.get('shards/a'))).toBe('second');
    await store.delete('shards/a');
    await store.delete('shards/a'); // deleting a missing key is fine
    expect(await store.get('shards/a')).toBeNull();
    expect(await store.has('shards/a')).toBe(false);
  });

  it('round-trips binary data, including empty bodies', async () => {
    const all = new Uint8Array(256 * 4).map((_, i) => i % 256);
    await store.put('bin/all-bytes.bin', all);
    const back = await store.get('bin/all-bytes.bin');
    expect(back).toBeInstanceOf(Uint8Array);
    expect(Buffer.from(back!).equals(Buffer.from(all))).toBe(true);
    await store.put('bin/empty', new Uint8Array());
    expect((await store.get('bin/empty'))?.byteLength).toBe(0);
    expect(await store.has('bin/empty')).toBe(true);
  });

  it('lists keys under a prefix, sorted', async () => {
    const keys = ['list/b/2', 'list/a', 'list/b/1', 'list/b-c', 'list/c.x', 'lister/z', 'other/q'];
    for (const k of keys) await store.put(k, bytes(k));
    expect(await store.list('list/')).toEqual(['list/a', 'list/b-c', 'list/b/1', 'list/b/2', 'list/c.x']);
    expect(await store.list('list/b')).toEqual(['list/b-c', 'list/b/1', 'list/b/2']);
    expect(await store.list('list/b/')).toEqual(['list/b/1', 'list/b/2']);
    expect(await store.list('list')).toEqual(['list/a', 'list/b-c', 'list/b/1', 'list/b/2', 'list/c.x', 'lister/z']);
    expect(await store.list('nothing/')).toEqual([]);
    const everything = await store.list('');
    expect(everything).toEqual([...everything].sort());
    expect(everything).toEqual(expect.arrayContaining(keys));
    await store.delete('list/b/1');
    expect(await store.list('list/b/')).toEqual(['list/b/2']);
  });

  it('refuses keys that could escape the store', async () => {
    const bad = ['../escape', 'a/../../b', '/etc/passwd', 'a//b', 'a/./b', 'a/', '', 'a b', 'a\\b', 'é', 'a~b', 'x'.repeat(1025)];
    for (const key of bad) {
      await expect(store.put(key, bytes('x')), key).rejects.toThrow(/invalid object key/);
      await expect(store.get(key), key).rejects.toThrow(/invalid object key/);
      await expect(store.has(key), key).rejects.toThrow(/invalid object key/);
      await expect(store.delete(key), key).rejects.toThrow(/invalid object key/);
    }
    await expect(store.list('../')).rejects.toThrow(/invalid object key/);
    await expect(store.list('/abs')).rejects.toThrow(/invalid object key/);
    // Dots inside names are fine.
    await store.put('ok/.hidden..name-1_2', bytes('fine'));
    expect(text(await store.get('ok/.hidden..name-1_2'))).toBe('fine');
  });
});

describe('FileObjectStore specifics', () => {
  it('writes atomically through a temp file that never shows as a key, and tidies empty folders', async () => {
    const dir = tempDir('atomic');
    const store = await createObjectStore({ dir });
    expect(store).toBeInstanceOf(FileObjectStore);
    await Promise.all(Array.from({ length: 10 }, (_, i) => store.put('same/key', bytes(`writer-${i}`))));
    expect(text(await store.get('same/key'))).toMatch(/^writer-\d$/);
    expect(fs.readdirSync(path.join(dir, 'same'))).toEqual(['key']);
    fs.writeFileSync(path.join(dir, 'same', 'key~leftover.tmp'), 'partial');
    expect(await store.list('same/')).toEqual(['same/key']);
    fs.rmSync(path.join(dir, 'same', 'key~leftover.tmp'));
    await store.delete('same/key');
    expect(fs.existsSync(path.join(dir, 'same'))).toBe(false);
    expect(fs.existsSync(dir)).toBe(true);
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
});
