-- AlterTable
ALTER TABLE "EmissionRun" ADD COLUMN     "counted" BOOLEAN NOT NULL DEFAULT false;

-- CreateTable
CREATE TABLE "EmissionCohort" (
    "terms" TEXT NOT NULL,
    "lastActiveEpoch" INTEGER NOT NULL,
    "computeCoeff" DOUBLE PRECISION NOT NULL,
    "memoryCoeff" DOUBLE PRECISION NOT NULL,
    "syncCoeff" DOUBLE PRECISION NOT NULL,
    "routingCoeff" DOUBLE PRECISION NOT NULL,
    "bindingFloor" DOUBLE PRECISION NOT NULL,
    "bindingDecay" DOUBLE PRECISION NOT NULL,
    "stacks" INTEGER NOT NULL,

    CONSTRAINT "EmissionCohort_pkey" PRIMARY KEY ("terms","lastActiveEpoch")
);

-- The runs the emitter has not counted yet (the activity of the last epochs): the emitter reads
-- them here, O(what changed), and marks them counted (subgraphs/economy/treasury.ts, countRunsQuery).
CREATE INDEX "EmissionRun_uncounted_idx" ON "EmissionRun"("toEpoch") WHERE NOT counted;

-- The cohorts of the stacks already tallied, each at the lastActiveEpoch it had before its oldest
-- run kept (every run is uncounted: the next emitter moves the stacks along them). The terms key is
-- termsKeySql in subgraphs/economy/accrual.ts. Cohorts at their floor are dropped by that emitter.
INSERT INTO "EmissionCohort" (terms, "lastActiveEpoch", "computeCoeff", "memoryCoeff", "syncCoeff", "routingCoeff", "bindingFloor", "bindingDecay", stacks)
SELECT encode(float8send(a."computeCoeff") || float8send(a."memoryCoeff") || float8send(a."syncCoeff") || float8send(a."routingCoeff")
    || float8send(a."bindingFloor") || float8send(a."bindingDecay"), 'hex'),
  COALESCE((SELECT r."lastActiveEpoch" FROM "EmissionRun" r WHERE r."stackId" = a."stackId" ORDER BY r."toEpoch" LIMIT 1), a."lastActiveEpoch"),
  a."computeCoeff", a."memoryCoeff", a."syncCoeff", a."routingCoeff", a."bindingFloor", a."bindingDecay", count(*)
FROM "EmissionAccrual" a WHERE a.tallied
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8;
