// Chooses the object store: S3 when an endpoint is configured, files under `dir` otherwise. The S3
// adapter (the AWS SDK) is loaded only when chosen: an embedded start does not pay for it.
import type { ObjectStore } from './port.ts';
import { FileObjectStore } from './files.ts';
import type { S3ObjectStoreOptions } from './s3.ts';

export type { ObjectStore } from './port.ts';
export { FileObjectStore } from './files.ts';
export type { S3ObjectStoreOptions } from './s3.ts';
export { InvalidObjectKeyError, assertObjectKey, assertObjectPrefix } from './keys.ts';

export async function createObjectStore(opts: { s3?: S3ObjectStoreOptions; dir: string }): Promise<ObjectStore> {
  if (opts.s3?.endpoint) {
    const { S3ObjectStore } = await import('./s3.ts');
    const store = new S3ObjectStore(opts.s3);
    await store.init();
    return store;
  }
  return new FileObjectStore(opts.dir).init();
}
