// The reference model of SPEC §1 that the stores are checked against.
//
// It is the SPEC's arithmetic evaluated exactly, not a second copy of a
// store: time is a whole number of microseconds and a bucket's content is
// kept as `level = tokens × periodUs`, so refilling adds `rate.tokens` per
// microsecond and every comparison, floor and ceil is done on integers
// (bigint). Wherever a store rounds a float the wrong way, the model and the
// store disagree.
import type { AcquireRequest, Admission, BatchAdmission, BatchCheck, BucketKey, DeniedRequest } from '../../src/stores/bucket-store.js';
import type { TokenBucket } from '../../src/token-bucket.js';

interface Stored {
  /** tokens × periodUs; may be negative in a model used as an upper bound */
  level: bigint;
  /** µs */
  at: bigint;
}

/** What `reset` may answer: a bucket full again for less than the store's TTL rounding may still be there. */
export type ResetAnswer = boolean | 'either';

/** Milliseconds (possibly fractional) to whole microseconds. */
export function toMicroseconds(ms: number): bigint {
  return BigInt(Math.round(ms * 1000));
}

/** `1`, `"1"` and `1n` are one identity, as in the stores. */
export function pairId(bucket: TokenBucket, key: BucketKey): string {
  return `${bucket.name}\u0000${String(key)}`;
}

function periodOf(bucket: TokenBucket): bigint {
  return BigInt(bucket.rate.periodUs);
}

function tokensOf(bucket: TokenBucket): bigint {
  return BigInt(bucket.rate.tokens);
}

function ceilDiv(a: bigint, b: bigint): bigint {
  return a >= 0n ? (a + b - 1n) / b : -(-a / b);
}

function floorDiv(a: bigint, b: bigint): bigint {
  return a >= 0n ? a / b : -ceilDiv(-a, b);
}

/**
 * Every (bucket, key) pair of one store, per SPEC §1:
 *
 *     refill = tokens_per_period / period
 *     tokens = min(capacity, tokens + (now - ts) * refill)
 *     cost > capacity  → denied, retryAfter null
 *     tokens >= cost   → tokens -= cost; allowed, remaining = floor(tokens)
 *     else             → denied, retryAfter = ceil((cost - tokens) / refill) ms
 *
 * A denial takes nothing; a pair never seen is full. Times are in ms
 * (fractions are kept to the microsecond).
 */
export class ReferenceBucket {
  readonly #stored = new Map<string, Stored>();

  clone(): ReferenceBucket {
    const copy = new ReferenceBucket();
    for (const [id, stored] of this.#stored) copy.#stored.set(id, { ...stored });
    return copy;
  }

  /** The exact content at `nowMs`, as tokens × periodUs. */
  level(bucket: TokenBucket, key: BucketKey, nowMs: number): bigint {
    return this.#levelAt(pairId(bucket, key), bucket, toMicroseconds(nowMs));
  }

  /** Overrides the content at `nowMs` (tokens × periodUs); for bounding a store the model cannot time exactly. */
  setLevel(bucket: TokenBucket, key: BucketKey, nowMs: number, level: bigint): void {
    this.#stored.set(pairId(bucket, key), { level, at: toMicroseconds(nowMs) });
  }

  /** The content at `nowMs` in tokens (for messages). */
  tokens(bucket: TokenBucket, key: BucketKey, nowMs: number): number {
    return Number(this.level(bucket, key, nowMs)) / bucket.rate.periodUs;
  }

  acquire(bucket: TokenBucket, key: BucketKey, cost: number, nowMs: number): Admission {
    const result = this.acquireAll([{ bucket, key, cost }], nowMs);
    return result.allowed
      ? { allowed: true, remaining: result.remaining[0]! }
      : { allowed: false, retryAfterMs: result.retryAfterMs };
  }

  /**
   * All or nothing. Requests are taken in order, so a pair named twice pays
   * twice; `remaining[i]` is what request i left. A denial lists every request
   * that was short when its turn came, counting what the requests before it
   * in the call asked of the same pair (a request after a short one still
   * waits for both): null when the pair is asked for more than its capacity
   * in total. Its `retryAfterMs` is how long until the *whole* call could be
   * admitted if nothing else took tokens, null when it never can.
   */
  acquireAll(requests: readonly AcquireRequest[], nowMs: number): BatchAdmission {
    const now = toMicroseconds(nowMs);
    const order = [...requests.keys()];
    const enforced = order.filter((i) => requests[i]!.measure !== true);
    const measured = order.filter((i) => requests[i]!.measure === true);
    const first = this.#evaluate(requests, enforced, now);
    if (first.short.length > 0) {
      const wait = measured.length === 0 ? this.#wholeCallWait(requests, now) : this.#wholeCallWait(enforced.map((i) => requests[i]!), now);
      return { allowed: false, retryAfterMs: wait, denied: first.short, remaining: this.#holdNow(requests, now) };
    }
    if (measured.length === 0) {
      this.#commit(first.working, now);
      return { allowed: true, remaining: first.remaining };
    }
    // Measured requests: taken only when every request of the call would be admitted.
    const all = this.#evaluate(requests, [...enforced, ...measured], now);
    if (all.short.length === 0) {
      this.#commit(all.working, now);
      return { allowed: true, remaining: all.remaining };
    }
    this.#commit(first.working, now);
    const remaining = first.remaining.slice();
    for (const i of measured) {
      const { bucket, key } = requests[i]!;
      remaining[i] = Number(floorDiv(first.working.get(pairId(bucket, key)) ?? this.#levelAt(pairId(bucket, key), bucket, now), periodOf(bucket)));
    }
    return { allowed: true, remaining, wouldDeny: all.short.filter((d) => requests[d.index]!.measure === true) };
  }

  /** What acquireAll would answer at `nowMs`, every request enforced, without taking anything. */
  checkAll(requests: readonly AcquireRequest[], nowMs: number): BatchCheck {
    const now = toMicroseconds(nowMs);
    const { short } = this.#evaluate(requests, [...requests.keys()], now);
    let retryAfterMs: number | null = 0;
    for (const d of short) retryAfterMs = d.retryAfterMs === null || retryAfterMs === null ? null : Math.max(retryAfterMs, d.retryAfterMs);
    return { allowed: short.length === 0, retryAfterMs, remaining: this.#holdNow(requests, now), denied: short };
  }

  /** Whole tokens each request's bucket holds at `now`. */
  #holdNow(requests: readonly AcquireRequest[], now: bigint): number[] {
    return requests.map(({ bucket, key }) => Number(floorDiv(this.#levelAt(pairId(bucket, key), bucket, now), periodOf(bucket))));
  }

  #commit(working: Map<string, bigint>, now: bigint): void {
    for (const [id, level] of working) this.#stored.set(id, { level, at: now });
  }

  /** Requests `indexes` in that order, each counting what the ones before it asked of its pair. */
  #evaluate(
    requests: readonly AcquireRequest[],
    indexes: readonly number[],
    now: bigint,
  ): { working: Map<string, bigint>; remaining: number[]; short: DeniedRequest[] } {
    const working = new Map<string, bigint>();
    const asked = new Map<string, number>();
    const remaining: number[] = requests.map(() => 0);
    const short: DeniedRequest[] = [];
    for (const index of indexes) {
      const { bucket, key, cost } = requests[index]!;
      const id = pairId(bucket, key);
      const period = periodOf(bucket);
      const level = (working.get(id) ?? this.#levelAt(id, bucket, now)) - BigInt(cost) * period;
      const total = (asked.get(id) ?? 0) + cost;
      working.set(id, level);
      asked.set(id, total);
      if (total > bucket.capacity) {
        short.push({ index, retryAfterMs: null });
      } else if (level >= 0n) {
        remaining[index] = Number(floorDiv(level, period));
      } else {
        short.push({ index, retryAfterMs: Number(ceilDiv(-level, tokensOf(bucket) * 1000n)) });
      }
    }
    short.sort((a, b) => a.index - b.index);
    return { working, remaining, short };
  }

  /**
   * True when the pair's bucket is not full at `nowMs` (a store must still
   * hold it), false when it has been full for at least `graceMs` (the store's
   * expiry, rounded up to whole ms, has passed), else either.
   */
  reset(bucket: TokenBucket, key: BucketKey, nowMs: number, graceMs: number): ResetAnswer {
    const id = pairId(bucket, key);
    const stored = this.#stored.get(id);
    this.#stored.delete(id);
    if (stored === undefined) return false;
    const full = BigInt(bucket.capacity) * periodOf(bucket);
    const now = toMicroseconds(nowMs);
    if (this.#levelAt(id, bucket, now, stored) < full) return true;
    const fullAt = stored.at + ceilDiv(full - stored.level, tokensOf(bucket));
    return now >= fullAt + toMicroseconds(graceMs) ? false : 'either';
  }

  #levelAt(id: string, bucket: TokenBucket, now: bigint, stored = this.#stored.get(id)): bigint {
    const full = BigInt(bucket.capacity) * periodOf(bucket);
    if (stored === undefined) return full;
    const elapsed = now > stored.at ? now - stored.at : 0n;
    const level = stored.level + elapsed * tokensOf(bucket);
    return level < full ? level : full;
  }

  #wholeCallWait(requests: readonly AcquireRequest[], now: bigint): number | null {
    const totals = new Map<string, { bucket: TokenBucket; key: BucketKey; cost: number }>();
    for (const { bucket, key, cost } of requests) {
      if (cost > bucket.capacity) return null;
      const id = pairId(bucket, key);
      const total = totals.get(id);
      if (total) total.cost += cost;
      else totals.set(id, { bucket, key, cost });
    }
    let wait = 0n;
    for (const [id, { bucket, cost }] of totals) {
      if (cost > bucket.capacity) return null;
      const short = BigInt(cost) * periodOf(bucket) - this.#levelAt(id, bucket, now);
      if (short > 0n) {
        const ms = ceilDiv(short, tokensOf(bucket) * 1000n);
        if (ms > wait) wait = ms;
      }
    }
    return Number(wait);
  }
}
