-- AlterTable
ALTER TABLE "MemoryNode" ADD COLUMN "chainPos" INTEGER;

-- CreateIndex
CREATE INDEX "MemoryNode_stackId_chainPos_idx" ON "MemoryNode"("stackId", "chainPos");

-- The stored chain (docs/decisions.md, "Recall: the stored chain"): a node's position on its
-- stack's chain, set on insert whoever inserts it (perceive, remember, a Hippocampus PUT from
-- outside, a batch of several rows in one statement: a row-level BEFORE trigger sees the rows the
-- same statement inserted before it). 1 without links; the link's position + 1 when the node has
-- exactly one link, to a node of the same stack that has a position; NULL otherwise (a merge of
-- several links, an unknown or foreign link), and a walk from such a head follows the links.
-- Nodes stored before this migration have no position (their walks follow the links).
CREATE FUNCTION "MemoryNode_chainPos"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF cardinality(NEW.links) = 0 THEN
    NEW."chainPos" := 1;
  ELSIF cardinality(NEW.links) = 1 THEN
    NEW."chainPos" := (SELECT p."chainPos" + 1 FROM "MemoryNode" p WHERE p.cid = NEW.links[1] AND p."stackId" = NEW."stackId");
  ELSE
    NEW."chainPos" := NULL;
  END IF;
  RETURN NEW;
END
$$;

CREATE TRIGGER "MemoryNode_chainPos" BEFORE INSERT ON "MemoryNode" FOR EACH ROW EXECUTE FUNCTION "MemoryNode_chainPos"();
