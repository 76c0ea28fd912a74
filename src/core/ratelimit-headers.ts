import type { TokenBucket } from '../token-bucket.js';
import type { Charge, Decision } from './limiter.js';
import type { Refunded } from './refunds.js';

/**
 * The IETF RateLimit header fields (draft-ietf-httpapi-ratelimit-headers,
 * §3 and §4 of draft -11): two Structured Field Lists (RFC 9651), one item
 * per bucket, each item a String naming the bucket (bucket names are
 * `[A-Za-z0-9_.-]`, valid in a String as they are) with Integer parameters.
 *
 *     RateLimit-Policy: "api";q=1000;w=60
 *     RateLimit: "api";r=993;t=1
 */

/** Default of `rateLimitHeaders`: no RateLimit header fields. */
export const DEFAULT_RATE_LIMIT_HEADERS = false;

/** The response header fields, as lowercase names (Apollo Server's `HeaderMap` and `Headers` keep them so). */
export const RATE_LIMIT_POLICY_HEADER = 'ratelimit-policy';
export const RATE_LIMIT_HEADER = 'ratelimit';

/**
 * The largest Structured Field Integer (RFC 9651 §3.3.1: at most 15 digits).
 * A capacity up to 2^53 would not fit; a larger quota is sent as this.
 */
const SF_INTEGER_MAX = 999_999_999_999_999;

const MICROSECONDS_PER_SECOND = 1_000_000n;

/** `⌈a / b⌉` of non-negative integers, exact whatever their size. */
function ceilDiv(a: bigint, b: bigint): bigint {
  return (a + b - 1n) / b;
}

/** Seconds, rounded up, that `deficit` tokens take to refill at the bucket's rate. */
function refillSeconds(bucket: TokenBucket, deficit: number): number {
  if (deficit <= 0) return 0;
  const { tokens, periodUs } = bucket.rate;
  return Number(ceilDiv(BigInt(deficit) * BigInt(periodUs), BigInt(tokens) * MICROSECONDS_PER_SECOND));
}

function sfInteger(value: number): number {
  return Math.min(Math.max(0, Math.floor(value)), SF_INTEGER_MAX);
}

// A bucket's policy item never changes: built once per bucket.
const policies = new WeakMap<TokenBucket, string>();

/**
 * `"api";q=1000;w=60`: `q` the capacity, `w` the seconds an empty bucket takes
 * to refill, rounded up. A bucket of capacity 0 has no window (`w` must be
 * non-zero), so it is sent without one.
 */
export function rateLimitPolicyItem(bucket: TokenBucket): string {
  let item = policies.get(bucket);
  if (item === undefined) {
    const window = refillSeconds(bucket, bucket.capacity);
    item = `"${bucket.name}";q=${sfInteger(bucket.capacity)}${window > 0 ? `;w=${window}` : ''}`;
    policies.set(bucket, item);
  }
  return item;
}

/**
 * `"api";r=993;t=1`: `r` the whole tokens left, `t` the seconds until the
 * bucket is full again, rounded up. Tokens are fractional in the store and `r`
 * is rounded down, so `t` (counted from `r`) is never short.
 */
export function rateLimitItem(bucket: TokenBucket, remaining: number): string {
  const r = Math.min(Math.max(0, Math.floor(remaining)), bucket.capacity);
  return `"${bucket.name}";r=${sfInteger(r)};t=${refillSeconds(bucket, bucket.capacity - r)}`;
}

/**
 * The RateLimit fields of one HTTP response: every bucket charged by its
 * operations, once each. An HTTP batch shares one head, so a bucket charged by
 * several of its operations keeps the lowest `remaining` (the latest state of
 * that bucket the client was told).
 */
export class RateLimitFields {
  private readonly buckets = new Map<string, { bucket: TokenBucket; remaining: number | undefined }>();

  /**
   * Adds a bucket, with the whole tokens it holds now (`undefined` when the
   * store was not asked: only its policy is known).
   */
  add(bucket: TokenBucket, remaining: number | undefined): void {
    const known = this.buckets.get(bucket.name);
    if (known === undefined) {
      this.buckets.set(bucket.name, { bucket, remaining });
    } else if (remaining !== undefined && (known.remaining === undefined || remaining < known.remaining)) {
      known.remaining = remaining;
    }
  }

  /**
   * Adds what a decision charged: an admitted operation's buckets with what
   * they hold (after its refund, if any), a denied one's with what the store
   * said they hold, or only the policy of a bucket whose capacity the cost
   * exceeds (the store was not asked).
   */
  addDecision(decision: Decision, refunded?: Refunded): void {
    switch (decision.kind) {
      case 'allowed':
        this.addCharges(decision.charges, refunded?.remaining ?? decision.remaining);
        return;
      case 'denied':
        if (decision.charges === undefined) this.add(decision.bucket, undefined);
        else this.addCharges(decision.charges, decision.remaining);
        return;
      default:
        return;
    }
  }

  /** Adds each charge's bucket with `remaining[i]`, the whole tokens it holds now (undefined: not known). */
  addCharges(charges: readonly Charge[], remaining: readonly (number | undefined)[] | undefined): void {
    charges.forEach(({ bucket }, i) => this.add(bucket, remaining?.[i]));
  }

  get size(): number {
    return this.buckets.size;
  }

  /** `RateLimit-Policy`: one item per bucket, joined by `, `. */
  policy(): string {
    return Array.from(this.buckets.values(), ({ bucket }) => rateLimitPolicyItem(bucket)).join(', ');
  }

  /** `RateLimit`: one item per bucket whose tokens are known; `undefined` when none is. */
  rateLimit(): string | undefined {
    const items: string[] = [];
    for (const { bucket, remaining } of this.buckets.values()) {
      if (remaining !== undefined) items.push(rateLimitItem(bucket, remaining));
    }
    return items.length === 0 ? undefined : items.join(', ');
  }

  /** Writes both fields with `set(name, value)` (a `HeaderMap`, `Headers`, …), replacing earlier values. */
  writeTo(headers: { set(name: string, value: string): unknown }): void {
    if (this.buckets.size === 0) return;
    headers.set(RATE_LIMIT_POLICY_HEADER, this.policy());
    const rateLimit = this.rateLimit();
    if (rateLimit !== undefined) headers.set(RATE_LIMIT_HEADER, rateLimit);
  }
}

/**
 * The fields of each HTTP response, keyed by what its operations share: Apollo
 * Server's response head (one per HTTP request, batch included), GraphQL
 * Yoga's `Request`.
 */
export class RateLimitFieldsByResponse {
  private readonly fields = new WeakMap<object, RateLimitFields>();

  for(response: object): RateLimitFields {
    let fields = this.fields.get(response);
    if (fields === undefined) {
      fields = new RateLimitFields();
      this.fields.set(response, fields);
    }
    return fields;
  }

  get(response: object): RateLimitFields | undefined {
    return this.fields.get(response);
  }
}
