import { TokenBucket } from '../token-bucket.js';
import type { AcquireRequest, Admission, BatchAdmission, BucketKey, BucketStore, DeniedRequest } from './bucket-store.js';

/** Checks a cost before anything is written: a non-negative safe integer. */
export function assertCost(cost: unknown, bucket: TokenBucket): asserts cost is number {
  if (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 0) {
    throw new RangeError(`bucket "${bucket.name}": cost must be a non-negative safe integer, got ${String(cost)}`);
  }
}

export function assertBucket(bucket: unknown): asserts bucket is TokenBucket {
  if (!(bucket instanceof TokenBucket)) {
    throw new TypeError('expected a TokenBucket');
  }
}

/** The identity as a string: `1`, `"1"` and `1n` are the same key. */
export function keyString(key: BucketKey): string {
  switch (typeof key) {
    case 'string':
      return key;
    case 'bigint':
      return key.toString();
    case 'number':
      if (!Number.isFinite(key)) throw new RangeError(`a bucket key must be a finite number, got ${String(key)}`);
      return String(key);
    default:
      throw new TypeError(`a bucket key must be a string, number or bigint, got ${typeof key}`);
  }
}

export function validateRequests(requests: readonly AcquireRequest[]): void {
  if (!Array.isArray(requests)) throw new TypeError('acquireAll takes an array of { bucket, key, cost }');
  for (const r of requests) {
    assertBucket(r.bucket);
    keyString(r.key);
    assertCost(r.cost, r.bucket);
  }
}

/** Folds per-request denials into one answer: never if any is never, else the longest wait. */
export function denial(denied: DeniedRequest[]): BatchAdmission {
  let retryAfterMs: number | null = 0;
  for (const d of denied) {
    if (d.retryAfterMs === null) {
      retryAfterMs = null;
      break;
    }
    retryAfterMs = Math.max(retryAfterMs, d.retryAfterMs);
  }
  return { allowed: false, retryAfterMs, denied };
}

/** One request as an all-or-nothing call of one: both stores answer `acquire` this way. */
export async function acquireOne(
  store: Required<Pick<BucketStore, 'acquireAll'>>,
  bucket: TokenBucket,
  key: BucketKey,
  cost: number,
): Promise<Admission> {
  assertBucket(bucket);
  assertCost(cost, bucket);
  const result = await store.acquireAll([{ bucket, key, cost }]);
  return result.allowed
    ? { allowed: true, remaining: result.remaining[0] ?? 0 }
    : { allowed: false, retryAfterMs: result.retryAfterMs };
}

/**
 * `acquireAll` on any store. A store without it (only the `acquire` of the
 * interface) is asked one request at a time: it stops at the first denial,
 * but tokens already taken from earlier buckets stay taken.
 */
export async function acquireAllFrom(store: BucketStore, requests: readonly AcquireRequest[]): Promise<BatchAdmission> {
  if (store.acquireAll) return store.acquireAll(requests);
  const remaining: number[] = [];
  for (const [index, { bucket, key, cost }] of requests.entries()) {
    const answer = await store.acquire(bucket, key, cost);
    if (!answer.allowed) return denial([{ index, retryAfterMs: answer.retryAfterMs }]);
    remaining.push(answer.remaining);
  }
  return { allowed: true, remaining };
}
