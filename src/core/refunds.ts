import { Kind, getNamedType, isInterfaceType, isListType, isNonNullType, isObjectType } from 'graphql';
import type { DocumentNode, FragmentDefinitionNode, GraphQLNamedType, GraphQLOutputType, GraphQLSchema, OperationDefinitionNode, SelectionSetNode } from 'graphql';
import type { AcquireRequest, BucketStore } from '../stores/bucket-store.js';
import { describeError } from './errors.js';
import type { Decision, Limiter, OperationInput } from './limiter.js';
import type { Logger } from './options.js';
import { withTimeout } from './timeout.js';

/** Default of `refundUnusedCost`: an operation pays its estimate. */
export const DEFAULT_REFUND_UNUSED_COST = false;

/** What a refund changed, parallel to the admitted decision's `charges`. */
export interface Refunded {
  /** What the response cost in each bucket: never above the estimate. */
  readonly actualCosts: readonly number[];
  /** The whole tokens each bucket holds after the refund. */
  readonly remaining: readonly number[];
}

type Admitted = Extract<Decision, { kind: 'allowed' }>;

/** The part of an execution result a refund reads: its `data`, and its errors' paths. */
export interface ExecutedResult {
  readonly data?: unknown;
  readonly errors?: readonly { readonly path?: readonly (string | number)[] | undefined }[] | undefined;
}

/** `refundUnusedCost` with a store that cannot give tokens back is a programming error. */
export function assertCanRefund(store: BucketStore, owner: string): void {
  if (typeof store.refundAll !== 'function' && typeof store.refund !== 'function') {
    throw new TypeError(`${owner} option "refundUnusedCost" needs a store with refundAll or refund (RedisStore and MemoryStore have both)`);
  }
}

/**
 * Prices the response an admitted operation is about to send (`data`: lists
 * by the items they hold, nothing below a null) and gives each bucket back
 * what the estimate charged beyond it, in one store call, before the response
 * leaves. Never throws: a failed pricing or refund is logged and the
 * operation keeps its estimate, as does a response in which an error nulled
 * more than its own field (see `nulledAboveItsField`).
 */
export async function refundUnused<TContext>(limiter: Limiter<TContext>, input: OperationInput<TContext>, decision: Admitted, result: ExecutedResult): Promise<Refunded> {
  const { charges } = decision;
  const kept = { actualCosts: charges.map((c) => c.cost), remaining: decision.remaining };
  if (nulledAboveItsField(result) || listNulledByError(input, result)) {
    for (const { bucket, cost } of charges) limiter.metrics.actualCost(bucket.name, cost);
    return kept;
  }
  const estimate = new Map(charges.map(({ bucket, cost }) => [bucket.name, cost]));
  let priced: ReadonlyMap<string, number>;
  try {
    priced = limiter.modelFor(input.schema, input.logger).actualCostOf(input.document, input.operation, input.variables, result.data, estimate);
  } catch (error) {
    input.logger.error(`graphql-token-bucket: could not price the response, the operation keeps its estimated cost: ${describeError(error)}`);
    return kept;
  }

  // An actual cost is clamped to [0, estimate].
  const actualCosts = charges.map(({ bucket, cost }) => {
    const actual = priced.get(bucket.name);
    return actual !== undefined && actual >= 0 ? Math.min(Math.ceil(actual), cost) : cost;
  });
  actualCosts.forEach((actual, i) => limiter.metrics.actualCost(charges[i]!.bucket.name, actual));
  // Never more back than was taken: a measured bucket of an operation one of
  // them would have denied took nothing.
  const tokens = charges.map(({ cost }, i) => Math.min(cost - actualCosts[i]!, decision.taken[i] ?? 0));
  const remaining = await giveBack(limiter, input.logger, decision, tokens, 'graphql-token-bucket: refund failed, the operation keeps its estimated cost');
  return { actualCosts, remaining: remaining ?? decision.remaining };
}

/**
 * Gives `tokens[i]` back to the bucket of each of `decision.charges[i]`, in
 * one store call: what each bucket holds after (the store's word, else what
 * it held after the acquire plus what came back), or undefined when the call
 * failed, which is logged after `failed`.
 */
async function giveBack<TContext>(limiter: Limiter<TContext>, logger: Logger, decision: Admitted, tokens: readonly number[], failed: string): Promise<number[] | undefined> {
  const { charges } = decision;
  const refunds: AcquireRequest[] = [];
  const indexes: number[] = [];
  charges.forEach(({ bucket, key }, i) => {
    const cost = tokens[i] ?? 0;
    if (cost > 0) {
      refunds.push({ bucket, key, cost });
      indexes.push(i);
    }
  });
  const remaining = [...decision.remaining];
  if (refunds.length === 0) return remaining;
  const { store, storeTimeoutMs } = limiter.settings;
  let after: number[] | undefined;
  try {
    after = await withTimeout(
      Promise.resolve().then(() => refundAll(store, refunds)),
      storeTimeoutMs,
    );
  } catch (error) {
    logger.warn(`${failed}: ${describeError(error)}`);
    return undefined;
  }
  // A denial this replica remembers for these pairs may no longer hold.
  refunds.forEach(({ bucket, key }, r) => limiter.tokensReturned(bucket, key, after?.[r]));
  indexes.forEach((i, r) => {
    remaining[i] = after?.[r] ?? Math.min(charges[i]!.bucket.capacity, (remaining[i] ?? 0) + refunds[r]!.cost);
  });
  return remaining;
}

/**
 * Gives back everything an admitted operation took, when its executor was
 * never called: a plugin after the limiter refused it (a depth limit, an
 * authorisation check, an error thrown in its hook) or answered it without
 * data. Invariant: an operation that never executes keeps no token, with or
 * without `refundUnusedCost`. Never throws: a failed return is logged and the
 * tokens stay taken.
 */
export async function returnUnexecuted<TContext>(limiter: Limiter<TContext>, logger: Logger, decision: Admitted): Promise<Refunded> {
  const { charges } = decision;
  const kept = { actualCosts: charges.map((c) => c.cost), remaining: decision.remaining };
  const { store } = limiter.settings;
  if (typeof store.refundAll !== 'function' && typeof store.refund !== 'function') {
    logger.warn('graphql-token-bucket: an operation was refused after it was charged, and the store cannot give tokens back (it has no refundAll or refund): it keeps its cost');
    return kept;
  }
  const remaining = await giveBack(limiter, logger, decision, decision.taken, 'graphql-token-bucket: returning the tokens of an operation refused after it was charged failed, it keeps its cost');
  return remaining === undefined ? kept : { actualCosts: charges.map(() => 0), remaining };
}

/** Whether a response carries data: one that does not was refused, or failed before anything ran. */
export function carriesData(result: { readonly data?: unknown } | undefined): boolean {
  return result?.data !== undefined && result.data !== null;
}

/**
 * Whether an execution error nulled more than the field that failed. A null
 * is priced as "nothing below it ran", which holds where a field's own
 * resolver failed or returned null. But a non-null field that fails nulls its
 * parent instead (a list item, an object, or all of `data`), and the parent's
 * other fields, and the items of the lists above it, had run by then: the
 * response no longer shows their work. So the failed field's parent must be
 * in the response. An error with no path cannot be placed, and counts as such
 * an error when there is data at all.
 */
function nulledAboveItsField({ data, errors }: ExecutedResult): boolean {
  if (errors === undefined || errors.length === 0) return false;
  for (const { path } of errors) {
    if (path === undefined || path.length === 0) {
      // Before execution (variables that do not coerce): no data, nothing ran.
      if (data === undefined) continue;
      return true;
    }
    let parent = data;
    for (let i = 0; i < path.length - 1; i++) {
      if (parent === null || typeof parent !== 'object') return true;
      parent = (parent as Record<string | number, unknown>)[path[i]!];
    }
    if (parent === null || typeof parent !== 'object') return true;
  }
  return false;
}

/**
 * Whether an error left a list null: a list field's own (`rows`) or an
 * inner list of a list of lists (`matrix.3`). graphql-js completes a list's
 * items as it reads them, so an iterable that throws part-way (a cursor that
 * times out, a generator that stops at a limit) nulls the whole list after
 * the items before it, and every field below them, had run. The response
 * no longer shows that work. An error that nulls a list item, an object or
 * a scalar leaves nothing that ran hidden below it.
 */
function listNulledByError(input: { schema: GraphQLSchema; document: DocumentNode; operation: OperationDefinitionNode }, { data, errors }: ExecutedResult): boolean {
  if (errors === undefined || errors.length === 0 || data === null || typeof data !== 'object') return false;
  let lists: ListFinder | undefined;
  for (const { path } of errors) {
    if (path === undefined || path.length === 0 || valueAt(data, path) !== null) continue;
    lists ??= new ListFinder(input.schema, input.document, input.operation);
    if (lists.listAt(path)) return true;
  }
  return false;
}

function valueAt(data: unknown, path: readonly (string | number)[]): unknown {
  let value = data;
  for (const key of path) {
    if (value === null || typeof value !== 'object') return undefined;
    value = (value as Record<string | number, unknown>)[key];
  }
  return value;
}

/** The fields an operation selects under one response key at one level: their types, and their selections below. */
interface KeyedFields {
  readonly types: GraphQLOutputType[];
  readonly below: Level;
}
type Level = { readonly set: SelectionSetNode; readonly type: GraphQLNamedType }[];

/**
 * Tells whether the value at a response path (response keys, and list
 * indexes below a list field) is a list level of some field the operation
 * selects under those keys. Every fragment counts whatever its type
 * condition: an error's path does not say the runtime type, and a list
 * anywhere there may hide work. Each level is read once, however many
 * errors point into it.
 */
class ListFinder {
  private readonly fragments = new Map<string, FragmentDefinitionNode>();
  private readonly levels = new Map<string, Map<string, KeyedFields>>();
  private readonly root: Level;

  constructor(
    private readonly schema: GraphQLSchema,
    document: DocumentNode,
    operation: OperationDefinitionNode,
  ) {
    for (const definition of document.definitions) {
      if (definition.kind === Kind.FRAGMENT_DEFINITION) this.fragments.set(definition.name.value, definition);
    }
    const type = schema.getRootType(operation.operation);
    this.root = type === undefined || type === null ? [] : [{ set: operation.selectionSet, type }];
  }

  listAt(path: readonly (string | number)[]): boolean {
    let level = this.root;
    let prefix = '';
    let i = 0;
    while (i < path.length) {
      const key = path[i++];
      // A path that does not start at a field cannot be placed: it may hide anything.
      if (typeof key !== 'string') return true;
      let index = this.levels.get(prefix);
      if (index === undefined) this.levels.set(prefix, (index = this.index(level)));
      const fields = index.get(key);
      if (fields === undefined) return false;
      prefix += `${key}.`;
      let indexes = 0;
      while (i < path.length && typeof path[i] === 'number') {
        indexes++;
        i++;
      }
      if (i === path.length) return fields.types.some((type) => listDepth(type) > indexes);
      level = fields.below;
    }
    return false;
  }

  /** The fields of a level by response key, through every fragment. */
  private index(level: Level): Map<string, KeyedFields> {
    const index = new Map<string, KeyedFields>();
    const seen = new Set<string>();
    const work = [...level];
    while (work.length > 0) {
      const { set, type } = work.pop()!;
      for (const selection of set.selections) {
        if (selection.kind === Kind.FIELD) {
          if (!isObjectType(type) && !isInterfaceType(type)) continue;
          const definition = type.getFields()[selection.name.value];
          if (definition === undefined) continue;
          const key = selection.alias?.value ?? selection.name.value;
          let fields = index.get(key);
          if (fields === undefined) index.set(key, (fields = { types: [], below: [] }));
          fields.types.push(definition.type);
          if (selection.selectionSet !== undefined) fields.below.push({ set: selection.selectionSet, type: getNamedType(definition.type) });
        } else {
          if (selection.kind === Kind.FRAGMENT_SPREAD) {
            const id = `${selection.name.value}\u0000${type.name}`;
            if (seen.has(id)) continue;
            seen.add(id);
          }
          const fragment = selection.kind === Kind.INLINE_FRAGMENT ? selection : this.fragments.get(selection.name.value);
          if (fragment === undefined) continue;
          const condition = fragment.typeCondition === undefined ? type : this.schema.getType(fragment.typeCondition.name.value);
          if (condition !== undefined && condition !== null) work.push({ set: fragment.selectionSet, type: condition });
        }
      }
    }
    return index;
  }
}

function listDepth(type: GraphQLOutputType): number {
  let depth = 0;
  let current: GraphQLOutputType = type;
  for (;;) {
    if (isNonNullType(current)) current = current.ofType;
    else if (isListType(current)) {
      depth++;
      current = current.ofType as GraphQLOutputType;
    } else return depth;
  }
}

/**
 * One store call when the store has `refundAll`, else one `refund` per
 * bucket. Resolves to the whole tokens each bucket holds after it, when the
 * store says.
 */
async function refundAll(store: BucketStore, refunds: readonly AcquireRequest[]): Promise<number[] | undefined> {
  if (store.refundAll) {
    const after = await store.refundAll(refunds);
    return Array.isArray(after) && after.length === refunds.length ? after : undefined;
  }
  await Promise.all(refunds.map(({ bucket, key, cost }) => store.refund!(bucket, key, cost)));
  return undefined;
}
