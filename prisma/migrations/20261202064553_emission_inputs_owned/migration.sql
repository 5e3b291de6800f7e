-- The economy owns the inputs of its emission formula (issue 12, docs/decisions.md "Structure"):
-- EmissionAccrual gets its own copy of the stack's CPV and binding (written once, when the row is
-- opened at stack creation: neither changes after it) and becomes the owner of lastActiveEpoch,
-- which leaves "Stack". The amounts stay exactly what they were: the values are copied as they are.

-- AlterTable (nullable first, filled below, then NOT NULL)
ALTER TABLE "EmissionAccrual" ADD COLUMN     "bindingDecay" DOUBLE PRECISION,
ADD COLUMN     "bindingFloor" DOUBLE PRECISION,
ADD COLUMN     "computeCoeff" DOUBLE PRECISION,
ADD COLUMN     "lastActiveEpoch" INTEGER,
ADD COLUMN     "memoryCoeff" DOUBLE PRECISION,
ADD COLUMN     "residueCoeff" DOUBLE PRECISION,
ADD COLUMN     "routingCoeff" DOUBLE PRECISION,
ADD COLUMN     "syncCoeff" DOUBLE PRECISION;

-- Backfill: the existing rows take their stack's values.
UPDATE "EmissionAccrual" a SET "syncCoeff" = s."syncCoeff", "memoryCoeff" = s."memoryCoeff", "computeCoeff" = s."computeCoeff",
  "residueCoeff" = s."residueCoeff", "routingCoeff" = s."routingCoeff", "bindingFloor" = s."bindingFloor", "bindingDecay" = s."bindingDecay",
  "lastActiveEpoch" = s."lastActiveEpoch"
FROM "Stack" s WHERE s.id = a."stackId";

-- A row whose stack is gone was read by nothing (every read joined "Stack"): it goes.
DELETE FROM "EmissionAccrual" WHERE "lastActiveEpoch" IS NULL;

-- A stack without a row (inserted around createStack) gets the row accrual.ts assumed for it until
-- now, and wrote the first time it was active or claimed: it accrues from the epoch after its last
-- activity, nothing settled. The floorEpoch expression is tailSql in subgraphs/economy/accrual.ts.
INSERT INTO "EmissionAccrual" ("stackId", "syncCoeff", "memoryCoeff", "computeCoeff", "residueCoeff", "routingCoeff", "bindingFloor", "bindingDecay",
  "lastActiveEpoch", "sinceEpoch", "settledEpoch", "floorEpoch")
SELECT s.id, s."syncCoeff", s."memoryCoeff", s."computeCoeff", s."residueCoeff", s."routingCoeff", s."bindingFloor", s."bindingDecay",
  s."lastActiveEpoch", s."lastActiveEpoch" + 1, s."lastActiveEpoch",
  s."lastActiveEpoch" + 1 + (CASE WHEN s."bindingDecay" = 0 THEN 0 WHEN s."bindingDecay" < 0 THEN 1000000000
    WHEN s."bindingFloor" > 0 THEN LEAST(1000000000, GREATEST(0, CEIL(LN(1 / s."bindingFloor") / s."bindingDecay")) + 1)
    ELSE LEAST(1000000000, CEIL(LN(400000) / s."bindingDecay") + 1) END)::int
FROM "Stack" s WHERE NOT EXISTS (SELECT 1 FROM "EmissionAccrual" a WHERE a."stackId" = s.id);

ALTER TABLE "EmissionAccrual" ALTER COLUMN "bindingDecay" SET NOT NULL,
ALTER COLUMN "bindingFloor" SET NOT NULL,
ALTER COLUMN "computeCoeff" SET NOT NULL,
ALTER COLUMN "lastActiveEpoch" SET NOT NULL,
ALTER COLUMN "memoryCoeff" SET NOT NULL,
ALTER COLUMN "residueCoeff" SET NOT NULL,
ALTER COLUMN "routingCoeff" SET NOT NULL,
ALTER COLUMN "syncCoeff" SET NOT NULL;

-- AlterTable
ALTER TABLE "Stack" DROP COLUMN "lastActiveEpoch";
