-- The stacks whose head the chain does not hold, as a generated column with its own statistics
-- (docs/scale.md, "NFT heads mirror"): with the comparison itself as the partial index's predicate
-- the planner costed the index as if every stack matched and read the whole table for each mirror
-- (160-180 ms an epoch at 100,000 stacks, whatever the number of heads to mirror).
ALTER TABLE "Stack" ADD COLUMN "headUnmirrored" BOOLEAN GENERATED ALWAYS AS ("episodicHead" IS NOT NULL AND "episodicHead" IS DISTINCT FROM "mirroredHead") STORED;

DROP INDEX "Stack_unmirrored_head_idx";
CREATE INDEX "Stack_unmirrored_head_idx" ON "Stack"(id) WHERE "headUnmirrored";
