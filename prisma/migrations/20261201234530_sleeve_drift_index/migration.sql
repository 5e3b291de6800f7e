-- CreateIndex
CREATE INDEX "Sleeve_alive_driftMilli_idx" ON "Sleeve"("alive", "driftMilli");
