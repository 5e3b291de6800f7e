-- A sleeve's heartbeat moves from its Sleeve row (which every perceive and recall of the sleeve
-- updates: a batch of ticks held those rows, and the writes waited) to its lease row.
ALTER TABLE "SleeveLease" ADD COLUMN     "lastTickAt" TIMESTAMPTZ(3);

UPDATE "SleeveLease" l SET "lastTickAt" = s."lastTickAt" FROM "Sleeve" s WHERE s.id = l."sleeveId" AND s."lastTickAt" IS NOT NULL;

ALTER TABLE "Sleeve" DROP COLUMN "lastTickAt";
