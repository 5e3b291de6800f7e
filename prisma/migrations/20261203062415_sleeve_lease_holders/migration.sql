-- DropIndex
DROP INDEX "SleeveLease_expiresAt_idx";

-- DropIndex
DROP INDEX "SleeveLease_runtime_idx";

-- AlterTable
ALTER TABLE "SleeveLease" DROP COLUMN "expiresAt",
ADD COLUMN     "gen" INTEGER NOT NULL DEFAULT 0;

-- AlterTable
ALTER TABLE "SleeveRuntimeBeat" ADD COLUMN     "gen" SERIAL NOT NULL,
ADD COLUMN     "held" INTEGER NOT NULL DEFAULT 0;

-- CreateIndex
CREATE INDEX "SleeveLease_runtime_gen_idx" ON "SleeveLease"("runtime", "gen");

-- CreateTable
CREATE TABLE "SleeveLeaseEnd" (
    "runtime" TEXT NOT NULL,
    "sleeveId" TEXT NOT NULL,
    "gen" INTEGER NOT NULL,

    CONSTRAINT "SleeveLeaseEnd_pkey" PRIMARY KEY ("runtime","sleeveId")
);

-- A lease names its holder and the holder's generation; whether it is held is the holder's beat
-- (docs/scale.md, "Sleeves across many runtimes"). The leases and beats of before name runtimes of
-- the old scheme: every lease starts unheld, and the runtimes register again.
UPDATE "SleeveLease" SET runtime = '', gen = 0 WHERE runtime <> '';
DELETE FROM "SleeveRuntimeBeat";

-- The spawn trigger inserts the unheld lease without the dropped expiry; a decommission that deletes
-- a held lease tells its holder (SleeveLeaseEnd), which reads it at its next round instead of
-- reading every lease it holds.
CREATE OR REPLACE FUNCTION "Sleeve_lease"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.alive THEN
    INSERT INTO "SleeveLease" ("sleeveId") VALUES (NEW.id) ON CONFLICT DO NOTHING;
  ELSE
    WITH d AS (DELETE FROM "SleeveLease" WHERE "sleeveId" = NEW.id RETURNING runtime, gen)
    INSERT INTO "SleeveLeaseEnd" (runtime, "sleeveId", gen) SELECT d.runtime, NEW.id, d.gen FROM d WHERE d.runtime <> ''
      ON CONFLICT (runtime, "sleeveId") DO UPDATE SET gen = EXCLUDED.gen;
  END IF;
  RETURN NULL;
END
$$;
