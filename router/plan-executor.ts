// The router's executor of query plans over in-process subgraphs. @apollo/gateway plans a query
// once (its plan cache) but then, on every request, rebuilds the operation it shapes the answer
// with (operationFromDocument over the API schema), records trace nodes and spans nobody reads,
// and shapes the merged subgraph answers through a generic walk that allocates a result object for
// every value it visits (resultShaping.ts: a quarter of a request's allocations, measured). Here a
// query whose plan this executor can run (sequences, parallels, flattens, fetches, conditions; every
// subgraph in the process) is, from its second request on, run from a compiled form: the plan as
// @apollo/gateway made it, and the operation's shape compiled once into a tree the answer is copied
// through. The semantics are @apollo/gateway 2.14's (executeQueryPlan.ts, resultShaping.ts), kept
// step by step: the same fetches with the same variables and representations, the same merging,
// the same null bubbling and error paths and messages. Queries and mutations alike; everything else
// (a subscription, a query that selects introspection fields, a plan with @defer, a request asking
// for its plan or for traces, the first request of an operation) runs on @apollo/gateway's own
// executor.
import { createHash } from 'node:crypto';
import { GraphQLError, Kind, TypeNameMetaFieldDef, type DocumentNode, type GraphQLSchema, type OperationDefinitionNode } from 'graphql';
import { getVariableValues } from 'graphql/execution/values.js';
import type { GraphQLDataSource } from '@apollo/gateway';
import type { GatewayExecutor, GatewayGraphQLRequestContext, GatewayInterface } from '@apollo/server-gateway-interface';
import {
  ERRORS,
  errorCodeDef,
  isCompositeType,
  isListType,
  isNonNullType,
  isObjectType,
  isSubtype,
  isValidLeafValue,
  operationFromDocument,
  typenameFieldName,
  type CompositeType,
  type EnumType,
  type ScalarType,
  type Operation,
  type Schema,
  type SelectionSet,
  type Type,
} from '@apollo/federation-internals';
import {
  evaluateCondition,
  getResponseName,
  type FetchNode,
  type PlanNode,
  type QueryPlan,
  type QueryPlanSelectionNode,
  type SubscriptionNode,
} from '@apollo/query-planner';
import { commonJsExports } from '../lib/commonjs.ts';
import { deferUnusedGatewayDeps } from './deferred-deps.ts';
// @apollo/gateway 2.14.0 (pinned) has no exports map: its own helpers, so the fetches behave as its
// own do. Loaded when the first executor is made, not with this module: executeQueryPlan.js loads
// the gateway's OpenTelemetry module, and with it the packages router/deferred-deps.ts defers; a
// static import here loaded them before the stand-ins were in place (every start paid ~350 ms of
// module loading for Apollo's usage reporting, which is off). Imported, not required, so the
// precompiled platform (bin/bundle.mjs) bundles them with the rest of the gateway: one graphql.
type DataRewrites = typeof import('@apollo/gateway/dist/dataRewrites.js');
let applyRewrites: DataRewrites['applyRewrites'];
let isObjectOfType: DataRewrites['isObjectOfType'];
let deepMerge: typeof import('@apollo/gateway/dist/utilities/deepMerge.js')['deepMerge'];
let generateHydratedPaths: typeof import('@apollo/gateway/dist/executeQueryPlan.js')['generateHydratedPaths'];
let helpersLoaded: Promise<void> | undefined;
function loadGatewayHelpers(): Promise<void> {
  helpersLoaded ??= (async () => {
    deferUnusedGatewayDeps();
    const [rewrites, merge, execute] = await Promise.all([
      import('@apollo/gateway/dist/dataRewrites.js'),
      import('@apollo/gateway/dist/utilities/deepMerge.js'),
      import('@apollo/gateway/dist/executeQueryPlan.js'),
    ]);
    ({ applyRewrites, isObjectOfType } = commonJsExports(rewrites, 'applyRewrites'));
    ({ deepMerge } = commonJsExports(merge, 'deepMerge'));
    ({ generateHydratedPaths } = commonJsExports(execute, 'generateHydratedPaths'));
  })();
  return helpersLoaded;
}

/** What of @apollo/gateway's ApolloGateway this executor reads (fields it keeps as it loads the supergraph). */
interface GatewayInternals {
  apiSchema: Schema;
  supergraphSchema: GraphQLSchema;
  queryPlanStore: { get(key: string): Promise<QueryPlan | undefined> };
  config: { __exposeQueryPlanExperimental?: boolean; debug?: boolean };
}

/** Compiled queries kept (oldest dropped first). */
const MAX_COMPILED = 2000;

type Path = Array<string | number>;
interface Cursor {
  path: Path;
  data: unknown;
  fullResult: Record<string, unknown>;
}
interface Run {
  sources: ReadonlyMap<string, GraphQLDataSource>;
  requestContext: GatewayGraphQLRequestContext;
  supergraph: GraphQLSchema;
  operation: Operation;
  errors: GraphQLError[];
}

/**
 * The gateway Apollo Server runs with: @apollo/gateway's, whose executor runs the queries it can
 * from their compiled form (`sources`: the in-process data source of each subgraph).
 */
export function compiledPlanGateway(gateway: GatewayInterface, sources: ReadonlyMap<string, GraphQLDataSource>): GatewayInterface & { stats: PlanStats } {
  const helpers = loadGatewayHelpers();
  helpers.catch(() => {}); // reported by load
  const stats: PlanStats = { compiled: 0, apollo: 0 };
  return {
    stats,
    onSchemaLoadOrUpdate: (callback) => gateway.onSchemaLoadOrUpdate(callback),
    stop: () => gateway.stop(),
    load: async (options) => {
      const [loaded] = await Promise.all([gateway.load(options), helpers]);
      if (!loaded.executor) return loaded;
      const { executor, forget } = compiledPlanExecutor(gateway as unknown as GatewayInternals, loaded.executor, sources, stats);
      // A new supergraph makes new plans (Apollo empties its plan cache then): so are ours forgotten.
      gateway.onSchemaLoadOrUpdate(forget);
      return { ...loaded, executor };
    },
  };
}

/** Requests run from a compiled plan, and on @apollo/gateway's executor. */
export interface PlanStats {
  compiled: number;
  apollo: number;
}

/** A query ready to run: its plan and the shape of its answer. */
interface Compiled {
  plan: QueryPlan;
  operation: Operation;
  shape: Shape;
}

function compiledPlanExecutor(
  gateway: GatewayInternals,
  apolloExecutor: GatewayExecutor,
  sources: ReadonlyMap<string, GraphQLDataSource>,
  stats: PlanStats,
): { executor: GatewayExecutor; forget: () => void } {
  // Per query (its hash and operation name): its compiled form, null when it runs on Apollo's.
  const compiled = new Map<string, Compiled | null>();
  const apollo: GatewayExecutor = (requestContext) => {
    stats.apollo++;
    return apolloExecutor(requestContext);
  };
  const executor: GatewayExecutor = async (requestContext) => {
    const { request, operation, queryHash, document } = requestContext;
    // A mutation's plan is a sequence of fetches, run one after another as Apollo runs them (its
    // root fields in order); a subscription is not a plan this executor runs.
    if ((operation?.operation !== 'query' && operation?.operation !== 'mutation') || requestContext.metrics?.captureTraces) return apollo(requestContext);
    if (gateway.config.__exposeQueryPlanExperimental && request.http?.headers.get('Apollo-Query-Plan-Experimental')) return apollo(requestContext);
    const key = request.operationName ? `${request.operationName}\n${queryHash}` : queryHash;
    const known = compiled.get(key);
    if (known === undefined) {
      // The first request of a query: Apollo's executor plans it (and keeps the plan); the next run compiled.
      const result = await apollo(requestContext);
      const planKey = request.operationName ? createHash('sha256').update(queryHash).update(request.operationName).digest('hex') : queryHash;
      const plan = await gateway.queryPlanStore.get(planKey).catch(() => undefined);
      // No plan: the request was refused before planning (its variables); a later one plans it.
      if (plan) {
        if (compiled.size >= MAX_COMPILED) compiled.delete(compiled.keys().next().value!);
        compiled.set(key, compile(gateway, plan, document, operation, sources));
      }
      return result;
    }
    if (known === null) return apollo(requestContext);
    stats.compiled++;
    // As @apollo/gateway validates a request's variables before it runs the plan.
    if (operation.variableDefinitions?.length) {
      const { errors } = getVariableValues(requestContext.schema, operation.variableDefinitions, request.variables ?? {});
      if (errors) return { errors };
    }
    return execute(gateway, known, requestContext, sources);
  };
  return { executor, forget: () => compiled.clear() };
}

function compile(
  gateway: GatewayInternals,
  plan: QueryPlan,
  document: DocumentNode,
  operation: OperationDefinitionNode,
  sources: ReadonlyMap<string, GraphQLDataSource>,
): Compiled | null {
  if (plan.node && !runnable(plan.node, sources)) return null;
  let op: Operation;
  try {
    // The operation @apollo/gateway's executeQueryPlan builds on every request, built once.
    const fragments = document.definitions.filter((d) => d.kind === Kind.FRAGMENT_DEFINITION);
    op = operationFromDocument(gateway.apiSchema, { kind: Kind.DOCUMENT, definitions: [operation, ...fragments] }, { validate: false });
  } catch {
    return null;
  }
  const shape = shapeOf(op.selectionSet, op.schema());
  return shape ? { plan, operation: op, shape } : null;
}

/** Whether every node of the plan is one this executor runs, on a subgraph in the process. */
function runnable(node: PlanNode | SubscriptionNode, sources: ReadonlyMap<string, GraphQLDataSource>): boolean {
  switch (node.kind) {
    case 'Sequence':
    case 'Parallel':
      return node.nodes.every((n) => runnable(n, sources));
    case 'Flatten':
      return runnable(node.node, sources);
    case 'Fetch':
      return sources.has(node.serviceName);
    case 'Condition':
      return (!node.ifClause || runnable(node.ifClause, sources)) && (!node.elseClause || runnable(node.elseClause, sources));
    default:
      return false;
  }
}

async function execute(
  gateway: GatewayInternals,
  compiled: Compiled,
  requestContext: GatewayGraphQLRequestContext,
  sources: ReadonlyMap<string, GraphQLDataSource>,
): ReturnType<GatewayExecutor> {
  const run: Run = { sources, requestContext, supergraph: gateway.supergraphSchema, operation: compiled.operation, errors: [] };
  const unfilteredData = Object.create(null) as Record<string, unknown>;
  if (compiled.plan.node) await executeNode(run, compiled.plan.node, { path: [], data: unfilteredData, fullResult: unfilteredData });
  const { errors } = run;
  let data: Record<string, unknown> | null;
  let shapingErrors: GraphQLError[];
  try {
    ({ data, errors: shapingErrors } = shapeAnswer(compiled.shape, unfilteredData, compiled.operation, requestContext.request.variables));
  } catch (error) {
    if (error instanceof GraphQLError) return { errors: [error] };
    if (error instanceof Error) return { errors: [new GraphQLError(error.message, { originalError: error })] };
    return { errors: [new GraphQLError('Unexpected error during query plan execution')] };
  }
  if (errors.length === 0 && shapingErrors.length > 0) return { extensions: { valueCompletion: shapingErrors }, data };
  return errors.length === 0 ? { data } : { errors, data };
}

// ---- the plan: executeQueryPlan.ts's executeNode and executeFetch, without traces and spans ----

async function executeNode(run: Run, node: PlanNode | SubscriptionNode, cursor: Cursor | undefined): Promise<void> {
  if (!cursor) return;
  switch (node.kind) {
    case 'Sequence':
      for (const child of node.nodes) await executeNode(run, child, cursor);
      return;
    case 'Parallel':
      await Promise.all(node.nodes.map((child) => executeNode(run, child, cursor)));
      return;
    case 'Flatten':
      return executeNode(run, node.node, moveIntoCursor(cursor, node.path));
    case 'Fetch':
      try {
        await executeFetch(run, node, cursor);
      } catch (error) {
        run.errors.push(error as GraphQLError);
      }
      return;
    case 'Condition': {
      const branch = evaluateCondition(node, run.operation.variableDefinitions, run.requestContext.request.variables) ? node.ifClause : node.elseClause;
      if (branch) await executeNode(run, branch, cursor);
      return;
    }
    default:
      throw new Error(`plan node ${node.kind} is not run by the compiled executor`);
  }
}

async function executeFetch(run: Run, fetch: FetchNode, cursor: Cursor): Promise<void> {
  const service = run.sources.get(fetch.serviceName);
  if (!service) throw new Error(`Couldn't find service with name "${fetch.serviceName}"`);
  const entities = (Array.isArray(cursor.data) ? cursor.data.filter((e) => e !== null && e !== undefined) : [cursor.data]) as Record<string, unknown>[];
  if (entities.length < 1) return;
  const variables = Object.create(null) as Record<string, unknown>;
  const provided = run.requestContext.request.variables;
  if (fetch.variableUsages) {
    for (const name of fetch.variableUsages) {
      if (provided && Object.hasOwn(provided, name) && typeof provided[name] !== 'undefined') variables[name] = provided[name];
    }
  }
  if (!fetch.requires) {
    const received = await sendOperation(run, fetch, cursor, service, variables);
    if (received) applyRewrites(run.supergraph, fetch.outputRewrites, received);
    for (const entity of entities) deepMerge(entity, received);
    return;
  }
  const representations: Record<string, unknown>[] = [];
  const representationToEntity: number[] = [];
  entities.forEach((entity, index) => {
    const representation = representationOf(run.supergraph, entity, fetch.requires!);
    if (representation?.[TypeNameMetaFieldDef.name]) {
      applyRewrites(run.supergraph, fetch.inputRewrites, representation);
      representations.push(representation);
      representationToEntity.push(index);
    }
  });
  if (representations.length < 1) return;
  if ('representations' in variables) throw new Error(`Variables cannot contain key "representations"`);
  // Not `{ ...variables, representations }`: a spread copy that gains a member is V8's slow path (docs/decisions.md).
  const received = await sendOperation(run, fetch, cursor, service, Object.assign({}, variables, { representations }));
  if (!received) return;
  const receivedEntities = received._entities;
  if (!Array.isArray(receivedEntities)) throw new Error(`Expected "data._entities" in response to be an array`);
  if (receivedEntities.length !== representations.length) throw new Error(`Expected "data._entities" to contain ${representations.length} elements`);
  for (let i = 0; i < entities.length; i++) {
    const receivedEntity = receivedEntities[i] as Record<string, unknown> | null | undefined;
    const existingEntity = entities[representationToEntity[i]!]!;
    if (receivedEntity && !receivedEntity.__typename) receivedEntity.__typename = existingEntity?.__typename;
    applyRewrites(run.supergraph, fetch.outputRewrites, receivedEntity as Record<string, unknown>);
    deepMerge(entities[representationToEntity[i]!]!, receivedEntity as Record<string, unknown>);
  }
}

async function sendOperation(
  run: Run,
  fetch: FetchNode,
  cursor: Cursor,
  service: GraphQLDataSource,
  variables: Record<string, unknown>,
): Promise<Record<string, unknown> | null | undefined> {
  const response = await service.process({
    kind: 'incoming operation' as never,
    request: { query: fetch.operation, variables, operationName: fetch.operationName },
    incomingRequestContext: run.requestContext,
    context: run.requestContext.context,
    document: fetch.operationDocumentNode,
    pathInIncomingRequest: cursor.path,
  });
  if (response.errors) {
    const errorPath = lazyErrorPath(fetch, cursor);
    run.errors.push(...response.errors.map((e) => downstreamServiceError(e as GraphQLError, fetch.serviceName, errorPath)));
    if (!response.extensions?.ftv1) {
      const errorPaths = response.errors.map((e) => ({ subgraph: fetch.serviceName, path: e.path }));
      const metrics = run.requestContext.metrics as { nonFtv1ErrorPaths?: unknown[] } | undefined;
      if (metrics) {
        if (metrics.nonFtv1ErrorPaths) metrics.nonFtv1ErrorPaths.push(...errorPaths);
        else metrics.nonFtv1ErrorPaths = errorPaths;
      }
    }
  }
  return response.data as Record<string, unknown> | null | undefined;
}

function lazyErrorPath(fetch: FetchNode, cursor: Cursor): (path: ReadonlyArray<string | number> | undefined) => Path | undefined {
  let hydrated: Path[] | undefined;
  return (errorPath) => {
    if (fetch.requires && typeof errorPath?.[1] === 'number') {
      if (!hydrated) {
        hydrated = [];
        generateHydratedPaths([], cursor.path as never, cursor.fullResult as never, hydrated as never);
      }
      return [...(hydrated[errorPath[1]] ?? []), ...errorPath.slice(2)];
    }
    return errorPath ? [...cursor.path, ...errorPath.slice()] : undefined;
  };
}

function downstreamServiceError(
  originalError: GraphQLError,
  serviceName: string,
  errorPath: (path: ReadonlyArray<string | number> | undefined) => Path | undefined,
): GraphQLError {
  const { extensions } = originalError;
  const message = originalError.message || `Error while fetching subquery from service "${serviceName}"`;
  const options = { originalError, path: errorPath(originalError.path), extensions: { ...extensions, serviceName } };
  const codeDef = errorCodeDef(originalError);
  if (!codeDef && extensions?.code) return new GraphQLError(message, options);
  return (codeDef ?? ERRORS.DOWNSTREAM_SERVICE_ERROR).err(message, options);
}

/** The representation of an entity for a fetch's `requires` (executeQueryPlan.ts executeSelectionSet). */
function representationOf(schema: GraphQLSchema, source: unknown, selections: readonly QueryPlanSelectionNode[]): Record<string, unknown> | null {
  if (source === null) return null;
  const src = source as Record<string, unknown>;
  const result = Object.create(null) as Record<string, unknown>;
  for (const selection of selections) {
    if (selection.kind === Kind.FIELD) {
      const responseName = getResponseName(selection);
      const sub = selection.selections;
      if (!Object.hasOwn(src, responseName) || typeof src[responseName] === 'undefined') return null;
      const value = src[responseName];
      if (Array.isArray(value)) result[responseName] = value.map((v) => (sub ? representationOf(schema, v, sub) : v));
      else if (sub) result[responseName] = representationOf(schema, value, sub);
      else result[responseName] = value;
    } else if (selection.kind === Kind.INLINE_FRAGMENT) {
      if (!selection.typeCondition || !source) continue;
      if (isObjectOfType(schema, src, selection.typeCondition)) deepMerge(result, representationOf(schema, src, selection.selections));
    }
  }
  return result;
}

function moveIntoCursor(cursor: Cursor, pathInCursor: ReadonlyArray<string | number>): Cursor | undefined {
  const data = flattenResultsAtPath(cursor.data, pathInCursor);
  return data ? { path: cursor.path.concat(pathInCursor as Path), data, fullResult: cursor.fullResult } : undefined;
}

function flattenResultsAtPath(value: unknown, path: ReadonlyArray<string | number>): unknown {
  if (path.length === 0) return value;
  if (value === undefined || value === null) return value;
  const [current, ...rest] = path;
  if (current === '@') return (value as unknown[]).flatMap((element) => flattenResultsAtPath(element, rest));
  if (typeof current !== 'string') throw new Error(`Unexpected ${typeof current} found in path`);
  if (Array.isArray(value)) throw new Error(`Unexpected array in result for path element ${current}`);
  const obj = value as Record<string, unknown>;
  return flattenResultsAtPath(Object.hasOwn(obj, current) ? obj[current] : undefined, rest);
}

// ---- the answer's shape: resultShaping.ts's computeResponse, compiled ----

/** @skip / @include of a selection: `if` as a constant or a variable's name. */
interface Condition {
  skip: boolean;
  if: boolean | { variable: string };
  /** The variable as Apollo prints it in its message (`$name`), and the directive. */
  variable?: string;
  text: string;
}
type LeafType = ScalarType | EnumType;
/** How a field's value is shaped, by its type (outermost first). */
type TypeShape =
  | { kind: 'nonNull'; of: TypeShape; type: Type }
  | { kind: 'list'; of: TypeShape; type: Type }
  | { kind: 'composite'; type: CompositeType }
  | { kind: 'leaf'; type: LeafType };
type Selection =
  | { kind: 'field'; responseName: string; typename: boolean; type: TypeShape; selection?: Shape; conditions?: Condition[] }
  | { kind: 'fragment'; typeCondition?: CompositeType; applies: Map<string, boolean>; selection: Shape; conditions?: Condition[] };
interface Shape {
  selections: Selection[];
}

/** The compiled shape of a selection set; undefined when it selects introspection fields (Apollo's executor answers those). */
function shapeOf(set: SelectionSet, schema: Schema): Shape | undefined {
  const selections: Selection[] = [];
  for (const selection of set.selections()) {
    const conditions = conditionsOf(selection.element, schema);
    if (conditions === null) return undefined;
    if (selection.kind === 'FieldSelection') {
      const field = selection.element;
      if (field.definition.isSchemaIntrospectionField()) return undefined;
      const sub = selection.selectionSet ? shapeOf(selection.selectionSet, schema) : undefined;
      if (selection.selectionSet && !sub) return undefined;
      selections.push({
        kind: 'field',
        responseName: field.responseName(),
        typename: field.name === typenameFieldName,
        type: typeShapeOf(field.definition.type!),
        selection: sub,
        conditions,
      });
    } else {
      const sub = shapeOf(selection.selectionSet, schema);
      if (!sub) return undefined;
      selections.push({ kind: 'fragment', typeCondition: selection.element.typeCondition, applies: new Map(), selection: sub, conditions });
    }
  }
  return { selections };
}

function typeShapeOf(type: Type): TypeShape {
  if (isNonNullType(type)) return { kind: 'nonNull', of: typeShapeOf(type.ofType), type };
  if (isListType(type)) return { kind: 'list', of: typeShapeOf(type.ofType), type };
  if (isCompositeType(type)) return { kind: 'composite', type };
  return { kind: 'leaf', type: type as LeafType };
}

/** The @skip and @include of an element (undefined: none; null: one this cannot read). */
function conditionsOf(
  element: { appliedDirectivesOf(d: unknown): Array<{ arguments(): Record<string, unknown>; toString(): string }> },
  schema: Schema,
): Condition[] | undefined | null {
  const out: Condition[] = [];
  for (const [directive, skip] of [
    [schema.skipDirective(), true],
    [schema.includeDirective(), false],
  ] as const) {
    const applied = element.appliedDirectivesOf(directive)[0];
    if (!applied) continue;
    const arg = applied.arguments().if;
    if (typeof arg === 'boolean') out.push({ skip, if: arg, text: String(applied) });
    else if (arg && typeof arg === 'object' && typeof (arg as { name?: unknown }).name === 'string')
      out.push({ skip, if: { variable: (arg as { name: string }).name }, variable: String(arg), text: String(applied) });
    else return null;
  }
  return out.length ? out : undefined;
}

interface Shaping {
  schema: Schema;
  variables: Record<string, unknown>;
  errors: GraphQLError[];
}

/** resultShaping.ts shouldSkip: @skip read first, then @include. */
function skipped(conditions: Condition[], p: Shaping): boolean {
  for (const c of conditions) {
    let value: unknown = c.if;
    if (typeof value === 'object') {
      value = p.variables[(c.if as { variable: string }).variable];
      if (value === undefined || typeof value !== 'boolean') throw new Error(`Unexpected value ${value} for variable ${c.variable} of ${c.text}`);
    }
    if (c.skip ? value : !value) return true;
  }
  return false;
}

const OK = 0;
const NULL_BUBBLE_UP = 1;

function shapeAnswer(
  shape: Shape,
  input: Record<string, unknown>,
  operation: Operation,
  variables: Record<string, unknown> | undefined,
): { data: Record<string, unknown> | null; errors: GraphQLError[] } {
  const schema = operation.schema();
  const p: Shaping = { schema, variables: { __proto__: null, ...operation.collectDefaultedVariableValues(), ...variables }, errors: [] };
  const data = Object.create(null) as Record<string, unknown>;
  const res = applySelection(shape, input, data, p, [], schema.schemaDefinition.rootType(operation.rootKind)!);
  return { data: res === NULL_BUBBLE_UP ? null : data, errors: p.errors };
}

function applySelection(
  shape: Shape,
  input: Record<string, unknown>,
  output: Record<string, unknown>,
  p: Shaping,
  path: Path,
  parentType: CompositeType,
): number {
  for (const selection of shape.selections) {
    if (selection.conditions && skipped(selection.conditions, p)) continue;
    if (selection.kind === 'field') {
      const responseName = selection.responseName;
      const outputValue = output[responseName];
      let inputValue = Object.hasOwn(input, responseName) ? (input[responseName] ?? null) : null;
      if (selection.typename) {
        if (outputValue === undefined) {
          if (inputValue === null && responseName !== typenameFieldName) inputValue = input[typenameFieldName] ?? null;
          const type = inputValue !== null && typeof inputValue === 'string' ? (p.schema.type(inputValue) ?? parentType) : parentType;
          if (!isObjectType(type)) return NULL_BUBBLE_UP;
          output[responseName] = type.name;
        }
        continue;
      }
      path.push(responseName);
      const updated = updateValue(outputValue, selection.type, inputValue, selection.selection, path, p, parentType);
      output[responseName] = updated;
      path.pop();
      if (invalid) return NULL_BUBBLE_UP;
    } else {
      const typename = input[typenameFieldName];
      if (typename && typeof typename !== 'string') throw new Error(`Got unexpected value for __typename: ${typename}`);
      if (typeConditionApplies(selection, p.schema, typename as string | undefined, parentType)) {
        if (applySelection(selection.selection, input, output, p, path, selection.typeCondition ?? parentType) === NULL_BUBBLE_UP) return NULL_BUBBLE_UP;
      }
    }
  }
  return OK;
}

function typeConditionApplies(
  fragment: Extract<Selection, { kind: 'fragment' }>,
  schema: Schema,
  typename: string | undefined,
  parentType: CompositeType,
): boolean {
  const condition = fragment.typeCondition;
  if (!condition) return true;
  if (!typename) return isSubtype(condition, parentType);
  let applies = fragment.applies.get(typename);
  if (applies === undefined) {
    const type = schema.type(typename);
    applies = !!type && isSubtype(condition, type);
    fragment.applies.set(typename, applies);
  }
  return applies;
}

// updateValue's outcome besides its value (resultShaping.ts returns {updated, isInvalid, hasErrors}
// objects; here two flags, read right after each call).
let invalid = false;
let hasErrors = false;

function lastElementDescription(path: Path, currentType: Type, parentType: CompositeType): string {
  const element = path[path.length - 1];
  return typeof element === 'string' ? `field ${parentType}.${element}` : `array element of type ${currentType} at index ${element}`;
}

function updateValue(
  outputValue: unknown,
  type: TypeShape,
  inputValue: unknown,
  selection: Shape | undefined,
  path: Path,
  p: Shaping,
  parentType: CompositeType,
): unknown {
  if (outputValue === null || (outputValue !== undefined && !selection)) {
    invalid = hasErrors = false;
    return outputValue;
  }
  switch (type.kind) {
    case 'nonNull': {
      const updated = updateValue(outputValue, type.of, inputValue, selection, path, p, parentType);
      if (updated === null) {
        if (!hasErrors) {
          p.errors.push(
            ERRORS.INVALID_GRAPHQL.err(`Cannot return null for non-nullable ${lastElementDescription(path, type.of.type, parentType)}.`, {
              path: Array.from(path),
            }),
          );
        }
        invalid = hasErrors = true;
        return updated;
      }
      invalid = hasErrors = false;
      return updated;
    }
    case 'list': {
      if (inputValue === null) {
        invalid = hasErrors = false;
        return null;
      }
      if (!Array.isArray(inputValue)) throw new Error(`Invalid non-list value ${inputValue} returned by subgraph for list type ${type.type}`);
      if (outputValue !== undefined && !Array.isArray(outputValue))
        throw new Error(`Invalid non-list value ${outputValue} returned by subgraph for list type ${type.type}`);
      const existing = outputValue as unknown[] | undefined;
      if (existing && inputValue.length !== existing.length)
        throw new Error(`[${inputValue}].length (${inputValue.length}) !== [${existing}].length (${existing.length})`);
      let nullify = false;
      let errors = false;
      const updated = new Array<unknown>(inputValue.length);
      for (let i = 0; i < inputValue.length; i++) {
        path.push(i);
        updated[i] = updateValue(existing?.[i], type.of, inputValue[i], selection, path, p, parentType);
        path.pop();
        nullify ||= invalid;
        errors ||= hasErrors;
      }
      invalid = false;
      hasErrors = errors;
      return nullify ? null : updated;
    }
    case 'composite': {
      if (inputValue === null) {
        invalid = hasErrors = false;
        return null;
      }
      if (!selection) throw new Error(`Invalid empty selection set for composite type ${type.type}`);
      if (typeof inputValue !== 'object') throw new Error(`Invalid non-object value ${inputValue} returned by subgraph for composite type ${type.type}`);
      if (outputValue !== undefined && typeof outputValue !== 'object')
        throw new Error(`Invalid non-object value ${inputValue} returned by subgraph for composite type ${type.type}`);
      const input = inputValue as Record<string, unknown>;
      const inputTypename = input[typenameFieldName];
      if (inputTypename !== undefined && typeof inputTypename !== 'string')
        throw new Error(`Invalid non-string value ${inputTypename} for __typename at ${path}`);
      let objType: CompositeType = type.type;
      if (inputTypename) {
        const typenameType = p.schema.type(inputTypename);
        if (!typenameType || !isCompositeType(typenameType)) {
          p.errors.push(
            ERRORS.INVALID_GRAPHQL.err(`Invalid __typename found for object at ${lastElementDescription(path, type.type, parentType)}.`, {
              path: Array.from(path),
            }),
          );
          invalid = false;
          hasErrors = true;
          return null;
        }
        objType = typenameType;
      }
      const out = (outputValue === undefined ? Object.create(null) : outputValue) as Record<string, unknown>;
      const bubbled = applySelection(selection, input, out, p, path, objType) === NULL_BUBBLE_UP;
      invalid = false;
      hasErrors = bubbled;
      return bubbled ? null : out;
    }
    default: {
      if (inputValue === null) {
        invalid = hasErrors = false;
        return null;
      }
      if (outputValue !== undefined) throw new Error(`Excepted output to be undefined but got ${type.type} for type ${type.type}`);
      const valid = isValidLeafValue(p.schema, inputValue, type.type);
      if (!valid)
        p.errors.push(
          ERRORS.INVALID_GRAPHQL.err(`Invalid value found for ${lastElementDescription(path, type.type, parentType)}.`, { path: Array.from(path) }),
        );
      invalid = false;
      hasErrors = !valid;
      return valid ? inputValue : null;
    }
  }
}
