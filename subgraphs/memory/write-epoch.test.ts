// Out of Medulla's process a write is stamped with the epoch Medulla reports, not a bus view that
// has not heard of the newest block yet; a Medulla that does not answer holds writes up only briefly.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { memoryTestApp, type MemoryTestApp } from '../../test/helpers/memory-app.ts';
import { followEpochs, type EpochInfo } from '../../lib/epoch.ts';
import { createStack } from '../stacks/stacks.ts';
import { spawnSleeve } from '../sleeves/sleeves.ts';
import { perceive } from '../../flows/memory.ts';

let t: MemoryTestApp;
let medulla: () => Promise<EpochInfo>;
const at = (n: number): EpochInfo => ({ epoch: n, height: n, tip: n.toString(16).padStart(64, '0') });

beforeAll(async () => {
  t = await memoryTestApp();
  medulla = async () => at(3);
  t.p.epochs = await followEpochs(t.p.bus, () => medulla()); // no bus event is ever published here
});
afterAll(async () => {
  await t?.p.epochs.close();
  await t?.close();
});

describe('the epoch a write is stamped with', () => {
  it("is Medulla's current epoch, and the follower's when Medulla is slow", async () => {
    expect(t.p.epochs.authoritative).toBe(false);
    const stack = await createStack(t.p, { name: 'w' });
    const sleeve = await spawnSleeve(t.p, { stackId: stack.id, kind: 'ai', shape: 'B' });
    expect((await perceive(t.p, { sleeveId: sleeve.id, text: 'at three' })).epoch).toBe(3);

    medulla = async () => at(9); // a block the bus has not announced here
    const r = await perceive(t.p, { sleeveId: sleeve.id, text: 'at nine' });
    expect(r).toMatchObject({ epoch: 9 });
    expect(r.cid.endsWith('@9')).toBe(true);

    medulla = () => new Promise<EpochInfo>(() => {}); // Medulla hung
    const t0 = Date.now();
    expect((await perceive(t.p, { sleeveId: sleeve.id, text: 'still nine' })).epoch).toBe(9);
    expect(Date.now() - t0).toBeLessThan(1500);
  });
});
