import type { AcquireRequest, BucketStore } from '../stores/bucket-store.js';
import { describeError } from './errors.js';
import type { Charge, Limiter, OperationInput } from './limiter.js';
import { withTimeout } from './timeout.js';

/** What `GraphQL-Cost: validate` reports of one bucket. */
export interface BucketCheck {
  cost: number;
  /** Whole tokens the bucket holds now. */
  remaining: number;
  capacity: number;
  /** Only for a bucket that would deny the operation now: seconds until it would not, `null` for never. */
  retryAfter?: number | null;
  /** A measured bucket (`measure`) that is short now: it would not deny, it would warn. */
  wouldDeny?: true;
}

/** An operation checked against its buckets without running it or taking a token. */
export type DryRun =
  /** It touches no bucket: nothing asked of the store. */
  | { readonly kind: 'free' }
  /** `remaining[i]` is what `charges[i]`'s bucket holds now; `retryAfterMs[i]` is set only when that bucket is short. */
  | { readonly kind: 'checked'; readonly charges: readonly Charge[]; readonly remaining: readonly number[]; readonly retryAfterMs: readonly (number | null | undefined)[] }
  | { readonly kind: 'store_error'; readonly error: unknown };

/** What each bucket holds now and, for a short one, how long until it fits: one store call that writes nothing. */
interface Check {
  remaining: number[];
  retryAfterMs: (number | null | undefined)[];
}

/**
 * Prices an operation and checks it against its buckets with the store's
 * check-only call: nothing is written, no resolver runs. Throws what
 * `Limiter.decide` throws for an operation it refuses or a bad key.
 */
export async function dryRun<TContext>(limiter: Limiter<TContext>, input: OperationInput<TContext>): Promise<DryRun> {
  const charges = await limiter.charges(input);
  if (charges === null) return { kind: 'free' };
  const { store, storeTimeoutMs } = limiter.settings;
  try {
    const check = await withTimeout(
      Promise.resolve().then(() => checkAll(store, charges)),
      storeTimeoutMs,
    );
    return { kind: 'checked', charges, ...check };
  } catch (error) {
    input.logger.warn(`graphql-token-bucket: store failed, cannot check the operation: ${describeError(error)}`);
    return { kind: 'store_error', error };
  }
}

/** `extensions.rateLimit` of a `GraphQL-Cost: validate` answer. */
export function dryRunReport(dry: Extract<DryRun, { kind: 'checked' }>): Record<string, BucketCheck> {
  const report: Record<string, BucketCheck> = {};
  dry.charges.forEach(({ bucket, cost, measured }, i) => {
    const check: BucketCheck = { cost, remaining: dry.remaining[i] ?? 0, capacity: bucket.capacity };
    const wait = dry.retryAfterMs[i];
    if (wait !== undefined) {
      if (measured) check.wouldDeny = true;
      else check.retryAfter = wait === null ? null : wait / 1000;
    }
    report[bucket.name] = check;
  });
  return report;
}

async function checkAll(store: BucketStore, charges: readonly Charge[]): Promise<Check> {
  // Measured or not, every bucket is checked as if enforced; the report tells them apart. A cost
  // above the capacity never fits, however large (past 2^53 no store takes it): the store is
  // asked only what the bucket holds, and the answer for that bucket is "never".
  const requests: AcquireRequest[] = charges.map(({ bucket, key, cost }) => ({ bucket, key, cost: Math.min(cost, bucket.capacity) }));
  if (store.checkAll) {
    const answer = await store.checkAll(requests);
    const retryAfterMs: (number | null | undefined)[] = requests.map(() => undefined);
    for (const { index, retryAfterMs: wait } of answer.denied) retryAfterMs[index] = wait;
    charges.forEach(({ bucket, cost }, i) => {
      if (cost > bucket.capacity) retryAfterMs[i] = null;
    });
    return { remaining: answer.remaining, retryAfterMs };
  }
  // A store without a check-only call: a cost-0 acquire reads a bucket and takes nothing.
  const remaining: number[] = [];
  const retryAfterMs: (number | null | undefined)[] = [];
  for (const { bucket, key, cost } of charges) {
    const answer = await store.acquire(bucket, key, 0);
    const left = answer.allowed ? answer.remaining : 0;
    remaining.push(left);
    if (cost > bucket.capacity) retryAfterMs.push(null);
    // Costs are whole tokens, so the whole tokens held tell a denial exactly; the wait, from
    // them, errs long by less than one token's refill.
    else if (cost > left) retryAfterMs.push(Math.ceil((cost - left) / bucket.rate.tokensPerMs));
    else retryAfterMs.push(undefined);
  }
  return { remaining, retryAfterMs };
}
