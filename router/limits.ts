// Operation limits for /graphql, as validation rules: they run before any subgraph is asked, and
// each refusal is a GraphQL error with a code in extensions. Token count is enforced by the parser
// (parseOptions.maxTokens). Every limit has an environment override (lib/config.ts).
import { GraphQLError, Kind, type ASTVisitor, type FieldNode, type FragmentDefinitionNode, type SelectionSetNode, type ValidationContext, type ValidationRule } from 'graphql';

export interface GraphqlLimits {
  maxDepth: number;
  maxAliases: number;
  maxRootFields: number;
  maxTokens: number;
  maxCost: number;
}


// Apollo Server re-codes validation errors as GRAPHQL_VALIDATION_FAILED; `limitCode` carries ours
// through and the router's formatError restores it (formatLimitError). `limit` is the bound, `actual`
// what the operation has.
const limitError = (code: string, message: string, limit: number, actual: number) =>
  new GraphQLError(message, { extensions: { code, limitCode: code, limit, actual } });

/** A formatted error's extensions with a limit's own code restored and the carrier removed. */
export function formatLimitError<T extends { extensions?: Record<string, unknown> }>(formatted: T): T {
  const ext = formatted.extensions;
  if (!ext || typeof ext.limitCode !== 'string') return formatted;
  const { limitCode, ...rest } = ext;
  return { ...formatted, extensions: { ...rest, code: limitCode } };
}

type Walk = (set: SelectionSetNode, visit: (field: FieldNode, depth: number, multiplier: number) => void, depth: number, multiplier: number, seen?: Set<string>) => void;

/**
 * Walks fields through inline fragments and named fragments (each named fragment once per path).
 * `introspection: false` does not descend into __schema/__type: the standard introspection query
 * (GraphiQL's, codegen's) is 15 deep, and its own bound is INTROSPECTION_LIST_DEPTH.
 */
function walker(ctx: ValidationContext, introspection = true): Walk {
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const d of ctx.getDocument().definitions) if (d.kind === Kind.FRAGMENT_DEFINITION) fragments.set(d.name.value, d);
  const walk: Walk = (set, visit, depth, multiplier, seen: Set<string> = new Set()) => {
    for (const sel of set.selections) {
      if (sel.kind === Kind.FIELD) {
        visit(sel, depth, multiplier);
        if (!introspection && sel.name.value.startsWith('__')) continue;
        if (sel.selectionSet) walk(sel.selectionSet, visit, depth + 1, multiplier * listFactor(sel), seen);
      } else if (sel.kind === Kind.INLINE_FRAGMENT) {
        walk(sel.selectionSet, visit, depth, multiplier, seen);
      } else {
        const f = fragments.get(sel.name.value);
        if (f && !seen.has(f.name.value)) walk(f.selectionSet, visit, depth, multiplier, new Set([...seen, f.name.value]));
      }
    }
  };
  return walk as Walk;
}

/** How many items a field may return: its `first` argument when literal, else 10 for list-like names. */
function listFactor(field: FieldNode): number {
  const first = field.arguments?.find((a) => a.name.value === 'first');
  if (first?.value.kind === Kind.INT) return Math.max(1, Math.min(1000, Number(first.value.value)));
  return 1;
}

/**
 * Introspection's list fields. Nested, each multiplies the answer (types x fields x fields ...):
 * the standard introspection query nests three (types, fields, args); more is refused.
 */
const INTROSPECTION_LISTS = new Set(['types', 'fields', 'inputFields', 'interfaces', 'possibleTypes', 'enumValues', 'args', 'directives']);
export const INTROSPECTION_LIST_DEPTH = 3;

export function limitRules(limits: GraphqlLimits): ValidationRule[] {
  const perOperation = (check: (ctx: ValidationContext, set: SelectionSetNode, walk: Walk, outside: Walk) => GraphQLError | null): ValidationRule =>
    (ctx: ValidationContext): ASTVisitor => ({
      OperationDefinition(node) {
        const err = check(ctx, node.selectionSet, walker(ctx), walker(ctx, false));
        if (err) ctx.reportError(err);
      },
    });
  return [
    perOperation((_ctx, set, _walk, outside) => {
      let deepest = 0;
      outside(set, (_f, d) => void (deepest = Math.max(deepest, d + 1)), 0, 1);
      return deepest > limits.maxDepth ? limitError('QUERY_TOO_DEEP', `Query depth ${deepest} exceeds the limit of ${limits.maxDepth}`, limits.maxDepth, deepest) : null;
    }),
    perOperation((ctx, set) => {
      // List fields nested under __schema / __type, through fragments (each once per path).
      const fragments = new Map<string, FragmentDefinitionNode>();
      for (const d of ctx.getDocument().definitions) if (d.kind === Kind.FRAGMENT_DEFINITION) fragments.set(d.name.value, d);
      let deepest = 0;
      const walk = (s: SelectionSetNode, inside: boolean, lists: number, seen: Set<string>): void => {
        for (const sel of s.selections) {
          if (sel.kind === Kind.FIELD) {
            const into = inside || sel.name.value === '__schema' || sel.name.value === '__type';
            const n = lists + (inside && INTROSPECTION_LISTS.has(sel.name.value) ? 1 : 0);
            deepest = Math.max(deepest, n);
            if (sel.selectionSet) walk(sel.selectionSet, into, n, seen);
          } else if (sel.kind === Kind.INLINE_FRAGMENT) {
            walk(sel.selectionSet, inside, lists, seen);
          } else {
            const f = fragments.get(sel.name.value);
            if (f && !seen.has(f.name.value)) walk(f.selectionSet, inside, lists, new Set([...seen, f.name.value]));
          }
        }
      };
      walk(set, false, 0, new Set());
      return deepest > INTROSPECTION_LIST_DEPTH
        ? limitError('INTROSPECTION_TOO_DEEP', `Introspection nests ${deepest} list fields (types, fields, ...), more than the ${INTROSPECTION_LIST_DEPTH} the standard query needs`, INTROSPECTION_LIST_DEPTH, deepest)
        : null;
    }),
    perOperation((_ctx, set, walk) => {
      let aliases = 0;
      walk(set, (f) => void (f.alias && aliases++), 0, 1);
      return aliases > limits.maxAliases ? limitError('TOO_MANY_ALIASES', `${aliases} aliases exceed the limit of ${limits.maxAliases}`, limits.maxAliases, aliases) : null;
    }),
    perOperation((_ctx, set) => {
      const roots = set.selections.length;
      return roots > limits.maxRootFields ? limitError('TOO_MANY_ROOT_FIELDS', `${roots} root fields exceed the limit of ${limits.maxRootFields}`, limits.maxRootFields, roots) : null;
    }),
    perOperation((_ctx, set, _walk, outside) => {
      let cost = 0;
      outside(set, (f, _d, m) => void (cost += m * listFactor(f)), 0, 1);
      return cost > limits.maxCost ? limitError('QUERY_TOO_COSTLY', `Query cost ${cost} exceeds the limit of ${limits.maxCost}`, limits.maxCost, cost) : null;
    }),
  ];
}
