-- AlterTable
ALTER TABLE "Sleeve" ADD COLUMN     "leafXid" BIGINT;

-- CreateIndex
CREATE INDEX "Sleeve_leafXid_idx" ON "Sleeve"("leafXid");

-- The incremental sleevesRoot (docs/scale.md, "Thalamus fold"): every write that changes a
-- sleeve's leaf (an insert, alive or embodimentType changed) stamps the row with its transaction's
-- id. A reader that remembers the xmin of the snapshot it last read at finds every change it has
-- not seen among the rows stamped at or above that xmin: a transaction its snapshot did not see
-- was running then (xid >= xmin) or started later (xid >= xmax). Rows from before this migration
-- have none; a reader starts from a full read of the alive sleeves. Sleeve ids never change and rows
-- are never deleted (a decommission keeps the row).
CREATE FUNCTION "Sleeve_leafXid"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW."leafXid" := pg_current_xact_id()::text::bigint;
  RETURN NEW;
END
$$;

CREATE TRIGGER "Sleeve_leafXid_insert" BEFORE INSERT ON "Sleeve" FOR EACH ROW EXECUTE FUNCTION "Sleeve_leafXid"();
CREATE TRIGGER "Sleeve_leafXid_update" BEFORE UPDATE ON "Sleeve" FOR EACH ROW
  WHEN (OLD.alive IS DISTINCT FROM NEW.alive OR OLD."embodimentType" IS DISTINCT FROM NEW."embodimentType")
  EXECUTE FUNCTION "Sleeve_leafXid"();
