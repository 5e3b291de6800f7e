-- AlterTable
ALTER TABLE "EventOutbox" ADD COLUMN     "heldUntil" TIMESTAMPTZ(3);
