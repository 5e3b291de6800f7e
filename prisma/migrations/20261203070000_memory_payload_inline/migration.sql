-- AlterTable: a node's payload stored with its index row (docs/decisions.md, "Payloads in the index row").
ALTER TABLE "MemoryNode" ADD COLUMN     "payload" TEXT;
