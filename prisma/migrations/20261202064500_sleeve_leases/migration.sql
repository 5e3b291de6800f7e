-- CreateTable
CREATE TABLE "SleeveLease" (
    "sleeveId" TEXT NOT NULL,
    "runtime" TEXT NOT NULL DEFAULT '',
    "expiresAt" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "SleeveLease_pkey" PRIMARY KEY ("sleeveId")
);

-- CreateTable
CREATE TABLE "SleeveRuntimeBeat" (
    "id" TEXT NOT NULL,
    "port" INTEGER,
    "startedAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "beatAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expiresAt" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "SleeveRuntimeBeat_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "SleeveLease_runtime_idx" ON "SleeveLease"("runtime");

-- CreateIndex
CREATE INDEX "SleeveLease_expiresAt_idx" ON "SleeveLease"("expiresAt");

-- Every alive sleeve has a lease row (docs/scale.md, "Sleeves across many runtimes"): a runtime
-- finds the sleeves it may claim among the rows whose lease expired (the index on expiresAt), never
-- by comparing all alive sleeves against the leases. The rows come and go with the sleeve's life:
-- inserted unheld when a sleeve is inserted alive (or comes alive), deleted when it dies.
CREATE FUNCTION "Sleeve_lease"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.alive THEN
    INSERT INTO "SleeveLease" ("sleeveId", "expiresAt") VALUES (NEW.id, to_timestamp(0)) ON CONFLICT DO NOTHING;
  ELSE
    DELETE FROM "SleeveLease" WHERE "sleeveId" = NEW.id;
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER "Sleeve_lease_insert" AFTER INSERT ON "Sleeve" FOR EACH ROW WHEN (NEW.alive) EXECUTE FUNCTION "Sleeve_lease"();
CREATE TRIGGER "Sleeve_lease_update" AFTER UPDATE OF alive ON "Sleeve" FOR EACH ROW
  WHEN (OLD.alive IS DISTINCT FROM NEW.alive)
  EXECUTE FUNCTION "Sleeve_lease"();

-- The sleeves alive before this migration, unheld.
INSERT INTO "SleeveLease" ("sleeveId", "expiresAt") SELECT id, to_timestamp(0) FROM "Sleeve" WHERE alive;
