// The chains context's gauges at /metrics, over its own table (lib/metrics.ts reads them with the
// rest of the state, once per cache period).
import { registerStateGauge } from '../../lib/metrics.ts';

registerStateGauge({
  name: 'cog_chain_outbox_depth',
  help: 'Cortex transactions not yet confirmed, by status (pending, submitted, failed)',
  label: 'status',
  known: ['pending', 'submitted', 'failed'],
  sql: `SELECT status AS label, count(*)::float8 AS v FROM "ChainOutbox" WHERE status IN ('pending', 'submitted', 'failed') GROUP BY status`,
});
