// The chains context's gauges at /metrics, over its own table (lib/metrics.ts reads them with the
// rest of the state, once per cache period).
import { registerStateGauge } from '../../lib/metrics.ts';

registerStateGauge({
  name: 'cog_chain_outbox_depth',
  help: 'Cortex intents not yet confirmed, by status (pending, submitted, failed); a ledger row folded into a settlement counts with its settlement',
  label: 'status',
  known: ['pending', 'submitted', 'failed'],
  // The ledger rows on their partial indexes (pending, failed) and through the open settlements.
  sql: `SELECT label, sum(n)::float8 AS v FROM (
      SELECT status AS label, count(*) AS n FROM "ChainOutbox" WHERE status IN ('pending', 'submitted', 'failed') GROUP BY status
      UNION ALL SELECT 'pending', count(*) FROM "ChainLedgerIntent" WHERE status = 'pending'
      UNION ALL SELECT 'failed', count(*) FROM "ChainLedgerIntent" WHERE status = 'failed'
      UNION ALL SELECT s.status, count(*) FROM "ChainOutbox" s JOIN "ChainLedgerIntent" l ON l."settlementId" = s.id
        WHERE s.kind = 'settle' AND s.status IN ('pending', 'submitted', 'failed') GROUP BY s.status
    ) t GROUP BY label`,
});
