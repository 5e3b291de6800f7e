-- AlterTable
ALTER TABLE "Sleeve" ADD COLUMN     "staleFor" INTEGER;

-- The residue collector's stale-ordering check (docs/scale.md): the alive, unfrozen sleeves whose
-- stale-ordering residue for their current GREATEST("syncEpoch", "spawnEpoch") is not opened yet,
-- by that value, so the check is a range `<= epoch - 4` over the newly stale (a reported sleeve
-- leaves the index; a sync or an unfreeze brings it back). The query repeats the predicate word
-- for word (subgraphs/sleeves/sleeves.ts, staleSleevesQuery).
CREATE INDEX "Sleeve_stale_due_idx" ON "Sleeve" ((GREATEST("syncEpoch", "spawnEpoch")))
  WHERE alive AND NOT frozen AND "staleFor" IS DISTINCT FROM GREATEST("syncEpoch", "spawnEpoch");
