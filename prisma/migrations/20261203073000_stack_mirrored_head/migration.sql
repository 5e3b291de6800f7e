-- Heads mirrored on the identity NFT once an epoch, in batches (docs/decisions.md, "Heads mirrored
-- once an epoch"): the head the chain holds, and the stacks whose head it does not hold yet, found
-- through a partial index (the mirror reads only those).
ALTER TABLE "Stack" ADD COLUMN     "mirroredHead" TEXT;

CREATE INDEX "Stack_unmirrored_head_idx" ON "Stack"(id) WHERE "episodicHead" IS DISTINCT FROM "mirroredHead";

-- Heads already mirrored by the per-stack updateStack intents count as mirrored.
UPDATE "Stack" s SET "mirroredHead" = s."episodicHead"
WHERE s."episodicHead" IS NOT NULL AND NOT EXISTS (
  SELECT 1 FROM "ChainOutbox" o WHERE o.kind = 'updateStack' AND o.ref = s.id AND o.status IN ('pending', 'submitted')
) AND EXISTS (
  SELECT 1 FROM "ChainOutbox" o WHERE o.kind = 'updateStack' AND o.ref = s.id AND o.status = 'confirmed' AND o.payload->>'episodicHead' = s."episodicHead"
);
