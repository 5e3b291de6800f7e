-- CreateTable
CREATE TABLE "Stack" (
    "id" TEXT NOT NULL,
    "tokenId" SERIAL NOT NULL,
    "name" TEXT NOT NULL,
    "kind" TEXT NOT NULL,
    "shape" TEXT NOT NULL,
    "pubKey" TEXT NOT NULL,
    "syncCoeff" DOUBLE PRECISION NOT NULL,
    "memoryCoeff" DOUBLE PRECISION NOT NULL,
    "computeCoeff" DOUBLE PRECISION NOT NULL,
    "residueCoeff" DOUBLE PRECISION NOT NULL,
    "routingCoeff" DOUBLE PRECISION NOT NULL,
    "bindingFloor" DOUBLE PRECISION NOT NULL DEFAULT 0.25,
    "bindingDecay" DOUBLE PRECISION NOT NULL DEFAULT 0.05,
    "epoch" INTEGER NOT NULL DEFAULT 0,
    "episodicHead" TEXT,
    "masterSecret" TEXT NOT NULL,
    "lastActiveEpoch" INTEGER NOT NULL DEFAULT 0,
    "chainStatus" TEXT NOT NULL DEFAULT 'pending',
    "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "Stack_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "Sleeve" (
    "id" TEXT NOT NULL,
    "stackId" TEXT NOT NULL,
    "embodimentType" TEXT NOT NULL,
    "seq" SERIAL NOT NULL,
    "shape" TEXT NOT NULL,
    "alive" BOOLEAN NOT NULL DEFAULT true,
    "frozen" BOOLEAN NOT NULL DEFAULT false,
    "driftMilli" INTEGER NOT NULL DEFAULT 0,
    "flagged" BOOLEAN NOT NULL DEFAULT false,
    "syncEpoch" INTEGER NOT NULL DEFAULT 0,
    "lastSync" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "hostname" TEXT,
    "tickRate" INTEGER NOT NULL,
    "identityPort" INTEGER,
    "lastTickAt" TIMESTAMPTZ(3),
    "decommissionedAt" TIMESTAMPTZ(3),
    "decommissionWhy" TEXT,
    "chainStatus" TEXT NOT NULL DEFAULT 'pending',
    "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "Sleeve_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "KeyLease" (
    "sleeveId" TEXT NOT NULL,
    "stackId" TEXT NOT NULL,
    "active" BOOLEAN NOT NULL DEFAULT true,
    "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "endedAt" TIMESTAMPTZ(3),

    CONSTRAINT "KeyLease_pkey" PRIMARY KEY ("sleeveId")
);

-- CreateTable
CREATE TABLE "MemoryNode" (
    "cid" TEXT NOT NULL,
    "stackId" TEXT NOT NULL,
    "epoch" INTEGER NOT NULL,
    "links" TEXT[],
    "kind" TEXT NOT NULL DEFAULT 'episodic',
    "pinned" BOOLEAN NOT NULL DEFAULT false,
    "sleeveId" TEXT,
    "branchId" TEXT,
    "size" INTEGER NOT NULL,
    "writeSeq" BIGSERIAL NOT NULL,
    "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "MemoryNode_pkey" PRIMARY KEY ("cid")
);

-- CreateTable
CREATE TABLE "MemoryBranch" (
    "id" TEXT NOT NULL,
    "stackId" TEXT NOT NULL,
    "sleeveId" TEXT NOT NULL,
    "baseCid" TEXT,
    "headCid" TEXT NOT NULL,
    "mergedCid" TEXT,
    "status" TEXT NOT NULL DEFAULT 'open',
    "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "mergedAt" TIMESTAMPTZ(3),

    CONSTRAINT "MemoryBranch_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "LedgerEntry" (
    "id" BIGSERIAL NOT NULL,
    "txId" TEXT NOT NULL,
    "account" TEXT NOT NULL,
    "token" TEXT NOT NULL,
    "milli" BIGINT NOT NULL,
    "reason" TEXT NOT NULL,
    "ref" TEXT,
    "epoch" INTEGER NOT NULL,
    "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "LedgerEntry_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "Balance" (
    "account" TEXT NOT NULL,
    "token" TEXT NOT NULL,
    "milli" BIGINT NOT NULL DEFAULT 0,

    CONSTRAINT "Balance_pkey" PRIMARY KEY ("account","token")
);

-- CreateTable
CREATE TABLE "Emission" (
    "id" TEXT NOT NULL,
    "stackId" TEXT NOT NULL,
    "epoch" INTEGER NOT NULL,
    "amounts" JSONB NOT NULL,
    "cpv" JSONB NOT NULL,
    "ebcFactor" DOUBLE PRECISION NOT NULL,
    "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "Emission_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "Residue" (
    "id" TEXT NOT NULL,
    "kind" TEXT NOT NULL,
    "trigger" TEXT NOT NULL,
    "bountyMilli" INTEGER NOT NULL,
    "status" TEXT NOT NULL,
    "stackId" TEXT,
    "sleeveId" TEXT,
    "epoch" INTEGER NOT NULL,
    "openedAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expiresAtEpoch" INTEGER NOT NULL,
    "claimant" TEXT,
    "evidence" JSONB NOT NULL,
    "proof" JSONB,
    "dedupeKey" TEXT NOT NULL,
    "resolvedAt" TIMESTAMPTZ(3),
    "chainStatus" TEXT NOT NULL DEFAULT 'pending',

    CONSTRAINT "Residue_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "Saga" (
    "id" TEXT NOT NULL,
    "stackId" TEXT NOT NULL,
    "fromSleeveId" TEXT NOT NULL,
    "toSleeveId" TEXT,
    "toKind" TEXT NOT NULL,
    "toTickRate" INTEGER,
    "status" TEXT NOT NULL,
    "step" INTEGER NOT NULL DEFAULT 0,
    "steps" JSONB NOT NULL,
    "transferRoot" TEXT,
    "shards" TEXT[],
    "routingMilli" INTEGER NOT NULL DEFAULT 0,
    "memoryMilli" INTEGER NOT NULL DEFAULT 0,
    "deltaEpoch" INTEGER NOT NULL DEFAULT 0,
    "error" TEXT,
    "shape" TEXT NOT NULL,
    "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "Saga_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "MedullaBlock" (
    "node" TEXT NOT NULL,
    "hash" TEXT NOT NULL,
    "height" INTEGER NOT NULL,
    "prevHash" TEXT NOT NULL,
    "epoch" INTEGER NOT NULL,
    "difficulty" INTEGER NOT NULL,
    "ts" INTEGER NOT NULL,
    "nonce" TEXT NOT NULL,
    "crossRoot" TEXT NOT NULL,
    "evmRoot" TEXT NOT NULL,
    "ipfsRoot" TEXT NOT NULL,
    "sleevesRoot" TEXT NOT NULL,
    "synapticFieldRoot" TEXT NOT NULL,
    "work" TEXT NOT NULL,
    "onMain" BOOLEAN NOT NULL DEFAULT false,

    CONSTRAINT "MedullaBlock_pkey" PRIMARY KEY ("node","hash")
);

-- CreateTable
CREATE TABLE "CoherenceSubmission" (
    "id" BIGSERIAL NOT NULL,
    "node" TEXT NOT NULL,
    "epoch" INTEGER NOT NULL,
    "operator" TEXT NOT NULL,
    "crossRoot" TEXT NOT NULL,
    "evmRoot" TEXT NOT NULL,
    "ipfsRoot" TEXT NOT NULL,
    "sleevesRoot" TEXT NOT NULL,
    "signature" TEXT,
    "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "CoherenceSubmission_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "EpochAnchor" (
    "epoch" INTEGER NOT NULL,
    "crossRoot" TEXT NOT NULL,
    "evmRoot" TEXT NOT NULL,
    "ipfsRoot" TEXT NOT NULL,
    "sleevesRoot" TEXT NOT NULL,
    "btcRoot" TEXT NOT NULL,
    "gaps" TEXT[],
    "blockHash" TEXT,
    "blockHeight" INTEGER,
    "chainStatus" TEXT NOT NULL DEFAULT 'pending',
    "txHash" TEXT,
    "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "EpochAnchor_pkey" PRIMARY KEY ("epoch")
);

-- CreateTable
CREATE TABLE "ChainOutbox" (
    "id" BIGSERIAL NOT NULL,
    "kind" TEXT NOT NULL,
    "ref" TEXT NOT NULL,
    "payload" JSONB NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'pending',
    "nonce" INTEGER,
    "txHash" TEXT,
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "lastError" TEXT,
    "epoch" INTEGER,
    "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "ChainOutbox_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "PassRun" (
    "pass" TEXT NOT NULL,
    "epoch" INTEGER NOT NULL,
    "runner" TEXT NOT NULL,
    "startedAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "finishedAt" TIMESTAMPTZ(3),
    "result" JSONB,

    CONSTRAINT "PassRun_pkey" PRIMARY KEY ("pass","epoch")
);

-- CreateTable
CREATE TABLE "EventOutbox" (
    "id" BIGSERIAL NOT NULL,
    "subject" TEXT NOT NULL,
    "msgId" TEXT NOT NULL,
    "data" JSONB NOT NULL,
    "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "EventOutbox_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "Stack_tokenId_key" ON "Stack"("tokenId");

-- CreateIndex
CREATE UNIQUE INDEX "Stack_pubKey_key" ON "Stack"("pubKey");

-- CreateIndex
CREATE UNIQUE INDEX "Sleeve_seq_key" ON "Sleeve"("seq");

-- CreateIndex
CREATE INDEX "Sleeve_stackId_idx" ON "Sleeve"("stackId");

-- CreateIndex
CREATE INDEX "Sleeve_alive_idx" ON "Sleeve"("alive");

-- CreateIndex
CREATE INDEX "KeyLease_stackId_idx" ON "KeyLease"("stackId");

-- CreateIndex
CREATE INDEX "MemoryNode_stackId_epoch_idx" ON "MemoryNode"("stackId", "epoch");

-- CreateIndex
CREATE INDEX "MemoryNode_epoch_writeSeq_idx" ON "MemoryNode"("epoch", "writeSeq");

-- CreateIndex
CREATE INDEX "MemoryNode_pinned_epoch_idx" ON "MemoryNode"("pinned", "epoch");

-- CreateIndex
CREATE INDEX "MemoryBranch_stackId_status_idx" ON "MemoryBranch"("stackId", "status");

-- CreateIndex
CREATE INDEX "LedgerEntry_account_token_idx" ON "LedgerEntry"("account", "token");

-- CreateIndex
CREATE INDEX "LedgerEntry_txId_idx" ON "LedgerEntry"("txId");

-- CreateIndex
CREATE INDEX "Emission_stackId_epoch_idx" ON "Emission"("stackId", "epoch");

-- CreateIndex
CREATE UNIQUE INDEX "Emission_stackId_epoch_key" ON "Emission"("stackId", "epoch");

-- CreateIndex
CREATE UNIQUE INDEX "Residue_dedupeKey_key" ON "Residue"("dedupeKey");

-- CreateIndex
CREATE INDEX "Residue_status_idx" ON "Residue"("status");

-- CreateIndex
CREATE INDEX "Residue_openedAt_idx" ON "Residue"("openedAt");

-- CreateIndex
CREATE INDEX "Saga_status_idx" ON "Saga"("status");

-- CreateIndex
CREATE INDEX "Saga_stackId_idx" ON "Saga"("stackId");

-- CreateIndex
CREATE INDEX "MedullaBlock_node_height_onMain_idx" ON "MedullaBlock"("node", "height", "onMain");

-- CreateIndex
CREATE INDEX "CoherenceSubmission_node_epoch_idx" ON "CoherenceSubmission"("node", "epoch");

-- CreateIndex
CREATE UNIQUE INDEX "CoherenceSubmission_node_epoch_operator_crossRoot_key" ON "CoherenceSubmission"("node", "epoch", "operator", "crossRoot");

-- CreateIndex
CREATE INDEX "ChainOutbox_status_id_idx" ON "ChainOutbox"("status", "id");

-- CreateIndex
CREATE INDEX "ChainOutbox_ref_idx" ON "ChainOutbox"("ref");

-- CreateIndex
CREATE UNIQUE INDEX "EventOutbox_msgId_key" ON "EventOutbox"("msgId");
