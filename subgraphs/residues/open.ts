// Opening a residue: a coordination failure becomes a record carrying a ResidueToken bounty.
// Detection (residue-collector, recall, Medulla reorgs, Thalamus) calls openResidue inside its own
// transaction; a cause opens at most one residue (dedupeKey), so detectors can run repeatedly.
import { randomHex } from '../../lib/crypto.ts';
import { sql, sqlIdent, type Db, type Tx } from '../../lib/db/index.ts';
import { joinParts, type StatementPart } from '../../lib/db/statement.ts';
import { eventsFromRowsPart, recordEvent } from '../../lib/events.ts';
import { enqueueChainTx, newRecordsIntentPart } from '../chains/index.ts';

/** Bounties in RT (spec: Residue). routing-equivocation has no bounty in the spec; see docs/decisions.md. */
export const RESIDUE_BOUNTY = {
  'stale-ordering': 2,
  'speculative-divergence': 5,
  'historical-non-canonical': 8,
  'reorg-orphan': 12,
  'shard-loss': 15,
  'routing-equivocation': 10,
} as const;
export type ResidueKind = keyof typeof RESIDUE_BOUNTY;
export const RESIDUE_KINDS = Object.keys(RESIDUE_BOUNTY) as ResidueKind[];

export interface ResidueRecord {
  id: string;
  kind: string;
  trigger: string;
  bounty: number;
  status: string;
  stackId?: string;
  sleeveId?: string;
  epoch: number;
  openedAt: string;
  expiresAtEpoch: number;
  claimant?: string;
}

export function residueView(r: {
  id: string;
  kind: string;
  trigger: string;
  bountyMilli: number;
  status: string;
  stackId: string | null;
  sleeveId: string | null;
  epoch: number;
  openedAt: Date;
  expiresAtEpoch: number;
  claimant: string | null;
}): ResidueRecord {
  const v: ResidueRecord = {
    id: r.id,
    kind: r.kind,
    trigger: r.trigger,
    bounty: r.bountyMilli / 1000,
    status: r.status,
    epoch: r.epoch,
    openedAt: r.openedAt.toISOString(),
    expiresAtEpoch: r.expiresAtEpoch,
  };
  if (r.stackId) v.stackId = r.stackId;
  if (r.sleeveId) v.sleeveId = r.sleeveId;
  if (r.claimant) v.claimant = r.claimant;
  return v;
}

export interface OpenResidue {
  kind: ResidueKind;
  /** Human-readable cause, e.g. "recall fidelity 0.4 below 0.6". */
  trigger: string;
  stackId?: string;
  sleeveId?: string;
  epoch: number;
  /** Kind-specific signals, used to check proofs. Never secrets. */
  evidence: Record<string, unknown>;
  /** One residue per cause. */
  dedupeKey: string;
  expiryEpochs: number;
}

/** Opens (detected -> open) unless a residue for the same cause exists; returns it either way. */
export async function openResidue(tx: Tx, r: OpenResidue): Promise<{ residue: ResidueRecord; created: boolean }> {
  const existing = await tx.residue.findUnique({ where: { dedupeKey: r.dedupeKey } });
  if (existing) return { residue: residueView(existing), created: false };
  const id = `residue:${r.kind}:${randomHex(6)}`;
  const row = await tx.residue.create({
    data: {
      id,
      kind: r.kind,
      trigger: r.trigger,
      bountyMilli: RESIDUE_BOUNTY[r.kind] * 1000,
      status: 'open',
      stackId: r.stackId,
      sleeveId: r.sleeveId,
      epoch: r.epoch,
      expiresAtEpoch: r.epoch + r.expiryEpochs,
      evidence: r.evidence as never,
      dedupeKey: r.dedupeKey,
    },
  });
  const residue = residueView(row);
  await enqueueChainTx(tx, {
    kind: 'openResidue',
    ref: id,
    payload: { residueId: id, kind: r.kind, bountyMilli: RESIDUE_BOUNTY[r.kind] * 1000 },
    epoch: r.epoch,
  });
  await recordEvent(tx, { subject: 'cog.residue.opened', type: 'residue.opened', data: { residue }, msgId: `residue-opened:${id}` });
  return { residue, created: true };
}

/** Convenience for callers outside a transaction. */
export function openResidueNow(db: Db, r: OpenResidue) {
  return db.$transaction((tx) => openResidue(tx, r));
}

/**
 * Several residues opened as part of a composed statement (lib/db/statement.ts), each unless a
 * residue for its cause exists (its dedupeKey, as openResidue): the rows, their Cortex intents and
 * their events in one round trip, where openResidue is an interactive transaction of four
 * statements a residue. For a pass that opens many at once (the memory reconciler opens one a
 * sleeve that wrote beside the main line: 32 an epoch with 32 sleeves on a stack, a third of
 * PGlite's round trips under such load). The output `<name>` counts the residues opened.
 */
export function openResiduesPart(rs: readonly OpenResidue[], name = 'residues_opened'): StatementPart | null {
  const causes = new Map<string, OpenResidue>();
  for (const r of rs) if (!causes.has(r.dedupeKey)) causes.set(r.dedupeKey, r); // a cause once, as openResidue in turn would
  if (!causes.size) return null;
  const rows = [...causes.values()].map((r) => ({
    id: `residue:${r.kind}:${randomHex(6)}`,
    kind: r.kind,
    trigger: r.trigger,
    bountyMilli: RESIDUE_BOUNTY[r.kind] * 1000,
    stackId: r.stackId ?? null,
    sleeveId: r.sleeveId ?? null,
    epoch: r.epoch,
    expiresAtEpoch: r.epoch + r.expiryEpochs,
    evidence: r.evidence,
    dedupeKey: r.dedupeKey,
  }));
  const rowsName = `${name}_rows`;
  const opened = sqlIdent(rowsName);
  // The event's residue is residueView's: bounty in RT, openedAt in ISO form, no null ids.
  const view = sql`jsonb_strip_nulls(jsonb_build_object('id', o.id, 'kind', o.kind, 'trigger', o.trigger, 'bounty', o."bountyMilli" / 1000.0::float8,
    'status', o.status, 'epoch', o.epoch, 'openedAt', to_char(o."openedAt" AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    'expiresAtEpoch', o."expiresAtEpoch", 'stackId', o."stackId", 'sleeveId', o."sleeveId"))`;
  return joinParts(
    {
      ctes: [
        {
          name: rowsName,
          body: sql`INSERT INTO "Residue" (id, kind, trigger, "bountyMilli", status, "stackId", "sleeveId", epoch, "expiresAtEpoch", evidence, "dedupeKey")
            SELECT r.id, r.kind, r.trigger, r."bountyMilli", 'open', r."stackId", r."sleeveId", r.epoch, r."expiresAtEpoch", r.evidence, r."dedupeKey"
            FROM ROWS FROM (jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS (id text, kind text, trigger text, "bountyMilli" int, "stackId" text,
              "sleeveId" text, epoch int, "expiresAtEpoch" int, evidence jsonb, "dedupeKey" text)) WITH ORDINALITY AS r
            ORDER BY r.ordinality
            ON CONFLICT ("dedupeKey") DO NOTHING
            RETURNING id, kind, trigger, "bountyMilli", status, "stackId", "sleeveId", epoch, "openedAt", "expiresAtEpoch"`,
        },
      ],
      outputs: [{ name, expr: sql`(SELECT count(*)::int FROM ${opened})` }],
    },
    newRecordsIntentPart(
      'openResidue',
      sql`SELECT o.id AS ref, jsonb_build_object('residueId', o.id, 'kind', o.kind, 'bountyMilli', o."bountyMilli") AS payload, o.epoch FROM ${opened} o`,
      `${name}_intents`,
    ),
    eventsFromRowsPart(
      `${name}_events`,
      sql`SELECT 'cog.residue.opened' AS subject, 'residue-opened:' || o.id AS "msgId", 'residue.opened' AS type, jsonb_build_object('residue', ${view}) AS data FROM ${opened} o`,
    ),
  );
}
