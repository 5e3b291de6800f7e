// The ObjectStore port over the S3 API (MinIO, AWS, s3rver...). Path-style addressing for
// S3-compatible servers; the bucket is created when missing. Checksums only when the operation
// requires them: newer SDK defaults send headers some S3-compatible servers reject.
import {
  CreateBucketCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import type { ObjectStore } from './port.ts';
import { assertObjectKey, assertObjectPrefix } from './keys.ts';

export interface S3ObjectStoreOptions {
  endpoint: string;
  bucket: string;
  region: string;
  accessKeyId?: string;
  secretAccessKey?: string;
}

function isNotFound(err: unknown): boolean {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e?.name === 'NoSuchKey' || e?.name === 'NotFound' || e?.name === 'NoSuchBucket' || e?.$metadata?.httpStatusCode === 404;
}

export class S3ObjectStore implements ObjectStore {
  private readonly s3: S3Client;
  readonly bucket: string;
  private ready?: Promise<void>;

  constructor(opts: S3ObjectStoreOptions) {
    this.bucket = opts.bucket;
    this.s3 = new S3Client({
      endpoint: opts.endpoint,
      region: opts.region,
      forcePathStyle: true,
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      // Without explicit keys the SDK's default chain (env, profile, role) applies.
      ...(opts.accessKeyId && opts.secretAccessKey ? { credentials: { accessKeyId: opts.accessKeyId, secretAccessKey: opts.secretAccessKey } } : {}),
    });
  }

  /** Makes sure the bucket exists; every operation waits for it, callers may await it to fail fast. */
  init(): Promise<void> {
    this.ready ??= this.ensureBucket().catch((err) => {
      this.ready = undefined; // try again on the next call
      throw new Error(`S3 bucket ${this.bucket} is not usable: ${(err as Error).message}`);
    });
    return this.ready;
  }

  private async ensureBucket(): Promise<void> {
    try {
      await this.s3.send(new HeadBucketCommand({ Bucket: this.bucket }));
      return;
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    try {
      await this.s3.send(new CreateBucketCommand({ Bucket: this.bucket }));
    } catch (err) {
      const name = (err as Error).name;
      if (name !== 'BucketAlreadyOwnedByYou' && name !== 'BucketAlreadyExists') throw err;
    }
  }

  async put(key: string, body: Uint8Array): Promise<void> {
    assertObjectKey(key);
    await this.init();
    await this.s3.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: body, ContentType: 'application/octet-stream' }));
  }

  async get(key: string): Promise<Uint8Array | null> {
    assertObjectKey(key);
    await this.init();
    try {
      const r = await this.s3.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
      return r.Body ? await r.Body.transformToByteArray() : new Uint8Array();
    } catch (err) {
      if (isNotFound(err)) return null;
      throw err;
    }
  }

  async has(key: string): Promise<boolean> {
    assertObjectKey(key);
    await this.init();
    try {
      await this.s3.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
      return true;
    } catch (err) {
      if (isNotFound(err)) return false;
      throw err;
    }
  }

  async delete(key: string): Promise<void> {
    assertObjectKey(key);
    await this.init();
    try {
      await this.s3.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }

  async list(prefix: string): Promise<string[]> {
    assertObjectPrefix(prefix);
    await this.init();
    const keys: string[] = [];
    let token: string | undefined;
    do {
      const r = await this.s3.send(new ListObjectsV2Command({ Bucket: this.bucket, Prefix: prefix || undefined, ContinuationToken: token }));
      for (const o of r.Contents ?? []) if (o.Key) keys.push(o.Key);
      token = r.IsTruncated ? r.NextContinuationToken : undefined;
    } while (token);
    return keys.sort();
  }

  async close(): Promise<void> {
    this.s3.destroy();
  }
}
