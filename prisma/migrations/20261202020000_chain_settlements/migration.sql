-- AlterTable
ALTER TABLE "ChainOutbox" ADD COLUMN     "settlementId" BIGINT;

-- CreateIndex
CREATE INDEX "ChainOutbox_settlementId_idx" ON "ChainOutbox"("settlementId");
