-- AlterTable
ALTER TABLE "EpochAnchor" ADD COLUMN     "operator" TEXT,
ADD COLUMN     "signature" TEXT,
ADD COLUMN     "submitted" BOOLEAN NOT NULL DEFAULT false;

-- AlterTable
ALTER TABLE "MedullaBlock" ADD COLUMN     "coherenceEpoch" INTEGER,
ADD COLUMN     "tsMs" BIGINT NOT NULL;

-- CreateIndex
CREATE INDEX "CoherenceSubmission_epoch_operator_idx" ON "CoherenceSubmission"("epoch", "operator");
