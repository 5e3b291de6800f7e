-- A tick writes no row (docs/decisions.md, "A tick writes nothing"): its fence is a read, and a
-- sleeve's cadence follows a phase of its id, so no runtime needs another's last tick. The column
-- was 40,000 row updates an epoch at 100,000 ticking sleeves (bench/scale.ts 1000000).
ALTER TABLE "SleeveLease" DROP COLUMN "lastTickAt";
