// Operation limits for /graphql, as validation rules: they run before any subgraph is asked, and
// each refusal is a GraphQL error with a code in extensions. Token count is enforced by the parser
// (parseOptions.maxTokens). Every limit has an environment override (lib/config.ts).
import {
  GraphQLError,
  Kind,
  type ASTVisitor,
  type FieldNode,
  type FragmentDefinitionNode,
  type SelectionSetNode,
  type ValidationContext,
  type ValidationRule,
} from 'graphql';

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

/**
 * Walks the fields of a selection set through inline fragments and named fragments (each named
 * fragment once per path), carrying a value down each path: `visit` sees a field with its parent's
 * value and returns the value for the field's children, or undefined not to descend.
 */
type Walk = <A>(set: SelectionSetNode, acc: A, visit: (field: FieldNode, acc: A) => A | undefined) => void;

function walker(ctx: ValidationContext): Walk {
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const d of ctx.getDocument().definitions) if (d.kind === Kind.FRAGMENT_DEFINITION) fragments.set(d.name.value, d);
  const walk = <A>(set: SelectionSetNode, acc: A, visit: (field: FieldNode, acc: A) => A | undefined, seen: Set<string>): void => {
    for (const sel of set.selections) {
      if (sel.kind === Kind.FIELD) {
        const next = visit(sel, acc);
        if (next !== undefined && sel.selectionSet) walk(sel.selectionSet, next, visit, seen);
      } else if (sel.kind === Kind.INLINE_FRAGMENT) {
        walk(sel.selectionSet, acc, visit, seen);
      } else {
        const f = fragments.get(sel.name.value);
        if (f && !seen.has(f.name.value)) walk(f.selectionSet, acc, visit, new Set([...seen, f.name.value]));
      }
    }
  };
  return (set, acc, visit) => walk(set, acc, visit, new Set());
}

/**
 * What is below an introspection field (__schema, __type) is not counted by the depth and cost
 * limits: the standard introspection query (GraphiQL's, codegen's) is 15 deep. Its own bound is
 * INTROSPECTION_LIST_DEPTH.
 */
const isIntrospection = (f: FieldNode) => f.name.value.startsWith('__');

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
  const perOperation =
    (check: (set: SelectionSetNode, walk: Walk) => GraphQLError | null): ValidationRule =>
    (ctx: ValidationContext): ASTVisitor => ({
      OperationDefinition(node) {
        const err = check(node.selectionSet, walker(ctx));
        if (err) ctx.reportError(err);
      },
    });
  return [
    perOperation((set, walk) => {
      let deepest = 0;
      walk(set, 0, (f, d) => {
        deepest = Math.max(deepest, d + 1);
        return isIntrospection(f) ? undefined : d + 1;
      });
      return deepest > limits.maxDepth
        ? limitError('QUERY_TOO_DEEP', `Query depth ${deepest} exceeds the limit of ${limits.maxDepth}`, limits.maxDepth, deepest)
        : null;
    }),
    perOperation((set, walk) => {
      // List fields nested under __schema / __type.
      let deepest = 0;
      walk(set, { inside: false, lists: 0 }, (f, { inside, lists }) => {
        const n = lists + (inside && INTROSPECTION_LISTS.has(f.name.value) ? 1 : 0);
        deepest = Math.max(deepest, n);
        return { inside: inside || f.name.value === '__schema' || f.name.value === '__type', lists: n };
      });
      return deepest > INTROSPECTION_LIST_DEPTH
        ? limitError(
            'INTROSPECTION_TOO_DEEP',
            `Introspection nests ${deepest} list fields (types, fields, ...), more than the ${INTROSPECTION_LIST_DEPTH} the standard query needs`,
            INTROSPECTION_LIST_DEPTH,
            deepest,
          )
        : null;
    }),
    perOperation((set, walk) => {
      let aliases = 0;
      walk(set, 0, (f) => {
        if (f.alias) aliases++;
        return 0;
      });
      return aliases > limits.maxAliases
        ? limitError('TOO_MANY_ALIASES', `${aliases} aliases exceed the limit of ${limits.maxAliases}`, limits.maxAliases, aliases)
        : null;
    }),
    perOperation((set) => {
      const roots = set.selections.length;
      return roots > limits.maxRootFields
        ? limitError('TOO_MANY_ROOT_FIELDS', `${roots} root fields exceed the limit of ${limits.maxRootFields}`, limits.maxRootFields, roots)
        : null;
    }),
    perOperation((set, walk) => {
      let cost = 0;
      walk(set, 1, (f, m) => {
        const here = m * listFactor(f);
        cost += here;
        return isIntrospection(f) ? undefined : here;
      });
      return cost > limits.maxCost ? limitError('QUERY_TOO_COSTLY', `Query cost ${cost} exceeds the limit of ${limits.maxCost}`, limits.maxCost, cost) : null;
    }),
  ];
}
