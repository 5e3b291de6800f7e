-- The over-drift index on a band of the drift, not on the drift (docs/scale.md, "drift-checker"):
-- with "driftMilli" in an index, every perceive, remember and recall, each adding to its sleeve's
-- drift, was a non-HOT update that wrote a new entry into each of the Sleeve table's nine indexes
-- (105 WAL records for ten writes of one batch). "driftBand" is driftMilli's binary order of
-- magnitude (width_bucket over the powers of two: 0 below 1, else floor(log2) + 1), stored and
-- generated, and only it is indexed: a write's increment keeps every indexed value, so it is a HOT
-- update, except the few that take the drift into the next power of two. The readers ask for the
-- band of their threshold and above, then the drift itself (subgraphs/sleeves/sleeves.ts, bandOf).
-- Free space on each page keeps the new row version on its page (a HOT update needs room there);
-- adding a stored column rewrites the table, so the fill factor applies to every page at once.
DROP INDEX "Sleeve_alive_driftMilli_idx";

ALTER TABLE "Sleeve" SET (fillfactor = 90);

ALTER TABLE "Sleeve" ADD COLUMN "driftBand" SMALLINT GENERATED ALWAYS AS (width_bucket("driftMilli", '{1,2,4,8,16,32,64,128,256,512,1024,2048,4096,8192,16384,32768,65536,131072,262144,524288,1048576,2097152,4194304,8388608,16777216,33554432,67108864,134217728,268435456,536870912,1073741824}'::integer[])) STORED;

CREATE INDEX "Sleeve_alive_driftBand_idx" ON "Sleeve"("alive", "driftBand");
