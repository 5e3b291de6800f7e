// GraphQL subscriptions (graphql-ws on /graphql). @apollo/gateway does not execute subscriptions,
// so the router does: its subscription schema is the supergraph's API schema extended with a
// Subscription type whose fields are fed from the bus, filtered by their arguments. Entity fields
// of a payload (stack, sleeve, residue, ...) are resolved by sending the client's selection
// through the gateway as a query, so every subgraph contributes as it does for queries.
//
// Resume: every event carries `cursor` (its bus sequence); passing `after: <cursor>` replays from
// the next event, without gaps. Slow clients: each subscription buffers at most MAX_QUEUE events;
// on overflow it ends with a SLOW_CONSUMER error and the client resumes with its last cursor.
// Closing a subscription closes its bus consumer.
import {
  buildASTSchema,
  extendSchema,
  printSchema,
  GraphQLError,
  GraphQLObjectType,
  parse,
  print,
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLResolveInfo,
  type GraphQLSchema,
  type SelectionSetNode,
} from 'graphql';
import type { ApolloServer } from '@apollo/server';
import type { Platform } from '../lib/platform.ts';
import type { Bus, Delivery } from '../lib/bus/port.ts';
import type { GqlContext } from '../lib/graphql.ts';
import { newContext } from '../lib/graphql.ts';
import { parseCursor } from './events.ts';
import { subscriptionsActive, subscriptionsStarted } from '../lib/metrics.ts';
import { watchEmissions, type EmissionWatchHandle } from '../subgraphs/economy/index.ts';

export const MAX_QUEUE = 1000;

export const subscriptionSdl = /* GraphQL */ `
  extend schema { subscription: Subscription }
  type EpochEvent { cursor: String! epoch: Int! height: Int! tip: String! }
  type BlockEvent { cursor: String! height: Int! blockHash: String! epoch: Int! block: Block }
  type ResidueEvent { cursor: String! residueId: ID! kind: String! status: String! residue: Residue }
  type PerceiveEvent { cursor: String! stackId: ID! sleeveId: ID! cid: String! epoch: Int! stack: Stack sleeve: Sleeve node: MemoryNode }
  type SleeveEvent { cursor: String! type: String! stackId: ID! sleeveId: ID! sleeve: Sleeve }
  type NeedlecastEvent { cursor: String! sagaId: ID! step: String! status: String! saga: Saga }
  type EmissionEvent { cursor: String! stackId: ID! epoch: Int! ebcFactor: Float stack: Stack }

  type Subscription {
    epochAdvanced(after: String): EpochEvent!
    blockMined(after: String): BlockEvent!
    residueOpened(after: String): ResidueEvent!
    residueChanged(id: ID, after: String): ResidueEvent!
    perceived(stackId: ID!, after: String): PerceiveEvent!
    sleeveChanged(stackId: ID!, after: String): SleeveEvent!
    needlecastProgress(sagaId: ID!, after: String): NeedlecastEvent!
    emission(stackId: ID!, after: String): EmissionEvent!
  }
`;

type Data = Record<string, unknown>;
const obj = (v: unknown): Data => (v && typeof v === 'object' ? (v as Data) : {});
const str = (v: unknown) => (typeof v === 'string' ? v : v === undefined || v === null ? '' : String(v));
const num = (v: unknown) => (typeof v === 'number' ? v : Number(v) || 0);

/** Each subscription field: its bus subjects, an argument filter, and the payload it yields. */
interface Feed {
  subjects: (args: Data) => string[];
  filter?: (d: Delivery, args: Data) => boolean;
  map: (d: Delivery) => Data;
  /** Tells the producer someone listens, for events made only for listeners (emission). */
  watch?: (p: Platform, args: Data) => Promise<EmissionWatchHandle>;
}

const residueOf = (d: Delivery) => obj(d.data.residue ?? d.data);

const feeds: Record<string, Feed> = {
  epochAdvanced: {
    subjects: () => ['cog.epoch.advanced'],
    map: (d) => ({ epoch: num(d.data.epoch), height: num(d.data.height), tip: str(d.data.tip) }),
  },
  blockMined: {
    subjects: () => ['cog.block.mined'],
    map: (d) => {
      const b = obj(d.data.block ?? d.data);
      return { height: num(b.height), blockHash: str(b.blockHash ?? b.hash), epoch: num(b.epoch) };
    },
  },
  residueOpened: {
    subjects: () => ['cog.residue.opened'],
    map: (d) => ({ residueId: str(residueOf(d).id), kind: str(residueOf(d).kind), status: str(residueOf(d).status) }),
  },
  residueChanged: {
    subjects: () => ['cog.residue.>'],
    filter: (d, a) => !a.id || residueOf(d).id === a.id,
    map: (d) => ({ residueId: str(residueOf(d).id), kind: str(residueOf(d).kind), status: str(residueOf(d).status) }),
  },
  perceived: {
    subjects: (a) => [`cog.perceive.${a.stackId}`],
    map: (d) => ({ stackId: str(d.data.stackId), sleeveId: str(d.data.sleeveId), cid: str(d.data.cid), epoch: num(d.data.epoch) }),
  },
  sleeveChanged: {
    subjects: (a) => [`cog.sleeve.*.${a.stackId}`],
    map: (d) => {
      const s = obj(d.data.sleeve);
      return { type: str(d.data.type), stackId: str(d.data.stackId ?? s.stackId), sleeveId: str(d.data.sleeveId ?? s.id) };
    },
  },
  needlecastProgress: {
    subjects: () => ['cog.needlecast.step', 'cog.needlecast.step.>'],
    filter: (d, a) => d.data.sagaId === a.sagaId,
    map: (d) => ({ sagaId: str(d.data.sagaId), step: str(d.data.step), status: str(d.data.status) }),
  },
  emission: {
    subjects: (a) => [`cog.treasury.emitted.${a.stackId}`],
    watch: (p, a) => watchEmissions(p, str(a.stackId)),
    map: (d) => ({ stackId: str(d.data.stackId), epoch: num(d.data.epoch), ebcFactor: typeof d.data.ebcFactor === 'number' ? d.data.ebcFactor : null }),
  },
};

/** An async iterator over bus deliveries, bounded, that closes its consumer when the client stops. */
export function busIterator(bus: Bus, feed: Feed, args: Data, name: string): AsyncIterableIterator<Data> {
  const queue: Data[] = [];
  let wake: (() => void) | null = null;
  let failure: GraphQLError | null = null;
  let done = false;
  const after = parseCursor(args.after) ?? undefined;
  subscriptionsActive.inc({ subscription: name });
  subscriptionsStarted.inc({ subscription: name });
  const subP = bus.subscribe({ subjects: feed.subjects(args), startSeq: after !== undefined ? after + 1 : undefined }, (d) => {
    if (done || (feed.filter && !feed.filter(d, args))) return;
    if (queue.length >= MAX_QUEUE) {
      failure = new GraphQLError('Subscriber too slow: resume with `after` set to the last cursor received', { extensions: { code: 'SLOW_CONSUMER' } });
      queue.length = 0;
    } else {
      queue.push({ cursor: String(d.seq), ...feed.map(d) });
    }
    wake?.();
  });
  const finish = async () => {
    if (!done) subscriptionsActive.dec({ subscription: name });
    done = true;
    wake?.();
    await (await subP).close();
  };
  return {
    [Symbol.asyncIterator]() {
      return this;
    },
    async next(): Promise<IteratorResult<Data>> {
      await subP;
      for (;;) {
        if (failure) {
          const f = failure;
          await finish();
          throw f;
        }
        if (queue.length) return { value: queue.shift()!, done: false };
        if (done) return { value: undefined, done: true };
        await new Promise<void>((r) => (wake = r));
        wake = null;
      }
    },
    async return(): Promise<IteratorResult<Data>> {
      await finish();
      return { value: undefined, done: true };
    },
    async throw(e?: unknown): Promise<IteratorResult<Data>> {
      await finish();
      throw e;
    },
  };
}

/** The iterator, with the watch held while it runs and closed when it ends, however it ends. */
function watchedIterator(it: AsyncIterableIterator<Data>, watch: Promise<EmissionWatchHandle>): AsyncIterableIterator<Data> {
  const end = () =>
    watch.then(
      (w) => w.close(),
      () => {},
    );
  return {
    [Symbol.asyncIterator]() {
      return this;
    },
    async next() {
      await watch;
      try {
        const r = await it.next();
        if (r.done) await end();
        return r;
      } catch (e) {
        await end();
        throw e;
      }
    },
    async return() {
      await end();
      return it.return ? it.return() : { value: undefined, done: true };
    },
    async throw(e?: unknown) {
      await end();
      return it.throw ? it.throw(e) : Promise.reject(e);
    },
  };
}

/** Prints the selection under `info`'s field plus the fragments it uses, as a gateway query. */
function entityQuery(info: GraphQLResolveInfo, rootField: string, argName: string, argType: string): DocumentNode | null {
  const sel: SelectionSetNode | undefined = (info.fieldNodes[0] as FieldNode).selectionSet;
  if (!sel) return null;
  const frags = Object.values(info.fragments) as FragmentDefinitionNode[];
  const text = `query SubscriptionPayload($key: ${argType}) { entity: ${rootField}(${argName}: $key) ${print(sel)} } ${frags.map((f) => print(f)).join('\n')}`;
  return parse(text);
}

function viaGateway(gateway: () => ApolloServer<GqlContext>, p: Platform, rootField: string, argName: string, argType: string, keyOf: (src: Data) => unknown) {
  return async (src: Data, _args: unknown, _ctx: unknown, info: GraphQLResolveInfo) => {
    const key = keyOf(src);
    if (key === undefined || key === null || key === '') return null;
    const doc = entityQuery(info, rootField, argName, argType);
    if (!doc) return null;
    const res = await gateway().executeOperation({ query: print(doc), variables: { key } }, { contextValue: newContext(p) });
    if (res.body.kind !== 'single') return null;
    const r = res.body.singleResult;
    if (r.errors?.length) throw new GraphQLError(r.errors[0].message, { extensions: r.errors[0].extensions });
    return (r.data as Data | undefined)?.entity ?? null;
  };
}

/**
 * The router's whole schema, built once: the gateway's API schema (queries, mutations) with the
 * Subscription type. graphql-ws executes subscriptions on it, and introspection over HTTP answers
 * from it, so tools (GraphiQL, codegen) see the subscriptions the router serves.
 */
export function routerSchema(p: Platform, server: ApolloServer<GqlContext>, apiSchema: () => GraphQLSchema): () => GraphQLSchema {
  let schema: GraphQLSchema | undefined;
  return () => (schema ??= buildSubscriptionSchema(printSchema(apiSchema()), p, () => server));
}

/** The router's subscription schema over the supergraph's API schema. */
export function buildSubscriptionSchema(apiSdl: string, p: Platform, gateway: () => ApolloServer<GqlContext>): GraphQLSchema {
  const base = buildASTSchema(parse(apiSdl), { assumeValidSDL: true });
  const schema = extendSchema(base, parse(subscriptionSdl), { assumeValidSDL: true });
  const subscription: Record<string, { subscribe: (src: unknown, args: Data) => AsyncIterableIterator<Data>; resolve: (payload: Data) => Data }> = {};
  for (const [name, feed] of Object.entries(feeds)) {
    subscription[name] = {
      subscribe: (_src, args) => {
        // A cursor is a bus sequence: anything else would silently start live, past what the client missed.
        if (parseCursor(args.after) === null) {
          throw new GraphQLError('after must be a cursor received from a subscription (a string of digits)', { extensions: { code: 'BAD_USER_INPUT' } });
        }
        const it = busIterator(p.bus, feed, args, name);
        return feed.watch ? watchedIterator(it, feed.watch(p, args)) : it;
      },
      resolve: (payload) => payload,
    };
  }
  return makeExecutableSchemaLike(schema, {
    Subscription: subscription,
    BlockEvent: { block: viaGateway(gateway, p, 'block', 'height', 'Int!', (s) => s.height) },
    ResidueEvent: { residue: viaGateway(gateway, p, 'residue', 'id', 'ID!', (s) => s.residueId) },
    PerceiveEvent: {
      stack: viaGateway(gateway, p, 'stack', 'id', 'ID!', (s) => s.stackId),
      sleeve: viaGateway(gateway, p, 'sleeve', 'id', 'ID!', (s) => s.sleeveId),
      node: viaGateway(gateway, p, 'memoryNode', 'cid', 'ID!', (s) => s.cid),
    },
    SleeveEvent: { sleeve: viaGateway(gateway, p, 'sleeve', 'id', 'ID!', (s) => s.sleeveId) },
    NeedlecastEvent: { saga: viaGateway(gateway, p, 'saga', 'id', 'ID!', (s) => s.sagaId) },
    EmissionEvent: { stack: viaGateway(gateway, p, 'stack', 'id', 'ID!', (s) => s.stackId) },
  });
}

type ResolverMap = Record<
  string,
  Record<string, ((...a: never[]) => unknown) | { subscribe: (...a: never[]) => unknown; resolve: (...a: never[]) => unknown }>
>;

/** Attaches resolvers to an SDL-built schema's fields (in place). */
function makeExecutableSchemaLike(schema: GraphQLSchema, resolvers: ResolverMap): GraphQLSchema {
  for (const [typeName, fields] of Object.entries(resolvers)) {
    const type = schema.getType(typeName);
    if (!(type instanceof GraphQLObjectType)) throw new Error(`no object type ${typeName}`);
    const defs = type.getFields();
    for (const [fieldName, r] of Object.entries(fields)) {
      const f = defs[fieldName];
      if (!f) throw new Error(`no field ${typeName}.${fieldName}`);
      if (typeof r === 'function') f.resolve = r as never;
      else {
        f.subscribe = r.subscribe as never;
        f.resolve = r.resolve as never;
      }
    }
  }
  return schema;
}
