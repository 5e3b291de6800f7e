// Emission in closed form against its oracle, the per-epoch emitter (test/helpers/emission-oracle.ts):
// over random activity patterns (spends and memory writes), CPVs, bindings, claims in between and
// the emitter running before or after the epoch's activity, every claim, claimable read, issuance
// list and epoch total agrees with the sum of the per-epoch rounded amounts, to the milli-unit.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testPlatform, type TestPlatform } from './helpers/platform.ts';
import { perEpochEmission, type OracleEmission } from './helpers/emission-oracle.ts';
import { generateIdentity } from '../lib/crypto.ts';
import { createStack, markStackActive, setEpisodicHead } from '../subgraphs/stacks/index.ts';
import { claim, claimableOf, emitEpoch, issuance } from '../subgraphs/economy/treasury.ts';
import { burn, mint, poolAccount, toMilli } from '../subgraphs/economy/ledger.ts';
import { tailSql } from '../subgraphs/economy/accrual.ts';

let p: TestPlatform;
beforeAll(async () => {
  p = await testPlatform();
});
afterAll(async () => p.cleanup());

const TOKENS = ['compute', 'memory', 'sync', 'routing'] as const;
type Milli = Record<(typeof TOKENS)[number], bigint>;
const zero = (): Milli => ({ compute: 0n, memory: 0n, sync: 0n, routing: 0n });
const units = (m: Milli) => Object.fromEntries(TOKENS.map((t) => [t, Number(m[t]) / 1000]));

/** What the oracle knows of each stack: created epoch, unclaimed sum, every event. */
interface Known {
  created: number;
  unclaimed: Milli;
  events: Array<{ epoch: number; e: OracleEmission }>;
}
const known = new Map<string, Known>();

// Magnitudes a client sends (PostgreSQL refuses a product that underflows a double, 1e-300 x 1e-98).
const coeff = fc.oneof(fc.constant(1), fc.constant(0), fc.constant(2), fc.double({ min: 1e-6, max: 2, noNaN: true }));
const binding = fc.oneof(
  fc.constant({ floor: 0.25, decayRate: 0.05 }),
  fc.record({
    floor: fc.oneof(fc.constant(0), fc.constant(1), fc.double({ min: 1e-6, max: 1, noNaN: true })),
    decayRate: fc.oneof(fc.constant(0), fc.double({ min: 0.001, max: 0.6, noNaN: true })),
  }),
);
const stackArb = fc.record({
  cpv: fc.record({ computeCoeff: coeff, memoryCoeff: coeff, syncCoeff: coeff, routingCoeff: coeff, residueCoeff: coeff }),
  binding,
  bornAt: fc.nat({ max: 3 }),
});
const stepArb = fc.record({
  active: fc.array(fc.oneof(fc.constant('none'), fc.constant('none'), fc.constant('none'), fc.constant('spend'), fc.constant('write')), {
    minLength: 4,
    maxLength: 4,
  }),
  claims: fc.array(fc.boolean(), { minLength: 4, maxLength: 4 }),
  emitterAfter: fc.boolean(),
  look: fc.option(fc.integer({ min: 1, max: 100 }), { freq: 3 }),
});
const scenario = fc.record({ stacks: fc.array(stackArb, { minLength: 1, maxLength: 4 }), steps: fc.array(stepArb, { minLength: 4, maxLength: 30 }) });

async function expectIssuance(stackId: string, limit: number) {
  const k = known.get(stackId)!;
  const want = k.events
    .slice(-limit)
    .reverse()
    .map(({ epoch, e }) => ({ epoch, ebcFactor: e.ebcFactor, amounts: units(e) }));
  const got = (await issuance(p, stackId, limit)).map((x) => ({ epoch: x.epoch, ebcFactor: x.ebcFactor, amounts: x.amounts }));
  expect(got).toEqual(want);
}

async function expectClaimable(ids: string[]) {
  const got = await claimableOf(p.db.prisma, ids, p.epochs.current());
  for (const id of ids) expect(got.get(id), id).toEqual(units(known.get(id)!.unclaimed));
}

describe('closed-form emission = the per-epoch emitter', () => {
  it('agrees on claims, claimable, issuance and epoch totals over random histories', async () => {
    let epoch = 0;
    let lastTotals = -1;
    await fc.assert(
      fc.asyncProperty(scenario, async ({ stacks, steps }) => {
        const ids: string[] = [];
        for (let i = 0; i < steps.length; i++) {
          epoch++;
          p.setEpoch(epoch);
          for (const s of stacks.filter((x) => x.bornAt === i)) {
            const v = await createStack(p, { pubkey: generateIdentity().pubKey, cpv: s.cpv });
            await p.db.prisma.$transaction(async (tx) => {
              // Bindings are not client-settable: set them as a migration of the product would, in
              // the stack and in the economy's copy (the oracle reads the stack's).
              await tx.stack.update({ where: { id: v.id }, data: { bindingFloor: s.binding.floor, bindingDecay: s.binding.decayRate } });
              await tx.$executeRawUnsafe(
                `UPDATE "EmissionAccrual" s SET "bindingFloor" = $2, "bindingDecay" = $3 WHERE s."stackId" = $1`,
                v.id,
                s.binding.floor,
                s.binding.decayRate,
              );
              await tx.$executeRawUnsafe(`UPDATE "EmissionAccrual" s SET "floorEpoch" = s."lastActiveEpoch" + 1 + ${tailSql} WHERE s."stackId" = $1`, v.id);
              await mint(
                tx,
                poolAccount(v.id),
                TOKENS.map((t) => ({ token: t, milli: toMilli(1000) })),
                { reason: 'test', epoch, stackId: v.id },
              );
            });
            known.set(v.id, { created: epoch, unclaimed: zero(), events: [] });
            ids.push(v.id);
          }
          // The oracle: the per-epoch emitter as epoch `epoch` begins, over every stack there is.
          const all = [...known.entries()].filter(([, k]) => k.created < epoch).map(([id]) => id);
          const made = await perEpochEmission(p.db.prisma, epoch, all);
          for (const [id, e] of made) {
            const k = known.get(id)!;
            for (const t of TOKENS) k.unclaimed[t] += e[t];
            k.events.push({ epoch, e });
          }
          const step = steps[i]!;
          const totals = async () => {
            if ((await emitEpoch(p, epoch)).stacks === 0) return;
            const row = (await p.db.prisma.emissionEpoch.findUnique({ where: { epoch } }))!;
            expect(row.stacks).toBe(all.length);
            for (const t of TOKENS) expect(row[t], `total ${t} of epoch ${epoch}`).toBe([...made.values()].reduce((x, e) => x + e[t], 0n));
            lastTotals = epoch;
          };
          if (!step.emitterAfter) await totals();
          for (const [j, id] of ids.entries()) {
            const what = step.active[j % 4];
            if (what === 'spend') {
              // A spend as the sleeves context makes one: the stack is marked active, then the tokens burn.
              await p.db.prisma.$transaction(async (tx) => {
                await markStackActive(tx, id, epoch);
                await burn(tx, poolAccount(id), [{ token: 'compute', milli: 1n }], { reason: 'test', epoch, stackId: id });
              });
            }
            if (what === 'write') await p.db.prisma.$transaction((tx) => setEpisodicHead(tx, id, `cog://${'0'.repeat(64)}@${epoch}`, { epoch }));
            if (step.claims[j % 4]) {
              const got = await claim(p, id);
              expect(got.claimable, `claim of ${id} at ${epoch}`).toEqual(units(known.get(id)!.unclaimed));
              known.get(id)!.unclaimed = zero();
            }
          }
          if (step.emitterAfter) await totals();
          if (step.look) {
            await expectClaimable(ids);
            for (const id of ids) await expectIssuance(id, step.look);
          }
        }
        await expectClaimable([...known.keys()]);
        for (const id of ids) await expectIssuance(id, 100);
      }),
      { numRuns: 8, endOnFailure: true },
    );
    // Stacks of earlier runs idled on through later ones: long floors, windows past 100 epochs.
    for (const id of known.keys()) await expectIssuance(id, 100);
    expect(epoch).toBeGreaterThan(40);
    expect(lastTotals).toBeGreaterThan(0);
  }, 240_000);
});
