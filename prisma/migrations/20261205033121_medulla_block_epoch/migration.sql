-- CreateIndex
CREATE INDEX "MedullaBlock_epoch_idx" ON "MedullaBlock"("epoch");
