-- Sleeve runtimes share the alive sleeves by weight (COG_SLEEVE_RUNTIME_WEIGHT; docs/scale.md,
-- "Sleeves across many runtimes"): a runtime that registered before this has weight 1, as all had.
-- AlterTable
ALTER TABLE "SleeveRuntimeBeat" ADD COLUMN     "weight" INTEGER NOT NULL DEFAULT 1;
