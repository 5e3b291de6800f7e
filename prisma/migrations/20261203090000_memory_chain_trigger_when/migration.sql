-- The chain position trigger runs only for a row inserted without one: the platform's writes set
-- the positions of a whole run in their statement (store.ts indexNodesPart), from one index probe
-- per run, instead of a plpgsql lookup per row.
DROP TRIGGER "MemoryNode_chainPos" ON "MemoryNode";
CREATE TRIGGER "MemoryNode_chainPos" BEFORE INSERT ON "MemoryNode" FOR EACH ROW WHEN (NEW."chainPos" IS NULL) EXECUTE FUNCTION "MemoryNode_chainPos"();
