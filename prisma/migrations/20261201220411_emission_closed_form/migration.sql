-- CreateTable
CREATE TABLE "EmissionAccrual" (
    "stackId" TEXT NOT NULL,
    "sinceEpoch" INTEGER NOT NULL,
    "settledEpoch" INTEGER NOT NULL,
    "computeMilli" BIGINT NOT NULL DEFAULT 0,
    "memoryMilli" BIGINT NOT NULL DEFAULT 0,
    "syncMilli" BIGINT NOT NULL DEFAULT 0,
    "routingMilli" BIGINT NOT NULL DEFAULT 0,
    "floorEpoch" INTEGER NOT NULL,
    "tallied" BOOLEAN NOT NULL DEFAULT false,

    CONSTRAINT "EmissionAccrual_pkey" PRIMARY KEY ("stackId")
);

-- CreateTable
CREATE TABLE "EmissionRun" (
    "stackId" TEXT NOT NULL,
    "fromEpoch" INTEGER NOT NULL,
    "toEpoch" INTEGER NOT NULL,
    "lastActiveEpoch" INTEGER NOT NULL,

    CONSTRAINT "EmissionRun_pkey" PRIMARY KEY ("stackId","toEpoch")
);

-- CreateTable
CREATE TABLE "EmissionEpoch" (
    "epoch" INTEGER NOT NULL,
    "stacks" INTEGER NOT NULL,
    "floorCompute" BIGINT NOT NULL,
    "floorMemory" BIGINT NOT NULL,
    "floorSync" BIGINT NOT NULL,
    "floorRouting" BIGINT NOT NULL,
    "compute" BIGINT NOT NULL,
    "memory" BIGINT NOT NULL,
    "sync" BIGINT NOT NULL,
    "routing" BIGINT NOT NULL,
    "startedAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "EmissionEpoch_pkey" PRIMARY KEY ("epoch")
);

-- CreateTable
CREATE TABLE "EmissionWatch" (
    "stackId" TEXT NOT NULL,
    "watcher" TEXT NOT NULL,
    "expiresAt" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "EmissionWatch_pkey" PRIMARY KEY ("stackId","watcher")
);

-- CreateIndex
CREATE INDEX "EmissionAccrual_floorEpoch_idx" ON "EmissionAccrual"("floorEpoch");

-- CreateIndex
CREATE INDEX "EmissionAccrual_tallied_sinceEpoch_idx" ON "EmissionAccrual"("tallied", "sinceEpoch");

-- CreateIndex
CREATE INDEX "EmissionWatch_expiresAt_idx" ON "EmissionWatch"("expiresAt");

-- Existing stacks accrue in closed form from the epoch after their last per-epoch Emission row
-- (or after their last activity when they have none). The rows already written stay: claimable
-- balances in the ledger, and the Emission rows the issuance list still shows for those epochs.
-- The expression for floorEpoch is tailSql in subgraphs/economy/accrual.ts.
INSERT INTO "EmissionAccrual" ("stackId", "sinceEpoch", "settledEpoch", "floorEpoch")
SELECT s.id, GREATEST(s."lastActiveEpoch", COALESCE(e.last, -1)) + 1, GREATEST(s."lastActiveEpoch", COALESCE(e.last, -1)),
  s."lastActiveEpoch" + 1 + (CASE WHEN s."bindingDecay" = 0 THEN 0 WHEN s."bindingDecay" < 0 THEN 1000000000
    WHEN s."bindingFloor" > 0 THEN LEAST(1000000000, GREATEST(0, CEIL(LN(1 / s."bindingFloor") / s."bindingDecay")) + 1)
    ELSE LEAST(1000000000, CEIL(LN(400000) / s."bindingDecay") + 1) END)::int
FROM "Stack" s LEFT JOIN (SELECT "stackId", MAX(epoch) AS last FROM "Emission" GROUP BY "stackId") e ON e."stackId" = s.id;
