import type { AcquireRequest, BucketStore } from '../stores/bucket-store.js';
import { describeError } from './errors.js';
import type { Decision, Limiter, OperationInput } from './limiter.js';
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
  if (nulledAboveItsField(result)) {
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
  const refunds: AcquireRequest[] = [];
  const indexes: number[] = [];
  charges.forEach(({ bucket, key, cost }, i) => {
    // Never more back than was taken: a measured bucket of an operation one of
    // them would have denied took nothing.
    const tokens = Math.min(cost - actualCosts[i]!, decision.taken[i] ?? 0);
    if (tokens > 0) {
      refunds.push({ bucket, key, cost: tokens });
      indexes.push(i);
    }
  });
  if (refunds.length === 0) return { actualCosts, remaining: decision.remaining };

  const { store, storeTimeoutMs } = limiter.settings;
  let after: number[] | undefined;
  try {
    after = await withTimeout(
      Promise.resolve().then(() => refundAll(store, refunds)),
      storeTimeoutMs,
    );
  } catch (error) {
    input.logger.warn(`graphql-token-bucket: refund failed, the operation keeps its estimated cost: ${describeError(error)}`);
    return { actualCosts, remaining: decision.remaining };
  }
  // A denial this replica remembers for these pairs may no longer hold.
  for (const { bucket, key } of refunds) limiter.tokensReturned(bucket, key);
  const remaining = [...decision.remaining];
  indexes.forEach((i, r) => {
    // The store says what the bucket holds now; a store that does not, what it
    // held after the acquire plus what came back.
    remaining[i] = after?.[r] ?? Math.min(charges[i]!.bucket.capacity, (remaining[i] ?? 0) + refunds[r]!.cost);
  });
  return { actualCosts, remaining };
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
