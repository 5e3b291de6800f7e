-- AlterTable
ALTER TABLE "EpochAnchor" ADD COLUMN     "evmRefold" JSONB;

-- AlterTable
ALTER TABLE "MedullaBlock" ADD COLUMN     "detachedAt" TIMESTAMPTZ(3);
