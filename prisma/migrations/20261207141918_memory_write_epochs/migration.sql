-- CreateTable
CREATE TABLE "MemoryWriteEpoch" (
    "stackId" TEXT NOT NULL,
    "epoch" INTEGER NOT NULL,

    CONSTRAINT "MemoryWriteEpoch_pkey" PRIMARY KEY ("stackId","epoch")
);

-- A stack's write epochs (docs/decisions.md, "A stack's write epochs are a table of their own"):
-- the platform's node inserts add theirs in the same statement (store.ts indexNodesPart, putNode);
-- a delete (the prune) takes an epoch out when its last node went, in a statement-level trigger,
-- which sees the statement's own deletions (a CTE beside the delete would not).
CREATE FUNCTION "MemoryNode_writeEpochsRemoved"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM "MemoryWriteEpoch" w
    USING (SELECT DISTINCT "stackId", epoch FROM removed) r
    WHERE w."stackId" = r."stackId" AND w.epoch = r.epoch
      AND NOT EXISTS (SELECT 1 FROM "MemoryNode" m WHERE m."stackId" = r."stackId" AND m.epoch = r.epoch);
  RETURN NULL;
END
$$;

CREATE TRIGGER "MemoryNode_writeEpochsRemoved" AFTER DELETE ON "MemoryNode"
  REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION "MemoryNode_writeEpochsRemoved"();

-- The epochs of the nodes stored before this migration.
INSERT INTO "MemoryWriteEpoch" ("stackId", epoch) SELECT DISTINCT "stackId", epoch FROM "MemoryNode" ON CONFLICT DO NOTHING;
