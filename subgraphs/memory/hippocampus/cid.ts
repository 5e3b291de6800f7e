// Content addresses of Hippocampus nodes. Two forms are accepted on PUT /dag, both checked:
//
//   node form (what the platform writes; binds the links, epoch and owner too):
//   cid = "cog://" + hex(SHA-256(UTF-8(JSON.stringify(["cog-dag-v1", stackId, epoch, links, data])))) + "@" + epoch
//
// where stackId is the owner string, epoch the decimal integer, links the array of CIDs in the
// order given and data the ciphertext object's JSON text exactly as stored (the bytes PUT /dag
// receives; not re-serialised). JSON.stringify of that array is the canonical encoding: fixed
// element order, no whitespace, strings escaped per ECMA-404. e.g. stackId "s", epoch 3, links [],
// data '{"iv":"00","ct":"11","v":1}' hashes the text ["cog-dag-v1","s",3,[],"{\"iv\":\"00\",\"ct\":\"11\",\"v\":1}"].
//
//   data form:  cid = "cog://" + hex(SHA-256(UTF-8(data))) + "@" + epoch
//
// (the plain reading of the spec's `cog://<sha256 hex>@<epoch>`). A CID matching neither is a 400.
import { sha256Hex } from '../../../lib/crypto.ts';

export const CID_RE = /^cog:\/\/([0-9a-f]{64})@(0|[1-9][0-9]{0,15})$/;

export interface CidContent {
  data: string;
  links: string[];
  epoch: number;
  stackId: string;
}

export function canonicalNodeBytes(c: CidContent): string {
  return JSON.stringify(['cog-dag-v1', c.stackId, c.epoch, c.links, c.data]);
}

export function computeCid(c: CidContent): string {
  return `cog://${sha256Hex(canonicalNodeBytes(c))}@${c.epoch}`;
}

/** The data form, for clients that address the payload alone: cog://hex(SHA-256(UTF-8(data)))@epoch. */
export function computeDataCid(c: Pick<CidContent, 'data' | 'epoch'>): string {
  return `cog://${sha256Hex(c.data)}@${c.epoch}`;
}

/** The hash and epoch of a well-formed CID, or null. */
export function parseCid(cid: unknown): { hash: string; epoch: number } | null {
  if (typeof cid !== 'string') return null;
  const m = CID_RE.exec(cid);
  return m ? { hash: m[1], epoch: Number(m[2]) } : null;
}

/** Object-store key of a node's payload. */
export const payloadKey = (hash: string) => `dag/${hash}`;
