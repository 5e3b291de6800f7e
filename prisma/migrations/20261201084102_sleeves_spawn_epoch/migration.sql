-- AlterTable
ALTER TABLE "Sleeve" ADD COLUMN     "spawnEpoch" INTEGER NOT NULL DEFAULT 0;
