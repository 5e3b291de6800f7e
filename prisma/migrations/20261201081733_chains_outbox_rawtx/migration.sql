-- Idempotent: the concurrent chains_medulla migration may carry the same ChainOutbox columns.
ALTER TABLE "ChainOutbox" ADD COLUMN IF NOT EXISTS "blockNumber" INTEGER,
ADD COLUMN IF NOT EXISTS "rawTx" TEXT,
ADD COLUMN IF NOT EXISTS "sentAt" TIMESTAMPTZ(3);

CREATE INDEX IF NOT EXISTS "ChainOutbox_status_nonce_idx" ON "ChainOutbox"("status", "nonce");

CREATE INDEX IF NOT EXISTS "ChainOutbox_epoch_status_idx" ON "ChainOutbox"("epoch", "status");
