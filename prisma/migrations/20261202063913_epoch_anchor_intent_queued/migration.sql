-- AlterTable
ALTER TABLE "EpochAnchor" ADD COLUMN     "intentQueued" BOOLEAN NOT NULL DEFAULT false;

-- Anchors folded before this migration whose intent is in the outbox (the one pass of the
-- anti-join the epoch-anchor pass used to run every epoch).
UPDATE "EpochAnchor" a SET "intentQueued" = true
  WHERE EXISTS (SELECT 1 FROM "ChainOutbox" o WHERE o.kind = 'anchor' AND o.ref = 'anchor:' || a.epoch);

-- The epoch-anchor pass reads only the anchors without an intent (subgraphs/chains/anchor-intents.ts).
CREATE INDEX "EpochAnchor_intent_pending_idx" ON "EpochAnchor"(epoch) WHERE NOT "intentQueued";
