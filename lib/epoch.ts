// The current epoch, as every context sees it. Medulla owns it (each mined block advances it by
// one) and publishes `cog.epoch.advanced`; everyone else follows that event, seeded from Medulla's
// `getinfo` at start. The same code runs embedded (in-process bus) and distributed (JetStream).
import type { Bus, Subscription } from './bus/port.ts';

export interface EpochInfo {
  epoch: number;
  height: number;
  tip: string;
}

export interface EpochSource {
  /**
   * True when Medulla runs in this process (set by the composition root): its blocks reach this
   * source before anyone can write against them, so current() is exact and writes need not ask.
   */
  authoritative: boolean;
  current(): number;
  info(): EpochInfo;
  /**
   * Takes an answer read straight from Medulla (a block just mined, a getinfo) when it is newer than
   * the last event: a client that mines and then reads sees its own block without waiting for the bus.
   */
  observe(info: EpochInfo): void;
  /**
   * Re-reads Medulla now (the seed) and takes its answer if newer; for a process asked about an epoch
   * ahead of its view, which means its bus events are late. Resolves to the current info either way.
   */
  refresh(): Promise<EpochInfo>;
  /** Called after each advance; returns an unsubscribe function. */
  onAdvance(cb: (info: EpochInfo) => void): () => void;
  close(): Promise<void>;
}

/** Follows Medulla through the bus; `seed` reads the chain's current info (getinfo), at once unless `seedNow` is false. */
export async function followEpochs(bus: Bus, seed: () => Promise<EpochInfo>, opts: { seedNow?: boolean } = {}): Promise<EpochSource> {
  let info: EpochInfo = { epoch: 0, height: 0, tip: '0'.repeat(64) };
  const listeners = new Set<(i: EpochInfo) => void>();
  let refreshing: Promise<EpochInfo> | null = null;
  const apply = (next: EpochInfo) => {
    if (next.height < info.height && next.epoch <= info.epoch) return;
    if (next.height === info.height && next.epoch === info.epoch && next.tip === info.tip) return;
    info = next;
    for (const l of listeners) {
      try {
        l(info);
      } catch {
        /* a listener's failure is its own */
      }
    }
  };
  const sub: Subscription = await bus.subscribe({ subjects: ['cog.epoch.advanced'] }, (d) => {
    const { epoch, height, tip } = d.data as Partial<EpochInfo>;
    if (typeof epoch === 'number' && typeof height === 'number' && typeof tip === 'string') apply({ epoch, height, tip });
  });
  if (opts.seedNow !== false) {
    try {
      apply(await seed());
    } catch {
      /* Medulla not reachable yet: the first advance event fills it in */
    }
  }
  return {
    authoritative: false,
    current: () => info.epoch,
    info: () => info,
    observe: apply,
    refresh() {
      // One read at a time: a burst of requests ahead of this view shares it.
      refreshing ??= seed()
        .then(apply, () => {
          /* Medulla not reachable: keep what the bus said */
        })
        .then(() => {
          refreshing = null;
          return info;
        });
      return refreshing;
    },
    onAdvance(cb) {
      listeners.add(cb);
      return () => listeners.delete(cb);
    },
    close: () => sub.close(),
  };
}
