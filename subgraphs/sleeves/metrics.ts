// The sleeves context's gauges at /metrics, over its own table (lib/metrics.ts reads them with the
// rest of the state, once per cache period).
import { registerStateGauge } from '../../lib/metrics.ts';

registerStateGauge({
  name: 'cog_sagas',
  help: 'Needlecast sagas, by status',
  label: 'status',
  known: ['running', 'completed', 'compensating', 'compensated', 'failed'],
  sql: `SELECT status AS label, count(*)::float8 AS v FROM "Saga" GROUP BY status`,
});
