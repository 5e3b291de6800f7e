-- The three tables that grow with every write (a memory node, two ledger entries and a chain intent
-- a perceive) are analysed each time they grow by a tenth (autovacuum's threshold, and table care's
-- where no autovacuum runs: lib/db/table-care.ts). At the default statistics target (100) ANALYZE
-- samples 30,000 rows: 325, 135 and 200 ms of one PostgreSQL core at 32,000 nodes, every 10 s under
-- load, and the perceives meanwhile waited behind it (the seconds with the slowest calls). Every
-- query of these tables goes by key or by an index range, for which a 3,000-row sample's statistics
-- (target 10, PostgreSQL's default before 8.4) plan the same: 15, 12 and 17 ms.
ALTER TABLE "MemoryNode" ALTER COLUMN cid SET STATISTICS 10, ALTER COLUMN "stackId" SET STATISTICS 10, ALTER COLUMN epoch SET STATISTICS 10, ALTER COLUMN links SET STATISTICS 10, ALTER COLUMN kind SET STATISTICS 10, ALTER COLUMN pinned SET STATISTICS 10, ALTER COLUMN "sleeveId" SET STATISTICS 10, ALTER COLUMN "branchId" SET STATISTICS 10, ALTER COLUMN size SET STATISTICS 10, ALTER COLUMN "writeSeq" SET STATISTICS 10, ALTER COLUMN "createdAt" SET STATISTICS 10, ALTER COLUMN "chainPos" SET STATISTICS 10, ALTER COLUMN payload SET STATISTICS 10;
ALTER TABLE "LedgerEntry" ALTER COLUMN id SET STATISTICS 10, ALTER COLUMN "txId" SET STATISTICS 10, ALTER COLUMN account SET STATISTICS 10, ALTER COLUMN token SET STATISTICS 10, ALTER COLUMN milli SET STATISTICS 10, ALTER COLUMN reason SET STATISTICS 10, ALTER COLUMN ref SET STATISTICS 10, ALTER COLUMN epoch SET STATISTICS 10, ALTER COLUMN "createdAt" SET STATISTICS 10;
ALTER TABLE "ChainLedgerIntent" ALTER COLUMN id SET STATISTICS 10, ALTER COLUMN kind SET STATISTICS 10, ALTER COLUMN ref SET STATISTICS 10, ALTER COLUMN payload SET STATISTICS 10, ALTER COLUMN status SET STATISTICS 10, ALTER COLUMN epoch SET STATISTICS 10, ALTER COLUMN "settlementId" SET STATISTICS 10, ALTER COLUMN "lastError" SET STATISTICS 10, ALTER COLUMN "createdAt" SET STATISTICS 10;
