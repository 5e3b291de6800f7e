-- Index entries every memory write no longer pays for (issue 13): a perceive inserts a memory node
-- and two ledger entries, and each index on them is an entry more in the write's statement (index
-- inserts were a fifth of PostgreSQL's CPU under the perceive load).
--
-- The pinned nodes by write order, instead of ("pinned", "epoch") over every node: its readers are
-- the pinned ones only (the peers' pull of pinned payloads in write order, the count of pinned
-- nodes); the retention pass has its own partial index of the unpinned (MemoryNode_unpinned_epoch_idx).
DROP INDEX "MemoryNode_pinned_epoch_idx";
CREATE INDEX "MemoryNode_pinned_writeSeq_idx" ON "MemoryNode"("writeSeq") WHERE pinned;
-- A transfer is looked up by its txId only where its id is made to be found again: an operator's
-- bond and slashes (economy/slash.ts, made once each). The two entries of every memory write (and
-- of every other transfer, whose txId is a fresh UUID) are not in it.
DROP INDEX "LedgerEntry_txId_idx";
CREATE INDEX "LedgerEntry_bond_slash_txId_idx" ON "LedgerEntry"("txId") WHERE reason IN ('bond', 'slash');
-- An event row (a batch of writes' events, in one row) is deleted by the next write; kept inline up
-- to a page, it is not compressed first (pglz on every batch row over 2 kB).
ALTER TABLE "EventOutbox" SET (toast_tuple_target = 8160);
