// Saga records and the needlecast result shapes: the router's, and the gateway's Shape A and B.
import type { Saga as SagaRow } from '../../../generated/prisma/client.ts';

export type { SagaRow };

export interface StepRecord {
  name: string;
  alias: string | null;
  /** pending | done | failed | compensated */
  status: string;
  at: string | null;
  data: Record<string, unknown>;
}

export interface SagaView {
  ok: boolean;
  sagaId: string;
  status: string;
  stackId: string;
  from: string;
  to: string | null;
  toKind: string;
  /** Step names (name set 1), in order. */
  route: string[];
  routeHash: string | null;
  shards: string[];
  cost: { routing: number; memory: number };
  deltaEpoch: number;
  steps: StepRecord[];
  error: string | null;
  createdAt: string;
}

export function sagaView(row: SagaRow): SagaView {
  const steps = (row.steps ?? []) as unknown as StepRecord[];
  const anchor = steps.find((s) => s.name === 'anchor');
  return {
    ok: row.status === 'completed',
    sagaId: row.id,
    status: row.status,
    stackId: row.stackId,
    from: row.fromSleeveId,
    to: row.toSleeveId,
    toKind: row.toKind,
    route: steps.map((s) => s.name),
    routeHash: (anchor?.status === 'done' || anchor?.status === 'compensated' ? (anchor.data.routeHash as string) : null) ?? null,
    shards: row.shards,
    cost: { routing: row.routingMilli / 1000, memory: row.memoryMilli / 1000 },
    deltaEpoch: row.deltaEpoch,
    steps,
    error: row.error,
    createdAt: row.createdAt.toISOString(),
  };
}

/** Gateway Shape A: route is the route record's hash (the one on NeedlecastRouter), shards a count. */
export const shapeA = (v: SagaView) => ({ ok: v.ok, sagaId: v.sagaId, route: v.routeHash ?? '', shards: v.shards.length, status: v.status });

/** Gateway Shape B. */
export const shapeB = (v: SagaView) => ({
  saga: v.sagaId,
  status: v.status,
  from: v.from,
  to: v.to,
  cost: { routing: v.cost.routing },
  shardsTransferred: v.status === 'completed' ? v.shards.length : 0,
});
