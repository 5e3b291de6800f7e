// Fault: Cortex stopped under load (embedded mode, real PostgreSQL/NATS/Redis adapters). The anvil
// node is SIGSTOPped (it neither answers nor refuses): Medulla keeps mining, Thalamus keeps folding
// and submitting (its evm leaves are the confirmed outbox rows, so the outage is no gap), the Cortex service's supervision (subgraphs/chains/cortex/service.ts) ends the
// hung node and starts it again from its state file, and the chain outbox catches up; nothing
// acknowledged is lost.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { startCluster, call, type Cluster } from './helpers/cluster.ts';
import { expectNothingLost, expectRetryableOnly } from './helpers/faults.ts';
import { runCortexFault } from '../bench/load.ts';

let c: Cluster;

beforeAll(async () => {
  c = await startCluster({ mode: 'embedded', realAdapters: true, shift: 28000 });
  await c.waitHealthy(60_000);
}, 75_000);

afterAll(async () => {
  if (process.env.COG_FAULT_LOG) (await import('node:fs')).writeFileSync(process.env.COG_FAULT_LOG, c?.output() ?? '');
  await c?.stop();
}, 30_000);

describe('faults: Cortex outage', () => {
  it('keeps Medulla and Thalamus running, restarts the anvil node, and drains the outbox', async () => {
    const r = await runCortexFault(c, { loadMs: 28_000, concurrency: 2 });
    console.log(
      `${r.name}: acknowledged ${r.acknowledged}, recovered ${r.recovered}, lost ${r.lost}; client errors ${JSON.stringify(r.load.byStatus)}; ${r.notes.join('; ')}`,
    );
    expectNothingLost(r);
    expectRetryableOnly(r.load);
    // The other chains kept running: Medulla answered throughout and kept mining (how many blocks
    // fall inside the outage itself depends on the machine's load, so the count runs until the
    // outbox has drained), and Thalamus folded every epoch Medulla mined without Cortex.
    expect(r.medullaDown).toBe(0);
    expect(r.blocksSince).toBeGreaterThanOrEqual(2);
    expect(r.foldsDuring).toBeGreaterThanOrEqual(r.blocksDuring >= 2 ? 1 : 0);
    // Supervised: a new anvil, and everything owed to the chain reached it.
    expect(r.anvilAfter).toBeDefined();
    expect(r.anvilAfter).not.toBe(r.anvilBefore);
    expect(r.outboxLeft).toBe(0);
    expect(r.outboxRows).toBeGreaterThan(0);
    expect(c.output()).toMatch(/anvil restarted/);
    // The restart loses the blocks since anvil's last state write; the transactions in them are
    // sent again, and the ledger rows written meanwhile wait for them rather than fail against
    // the rewound balances (they did: hundreds of burns failed with InsufficientStackBalance).
    expect(c.output()).not.toMatch(/cortex: intents? failed/);
    // Healthy afterwards: Medulla still mines on demand (how fast it mines on its own depends on
    // the machine's load, so this asks for a block rather than waiting for one).
    const e0 = (await call('GET', `${c.gateway}/v1/epochs/current`)).body.epoch as number;
    const mined = await call('POST', `${c.gateway}/v1/mining/block`, undefined, 60_000);
    expect(mined.status).toBe(200);
    expect(mined.body.epoch).toBeGreaterThan(e0);
  }, 150_000);
});
