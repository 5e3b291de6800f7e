-- The memory-reconciler's batch of open branches, the oldest first (subgraphs/memory/memory.ts,
-- openBranches): merged branches stay on record, so without this index a pass read the whole table.
CREATE INDEX "MemoryBranch_open_created_idx" ON "MemoryBranch"("createdAt", id) WHERE status = 'open';
