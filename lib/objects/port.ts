// The object store port for shard payloads: S3 API (s3.ts) or files (files.ts).
// Keys are relative paths of [A-Za-z0-9._/-] characters.

export interface ObjectStore {
  put(key: string, body: Uint8Array): Promise<void>;
  /** The object, or null when absent. */
  get(key: string): Promise<Uint8Array | null>;
  has(key: string): Promise<boolean>;
  delete(key: string): Promise<void>;
  /** Keys under a prefix, sorted. */
  list(prefix: string): Promise<string[]>;
  close(): Promise<void>;
}
