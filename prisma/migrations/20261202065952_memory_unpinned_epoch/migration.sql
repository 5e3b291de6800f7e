-- Retention pruning (docs/scale.md): the unpinned nodes by epoch, so a pass takes its batch of the
-- oldest in index order (subgraphs/memory/hippocampus/store.ts, pruneBatchQuery). On ("pinned",
-- "epoch") the planner, taking pinned and epoch as independent while the old nodes that remain are
-- mostly pinned ones, chose a sequential scan of the table for the batch; pinned nodes, kept
-- forever, are not in this index at all.
CREATE INDEX "MemoryNode_unpinned_epoch_idx" ON "MemoryNode"(epoch) WHERE NOT pinned;
