// Cortex throughput: platform transactions per second through the outbox (intent rows -> signed,
// stored, broadcast, confirmed by receipt) against raw ethers sends of the same calls, to the same
// anvil in the same run. Each side gets its own suite, so both mint the same fresh token ids.
//   npx tsx bench/outbox.ts [count] [blockTimeSeconds]
import { pathToFileURL } from 'node:url';
import { testPlatform } from '../test/helpers/platform.ts';
import { startTestChain } from '../test/helpers/test-chain.ts';
import { startSubmitter } from '../subgraphs/chains/cortex/submitter.ts';
import { enqueueChainTx } from '../subgraphs/chains/outbox.ts';

export interface OutboxBenchResult {
  count: number;
  blockTime: number;
  rawTps: number;
  outboxTps: number;
  /** outboxTps / rawTps */
  ratio: number;
  outboxBlocks: number;
  rawBlocks: number;
}

const CPV = [1000, 1000, 1000, 1000, 1000];
const stackId = (i: number) => `stack:human:${i}:${i.toString(16).padStart(12, '0')}`;

export async function runOutboxBench(opts: { count?: number; blockTime?: number } = {}): Promise<OutboxBenchResult> {
  const count = opts.count ?? 200;
  const blockTime = opts.blockTime ?? 1;
  const chain = await startTestChain({ blockTime });
  const p = await testPlatform();
  try {
    // Raw: one wallet, sequential nonces, all sent before waiting, then every receipt.
    const raw = await chain.freshSuite();
    const identity = raw.contract('StackIdentity');
    const fee = await chain.provider.getFeeData();
    const gasLimit = (await identity.mint.estimateGas(chain.operator.address, 1, CPV, stackId(1), '')) * 2n;
    let nonce = await chain.provider.getTransactionCount(chain.operator.address, 'pending');
    let t = performance.now();
    const sent = [];
    for (let i = 1; i <= count; i++) {
      sent.push(
        await identity.mint(chain.operator.address, i, CPV, stackId(i), '', {
          nonce: nonce++,
          gasLimit,
          maxFeePerGas: fee.maxFeePerGas,
          maxPriorityFeePerGas: fee.maxPriorityFeePerGas,
        }),
      );
    }
    const rawReceipts = await Promise.all(sent.map((s) => s.wait()));
    const rawSec = (performance.now() - t) / 1000;
    if (rawReceipts.some((r) => r?.status !== 1)) throw new Error('a raw send reverted');

    // Outbox: the same intents as rows (one DB transaction), drained by the submitter.
    const ob = await chain.freshSuite();
    await p.db.prisma.$transaction(async (tx) => {
      for (let i = 1; i <= count; i++)
        await enqueueChainTx(tx, { kind: 'mintIdentity', ref: stackId(i), payload: { stackId: stackId(i), tokenId: i, owner: null, cpv: [1, 1, 1, 1, 1] } });
    });
    t = performance.now();
    const submitter = startSubmitter(p.db.prisma, ob, p.log, { pollMs: 20 });
    await submitter.idle(600_000);
    const outboxSec = (performance.now() - t) / 1000;
    await submitter.close();
    const rows = await p.db.prisma.chainOutbox.findMany({ select: { status: true, blockNumber: true } });
    const bad = await p.db.prisma.chainOutbox.findFirst({ where: { status: { not: 'confirmed' } } });
    if (bad) throw new Error(`outbox row ${bad.id} ${bad.status}: ${bad.lastError}`);
    return {
      count,
      blockTime,
      rawTps: count / rawSec,
      outboxTps: count / outboxSec,
      ratio: count / outboxSec / (count / rawSec),
      rawBlocks: new Set(rawReceipts.map((r) => r!.blockNumber)).size,
      outboxBlocks: new Set(rows.map((r) => r.blockNumber)).size,
    };
  } finally {
    await p.cleanup();
    await chain.close();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const count = Number(process.argv[2] ?? 200);
  const blockTime = Number(process.argv[3] ?? 1);
  const r = await runOutboxBench({ count, blockTime });
  console.log(`cortex outbox vs raw ethers, ${r.count} StackIdentity.mint, ${r.blockTime} s blocks (Node ${process.version})`);
  console.log(`raw ethers : ${r.rawTps.toFixed(1)} tx/s over ${r.rawBlocks} blocks`);
  console.log(`outbox     : ${r.outboxTps.toFixed(1)} tx/s over ${r.outboxBlocks} blocks`);
  console.log(`outbox/raw : ${r.ratio.toFixed(2)}`);
}
