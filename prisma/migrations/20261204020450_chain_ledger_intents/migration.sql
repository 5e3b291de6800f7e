-- The ledger's mints and burns leave ChainOutbox for a narrow table of their own. In ChainOutbox a
-- ledger row (one a write) was inserted with seven index entries and updated twice, non-HOT (linked
-- to its settlement, then confirmed with it): about a fifth of PostgreSQL's time under the perceive
-- load went to those two updates. Here a row has three index entries at most, is updated once (when
-- it is folded into a settlement) and never at confirmation: its outcome is its settlement's.
CREATE TABLE "ChainLedgerIntent" (
    "id" BIGSERIAL NOT NULL,
    "kind" TEXT NOT NULL,
    "ref" TEXT NOT NULL,
    "payload" JSONB NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'pending',
    "epoch" INTEGER,
    "settlementId" BIGINT,
    "lastError" TEXT,
    "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "ChainLedgerIntent_pkey" PRIMARY KEY ("id")
);

-- The ledger rows already written move with their ids. A row linked to a settlement is 'settled'
-- (its settlement's row says how it went); one without keeps its status. Rows sent as transactions
-- of their own (a nonce: from before settlements) stay in ChainOutbox as the history they are.
INSERT INTO "ChainLedgerIntent" (id, kind, ref, payload, status, epoch, "settlementId", "lastError", "createdAt")
SELECT id, kind, ref, payload,
       CASE WHEN "settlementId" IS NOT NULL THEN 'settled' WHEN status = 'submitted' THEN 'pending' ELSE status END,
       epoch, "settlementId", "lastError", "createdAt"
FROM "ChainOutbox" WHERE kind IN ('mint', 'burn') AND nonce IS NULL;
DELETE FROM "ChainOutbox" WHERE kind IN ('mint', 'burn') AND nonce IS NULL;
SELECT setval(pg_get_serial_sequence('"ChainLedgerIntent"', 'id'), coalesce((SELECT max(id) FROM "ChainLedgerIntent"), 0) + 1, false);

-- What the submitter settles next, in id order.
CREATE INDEX "ChainLedgerIntent_pending_idx" ON "ChainLedgerIntent"(id) WHERE status = 'pending';
-- A settlement's rows (the drift check folds the rows of the settlements confirmed in its window).
CREATE INDEX "ChainLedgerIntent_settlement_idx" ON "ChainLedgerIntent"("settlementId") WHERE "settlementId" IS NOT NULL;
-- The newest failed rows (the drift check reports them).
CREATE INDEX "ChainLedgerIntent_failed_idx" ON "ChainLedgerIntent"(id) WHERE status = 'failed';

DROP INDEX "ChainOutbox_settlementId_idx";
ALTER TABLE "ChainOutbox" DROP COLUMN "settlementId";
