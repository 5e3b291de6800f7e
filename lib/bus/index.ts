// Chooses the bus adapter: JetStream when a NATS URL is configured, in-process otherwise. The
// NATS adapter is loaded only when chosen: an embedded start does not pay for it.
import type { Bus } from './port.ts';
import { MemoryBus, type MemoryBusOptions } from './memory.ts';
import type { HandlerErrorReporter } from './common.ts';

export type { Bus, BusEvent, Delivery, PublishInput, PublishResult, SubscribeOptions, Subscription } from './port.ts';
export { subjectMatches } from './port.ts';
export { MemoryBus, type MemoryBusOptions } from './memory.ts';
export type { NatsBusOptions } from './nats.ts';
export type { HandlerErrorReporter } from './common.ts';

export interface CreateBusOptions {
  natsUrl?: string;
  stream?: string;
  subjectPrefix?: string;
  onHandlerError?: HandlerErrorReporter;
  /** Only for the in-process bus. */
  memory?: Omit<MemoryBusOptions, 'onHandlerError'>;
}

export async function createBus(opts: CreateBusOptions = {}): Promise<Bus> {
  if (opts.natsUrl) {
    const { NatsBus } = await import('./nats.ts');
    return NatsBus.connect({
      servers: opts.natsUrl,
      stream: opts.stream,
      subjectPrefix: opts.subjectPrefix,
      onHandlerError: opts.onHandlerError,
    });
  }
  return new MemoryBus({ ...opts.memory, onHandlerError: opts.onHandlerError });
}
