-- AlterTable
ALTER TABLE "Sleeve" ADD COLUMN     "finalTokens" JSONB,
ADD COLUMN     "seenHead" TEXT;

-- AlterTable
ALTER TABLE "Stack" ADD COLUMN     "headEpoch" INTEGER,
ADD COLUMN     "headSleeveId" TEXT;
