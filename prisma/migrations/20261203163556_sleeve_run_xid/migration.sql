-- What a sleeve runtime re-reads (docs/scale.md, "Sleeves across many runtimes"): each runtime
-- re-read every sleeve it held every 10 s (the safety net for a missed event), 5,000 rows a second
-- a runtime at 50,000 sleeves. The trigger stamps a change to how a runtime runs a sleeve with the
-- changing transaction's id (as "Sleeve_leafXid" does for the fold), and a runtime reads only the
-- rows stamped since the xmin of its last read's snapshot. Rows written before this migration have
-- none; a runtime starts from a full read of the sleeves it holds.
ALTER TABLE "Sleeve" ADD COLUMN     "runXid" BIGINT;

CREATE INDEX "Sleeve_runXid_idx" ON "Sleeve"("runXid");

CREATE FUNCTION "Sleeve_runXid"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW."runXid" := pg_current_xact_id()::text::bigint;
  RETURN NEW;
END
$$;

CREATE TRIGGER "Sleeve_runXid_update" BEFORE UPDATE ON "Sleeve" FOR EACH ROW
  WHEN (OLD.alive IS DISTINCT FROM NEW.alive OR OLD.frozen IS DISTINCT FROM NEW.frozen OR OLD."tickRate" IS DISTINCT FROM NEW."tickRate"
    OR OLD."embodimentType" IS DISTINCT FROM NEW."embodimentType" OR OLD.hostname IS DISTINCT FROM NEW.hostname)
  EXECUTE FUNCTION "Sleeve_runXid"();
