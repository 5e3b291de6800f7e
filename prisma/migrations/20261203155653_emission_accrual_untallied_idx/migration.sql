-- The emitter's new stacks (untalliedQuery: not tallied, in stackId order) on a partial index that
-- holds only them. On ("tallied", "sinceEpoch") the planner, with statistics from before the
-- stacks were tallied, walked the primary key in stackId order through every tallied row: 0.7-1.7 s
-- an epoch at 1,000,000 stacks (bench/scale.ts), for none found.
DROP INDEX "EmissionAccrual_tallied_sinceEpoch_idx";

CREATE INDEX "EmissionAccrual_untallied_idx" ON "EmissionAccrual"("stackId") WHERE NOT tallied;
