import { TokenBucket } from '../token-bucket.js';
import type { AcquireRequest, Admission, BatchAdmission, BatchCheck, BucketKey, BucketStore, DeniedRequest } from './bucket-store.js';
import { sameDefinition } from './bucket-terms.js';

/**
 * The most requests one `acquireAll`, `checkAll` or `refundAll` call takes.
 * An operation charges one request per bucket, so this is far above any
 * schema; it keeps one call's script arguments and reply bounded.
 */
export const MAX_BATCH_REQUESTS = 1000;

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

/**
 * The identity as a string: `1`, `"1"` and `1n` are the same key, and so are
 * `1e21`, `"1000000000000000000000"` and `10n ** 21n`: an integer number is
 * written in full digits, as a BigInt of its value is (`String(1e21)` would
 * be `"1e+21"`).
 */
export function keyString(key: BucketKey): string {
  switch (typeof key) {
    case 'string':
      return key;
    case 'bigint':
      return key.toString();
    case 'number':
      if (!Number.isFinite(key)) throw new RangeError(`a bucket key must be a finite number, got ${String(key)}`);
      return Number.isInteger(key) ? BigInt(key).toString() : String(key);
    default:
      throw new TypeError(`a bucket key must be a string, number or bigint, got ${typeof key}`);
  }
}

/** Bucket names cannot hold NUL, so the pair stays unambiguous. */
export function pairKey(bucket: TokenBucket, key: string): string {
  return `${bucket.name}\u0000${key}`;
}

/**
 * Checks every request before anything is sent or written, and returns each
 * request's key as a string. One (bucket name, key) pair must mean one
 * capacity and rate within a call.
 */
export function validateRequests(requests: readonly AcquireRequest[], what = 'acquireAll'): string[] {
  if (!Array.isArray(requests)) throw new TypeError(`${what} takes an array of { bucket, key, cost }`);
  if (requests.length > MAX_BATCH_REQUESTS) {
    throw new RangeError(`${what} takes at most ${MAX_BATCH_REQUESTS} requests per call, got ${requests.length}`);
  }
  const keys: string[] = [];
  for (const r of requests) {
    if (r === null || typeof r !== 'object') throw new TypeError(`${what} takes an array of { bucket, key, cost }`);
    assertBucket(r.bucket);
    const key = keyString(r.key);
    assertCost(r.cost, r.bucket);
    if (r.measure !== undefined && typeof r.measure !== 'boolean') {
      throw new TypeError(`bucket "${r.bucket.name}": measure must be a boolean, got ${typeof r.measure}`);
    }
    keys.push(key);
  }
  if (requests.length > 1) assertOneDefinitionPerPair(requests, keys);
  return keys;
}

function assertOneDefinitionPerPair(requests: readonly AcquireRequest[], keys: readonly string[]): void {
  const clash = (a: TokenBucket, b: TokenBucket): never => {
    throw new RangeError(`bucket "${b.name}" appears twice in one call with a different capacity or rate`);
  };
  if (requests.length <= 16) {
    // an operation's few buckets: comparing pairs beats building a map
    for (let i = 1; i < requests.length; i++) {
      const b = requests[i]!.bucket;
      for (let j = 0; j < i; j++) {
        const a = requests[j]!.bucket;
        if (a.name === b.name && keys[i] === keys[j] && !sameDefinition(a, b)) clash(a, b);
      }
    }
    return;
  }
  const seen = new Map<string, TokenBucket>();
  requests.forEach(({ bucket }, i) => {
    const id = pairKey(bucket, keys[i]!);
    const other = seen.get(id);
    if (other === undefined) seen.set(id, bucket);
    else if (!sameDefinition(other, bucket)) clash(other, bucket);
  });
}

/** The wait for every short request: null if any never fits, else the longest. */
export function longestWait(denied: readonly DeniedRequest[]): number | null {
  let wait: number | null = 0;
  for (const d of denied) {
    if (d.retryAfterMs === null) return null;
    wait = Math.max(wait, d.retryAfterMs);
  }
  return wait;
}

/** A denial: nothing was taken. */
export function denial(denied: DeniedRequest[], remaining: number[]): BatchAdmission {
  return { allowed: false, retryAfterMs: longestWait(denied), denied, remaining };
}

/** A check's answer. */
export function checked(denied: DeniedRequest[], remaining: number[]): BatchCheck {
  return { allowed: denied.length === 0, retryAfterMs: longestWait(denied), remaining, denied };
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
 * interface) is asked one request at a time, enforced ones first: it stops at
 * the first enforced denial, but tokens already taken from earlier buckets
 * stay taken, and measured requests are taken even when another is short.
 * `remaining` on a denial holds what the answered requests reported (0 for the rest).
 */
export async function acquireAllFrom(store: BucketStore, requests: readonly AcquireRequest[]): Promise<BatchAdmission> {
  if (store.acquireAll) return store.acquireAll(requests);
  const remaining: number[] = requests.map(() => 0);
  const wouldDeny: DeniedRequest[] = [];
  const order = [...requests.keys()].sort((a, b) => Number(requests[a]!.measure === true) - Number(requests[b]!.measure === true));
  for (const index of order) {
    const { bucket, key, cost, measure } = requests[index]!;
    const answer = await store.acquire(bucket, key, cost);
    if (answer.allowed) {
      remaining[index] = answer.remaining;
    } else if (measure === true) {
      wouldDeny.push({ index, retryAfterMs: answer.retryAfterMs });
    } else {
      return denial([{ index, retryAfterMs: answer.retryAfterMs }], remaining);
    }
  }
  return wouldDeny.length > 0 ? { allowed: true, remaining, wouldDeny: wouldDeny.sort((a, b) => a.index - b.index) } : { allowed: true, remaining };
}

/** Request indexes with the enforced requests first, each group in its given order. */
export function measuredLast(requests: readonly AcquireRequest[]): number[] {
  const enforced: number[] = [];
  const measured: number[] = [];
  requests.forEach((r, i) => (r.measure === true ? measured : enforced).push(i));
  return measured.length === 0 ? enforced : enforced.concat(measured);
}

/** Values in `order`'s positions put back in request order. */
export function unorder<T>(values: readonly T[], order: readonly number[]): T[] {
  const out = new Array<T>(values.length);
  order.forEach((index, position) => (out[index] = values[position]!));
  return out;
}

/** The requests of a refund merged per (bucket, key) pair, in first-seen order: one take is bounded once. */
export function refundPairs(
  requests: readonly AcquireRequest[],
  keys: readonly string[],
): { id: string; bucket: TokenBucket; key: string; tokens: number; indexes: number[] }[] {
  const pairs = new Map<string, { id: string; bucket: TokenBucket; key: string; tokens: number; indexes: number[] }>();
  requests.forEach(({ bucket, cost }, index) => {
    const key = keys[index]!;
    const id = pairKey(bucket, key);
    const pair = pairs.get(id);
    if (pair === undefined) pairs.set(id, { id, bucket, key, tokens: cost, indexes: [index] });
    else {
      pair.tokens = Math.min(Number.MAX_SAFE_INTEGER, pair.tokens + cost);
      pair.indexes.push(index);
    }
  });
  return [...pairs.values()];
}
