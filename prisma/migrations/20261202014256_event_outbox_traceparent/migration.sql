-- AlterTable
ALTER TABLE "EventOutbox" ADD COLUMN     "traceparent" TEXT;
