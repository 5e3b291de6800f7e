// The read of one sleeve: both shapes' names (embodimentType and kind), tokens from the ledger while
// alive, the decommission-time snapshot after.
import type { Sleeve as SleeveRow } from '../../generated/prisma/client.ts';
import { zeroAmounts, TOKENS, type TokenAmounts } from '../economy/index.ts';

export type { SleeveRow };

export interface SleeveView {
  id: string;
  stackId: string;
  embodimentType: string;
  kind: string;
  alive: boolean;
  frozen: boolean;
  drift: number;
  syncEpoch: number;
  lastSync: string;
  tokens: TokenAmounts;
  hostname: string | null;
  createdAt: string;
  tickRate: number;
  identityUrl: string | null;
  chainStatus: string;
}

function snapshot(json: unknown): TokenAmounts {
  const out = zeroAmounts();
  if (json && typeof json === 'object') for (const k of TOKENS) out[k] = Number((json as Record<string, unknown>)[k] ?? 0) || 0;
  return out;
}

/** A sleeve's identity endpoint: its path on the identity listener of the runtime that runs it (docs/decisions.md). */
export const identityUrl = (sleeveId: string, port: number, host = '127.0.0.1') => `http://${host}:${port}/sleeves/${encodeURIComponent(sleeveId)}/identity`;

/** What a sleeve's read uses of its row; the dates as the row has them, or as their ISO 8601 text (a json read). */
export type SleeveViewRow = Pick<
  SleeveRow,
  | 'id'
  | 'stackId'
  | 'embodimentType'
  | 'alive'
  | 'frozen'
  | 'driftMilli'
  | 'syncEpoch'
  | 'finalTokens'
  | 'hostname'
  | 'tickRate'
  | 'identityPort'
  | 'chainStatus'
> & { lastSync: Date | string; createdAt: Date | string };

const iso = (d: Date | string) => (typeof d === 'string' ? d : d.toISOString());

export function sleeveView(row: SleeveViewRow, balances: TokenAmounts, opts: { host?: string } = {}): SleeveView {
  return {
    id: row.id,
    stackId: row.stackId,
    embodimentType: row.embodimentType,
    kind: row.embodimentType,
    alive: row.alive,
    frozen: row.frozen,
    drift: row.driftMilli / 1000,
    syncEpoch: row.syncEpoch,
    lastSync: iso(row.lastSync),
    tokens: row.alive ? balances : snapshot(row.finalTokens),
    hostname: row.hostname,
    createdAt: iso(row.createdAt),
    tickRate: row.tickRate,
    identityUrl: row.identityPort ? identityUrl(row.id, row.identityPort, opts.host) : null,
    chainStatus: row.chainStatus,
  };
}
