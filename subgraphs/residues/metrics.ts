// The residues context's gauges at /metrics, over its own table (lib/metrics.ts reads them with the
// rest of the state, once per cache period).
import { registerStateGauge } from '../../lib/metrics.ts';

registerStateGauge({
  name: 'cog_residues_open',
  help: 'Open residues, by kind',
  label: 'kind',
  sql: `SELECT kind AS label, count(*)::float8 AS v FROM "Residue" WHERE status = 'open' GROUP BY kind`,
});
