// The migration that moves the ledger's mints and burns out of ChainOutbox into ChainLedgerIntent
// (prisma/migrations/*_chain_ledger_intents): the rows already written move with their ids and a
// status that says the same thing, and the ones sent alone before settlements stay where they are.
import { PGlite } from '@electric-sql/pglite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readMigrations } from '../lib/db/migrate.ts';

let db: PGlite;
const all = readMigrations();
const at = all.findIndex((m) => m.name.endsWith('_chain_ledger_intents'));

beforeAll(async () => {
  db = new PGlite();
  for (const m of all.slice(0, at)) await db.exec(m.sql);
});
afterAll(() => db.close());

describe('migration chain_ledger_intents', () => {
  it('moves the ledger rows with their ids and statuses; the ids go on from past them', async () => {
    const row = (id: number, kind: string, status: string, extra = '') =>
      db.exec(`INSERT INTO "ChainOutbox" (id, kind, ref, payload, status, epoch, "updatedAt"${extra ? ', ' + extra.split('=')[0] : ''})
        VALUES (${id}, '${kind}', 'ledger:${id}', '{"stackId":"stack:a","amounts":[]}', '${status}', 3, now()${extra ? ', ' + extra.split('=')[1] : ''})`);
    await row(1, 'settle', 'confirmed');
    await row(2, 'burn', 'confirmed', '"settlementId"=1'); // settled, landed with its settlement
    await row(3, 'mint', 'submitted', '"settlementId"=1');
    await row(4, 'burn', 'pending'); // not settled yet
    await row(5, 'burn', 'confirmed'); // netted to nothing
    await row(6, 'burn', 'failed', '"lastError"=\'InsufficientStackBalance\'');
    await row(7, 'mint', 'confirmed', 'nonce=0'); // sent alone, before settlements
    await row(8, 'anchor', 'pending');
    await db.exec(all[at]!.sql);

    const moved = await db.query<{ id: number; kind: string; status: string; settlementId: number | null; lastError: string | null; epoch: number }>(
      `SELECT id::int, kind, status, "settlementId"::int AS "settlementId", "lastError", epoch FROM "ChainLedgerIntent" ORDER BY id`,
    );
    expect(moved.rows.map((r) => [r.id, r.kind, r.status, r.settlementId, r.lastError, r.epoch])).toEqual([
      [2, 'burn', 'settled', 1, null, 3],
      [3, 'mint', 'settled', 1, null, 3],
      [4, 'burn', 'pending', null, null, 3],
      [5, 'burn', 'confirmed', null, null, 3],
      [6, 'burn', 'failed', null, 'InsufficientStackBalance', 3],
    ]);
    const left = await db.query<{ id: number }>(`SELECT id::int FROM "ChainOutbox" ORDER BY id`);
    expect(left.rows.map((r) => r.id)).toEqual([1, 7, 8]);
    const next = await db.query<{ id: number }>(`INSERT INTO "ChainLedgerIntent" (kind, ref, payload) VALUES ('burn', 'ledger:new', '{}') RETURNING id::int`);
    expect(next.rows[0]!.id).toBe(7);
    // The outbox lost its link column; the pending rows are on their partial index.
    const cols = await db.query(`SELECT 1 FROM information_schema.columns WHERE table_name = 'ChainOutbox' AND column_name = 'settlementId'`);
    expect(cols.rows).toEqual([]);
    const idx = await db.query<{ indexname: string }>(`SELECT indexname FROM pg_indexes WHERE tablename = 'ChainLedgerIntent' ORDER BY indexname`);
    expect(idx.rows.map((r) => r.indexname)).toEqual([
      'ChainLedgerIntent_failed_idx',
      'ChainLedgerIntent_pending_idx',
      'ChainLedgerIntent_pkey',
      'ChainLedgerIntent_settlement_idx',
    ]);
  });
});
