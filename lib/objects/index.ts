// Chooses the object store: S3 when an endpoint is configured, files under `dir` otherwise.
import type { ObjectStore } from './port.ts';
import { FileObjectStore } from './files.ts';
import { S3ObjectStore, type S3ObjectStoreOptions } from './s3.ts';

export type { ObjectStore } from './port.ts';
export { FileObjectStore } from './files.ts';
export { S3ObjectStore, type S3ObjectStoreOptions } from './s3.ts';
export { InvalidObjectKeyError, assertObjectKey, assertObjectPrefix } from './keys.ts';

export async function createObjectStore(opts: { s3?: S3ObjectStoreOptions; dir: string }): Promise<ObjectStore> {
  if (opts.s3?.endpoint) {
    const store = new S3ObjectStore(opts.s3);
    await store.init();
    return store;
  }
  return new FileObjectStore(opts.dir).init();
}
