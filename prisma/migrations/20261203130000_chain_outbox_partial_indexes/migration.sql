-- Reads of the Cortex outbox that grew with its history, now on partial indexes that hold only the
-- rows they look for.
-- The submitter's next nonce is one past the highest a row was signed with (only sent rows have a
-- nonce): it read the whole outbox every round.
CREATE INDEX "ChainOutbox_sent_nonce_idx" ON "ChainOutbox"(nonce) WHERE nonce IS NOT NULL;
-- The drift check folds the rows confirmed in the blocks it has not seen yet (cortex/reconcile.ts):
-- it read every confirmed row every minute.
CREATE INDEX "ChainOutbox_confirmed_block_idx" ON "ChainOutbox"("blockNumber", id) WHERE status = 'confirmed';
