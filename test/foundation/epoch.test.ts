// The epoch follower: bus events and direct Medulla answers (observe) move it forward, never back,
// and a repeat of what it already holds does not notify its listeners again.
import { afterEach, describe, expect, it } from 'vitest';
import { createBus } from '../../lib/bus/index.ts';
import { followEpochs, type EpochInfo } from '../../lib/epoch.ts';
import type { Bus } from '../../lib/bus/port.ts';

const tip = (n: number) => n.toString(16).padStart(64, '0');
const at = (n: number): EpochInfo => ({ epoch: n, height: n, tip: tip(n) });

describe('followEpochs', () => {
  let bus: Bus;
  afterEach(async () => bus?.close());

  it('is seeded from Medulla, follows the bus, and takes an observed block before its event arrives', async () => {
    bus = await createBus({});
    const epochs = await followEpochs(bus, async () => at(4));
    expect(epochs.current()).toBe(4);
    const seen: number[] = [];
    epochs.onAdvance((i) => seen.push(i.epoch));

    epochs.observe(at(5));
    expect(epochs.current()).toBe(5);
    expect(epochs.info()).toEqual(at(5));

    // The bus event for the same block changes nothing and is not announced twice.
    await bus.publish('cog.epoch.advanced', { type: 'epoch.advanced', ts: Date.now(), ...at(5) });
    await bus.publish('cog.epoch.advanced', { type: 'epoch.advanced', ts: Date.now(), ...at(6) });
    await expect.poll(() => epochs.current()).toBe(6);
    expect(seen).toEqual([5, 6]);

    // An older answer (a slow getinfo, a late event) does not move it back.
    epochs.observe(at(3));
    await bus.publish('cog.epoch.advanced', { type: 'epoch.advanced', ts: Date.now(), ...at(2) });
    await new Promise((r) => setTimeout(r, 50));
    expect(epochs.current()).toBe(6);
    expect(seen).toEqual([5, 6]);
    await epochs.close();
  });

  it('starts at 0 when Medulla cannot be read and fills in from the first answer', async () => {
    bus = await createBus({});
    const epochs = await followEpochs(bus, async () => {
      throw new Error('connection refused');
    });
    expect(epochs.current()).toBe(0);
    epochs.observe(at(9));
    expect(epochs.info()).toEqual(at(9));
    await epochs.close();
  });

  it('with seedNow false (Medulla in this process, started after it), asks nothing until a refresh; the bus fills it in', async () => {
    bus = await createBus({});
    let reads = 0;
    const epochs = await followEpochs(
      bus,
      async () => {
        reads++;
        return at(7);
      },
      { seedNow: false },
    );
    expect(reads).toBe(0);
    expect(epochs.current()).toBe(0);
    // Medulla's start announces its tip.
    await bus.publish('cog.epoch.advanced', { type: 'epoch.advanced', ts: Date.now(), ...at(3) });
    await expect.poll(() => epochs.current()).toBe(3);
    expect(reads).toBe(0);
    expect(await epochs.refresh()).toEqual(at(7));
    expect(reads).toBe(1);
    await epochs.close();
  });

  it('refresh re-reads Medulla once for a burst of callers, and keeps its view when Medulla is down', async () => {
    bus = await createBus({});
    let medulla: EpochInfo | Error = at(1);
    let reads = 0;
    const epochs = await followEpochs(bus, async () => {
      reads++;
      await new Promise((r) => setTimeout(r, 20));
      if (medulla instanceof Error) throw medulla;
      return medulla;
    });
    medulla = at(7);
    const answers = await Promise.all([epochs.refresh(), epochs.refresh(), epochs.refresh()]);
    expect(answers.map((a) => a.epoch)).toEqual([7, 7, 7]);
    expect(reads).toBe(2); // the seed, then one refresh
    medulla = new Error('connection refused');
    expect((await epochs.refresh()).epoch).toBe(7);
    await epochs.close();
  });
});
