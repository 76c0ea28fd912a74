import type { TokenBucket } from '../token-bucket.js';

/** 2^53: every whole number below it is an exact double. */
export const EXACT = 2 ** 53;

/**
 * A bucket in the units of the stores' arithmetic (lua/acquire.lua): with
 * the rate reduced to `tokens` per `period` µs, a token is `period` level
 * units and a microsecond of refill `tokens` units, so every content is a
 * whole number of units and every step exact while below 2^53.
 */
export interface BucketTerms {
  readonly capacity: number;
  /** Tokens per period, divided by gcd(tokens, periodUs). */
  readonly tokens: number;
  /** The period in µs, divided by the same gcd. */
  readonly period: number;
  /** capacity × period: a full bucket in level units. */
  readonly full: number;
  /** True when `full` reaches 2^53: capacities and costs then travel as times (`timeOf`). */
  readonly huge: boolean;
  /** For a huge bucket, a full refill as [whole µs, units of 1/tokens µs]. */
  readonly fullTime: readonly [number, number];
  /** A full refill in whole µs, rounded up: how far ahead of now a state can lie. */
  readonly refillUs: number;
}

const cache = new WeakMap<TokenBucket, BucketTerms>();

function gcd(a: number, b: number): number {
  while (b !== 0) [a, b] = [b, a % b];
  return a;
}

/** The terms of a bucket, computed once per TokenBucket. */
export function termsOf(bucket: TokenBucket): BucketTerms {
  let terms = cache.get(bucket);
  if (terms === undefined) {
    const divisor = gcd(bucket.rate.tokens, bucket.rate.periodUs);
    const tokens = bucket.rate.tokens / divisor;
    const period = bucket.rate.periodUs / divisor;
    const full = bucket.capacity * period;
    const huge = !(full < EXACT);
    const [q, r] = exactTime(bucket.capacity, tokens, period);
    terms = { capacity: bucket.capacity, tokens, period, full, huge, fullTime: huge ? [q, r] : [0, 0], refillUs: r === 0 ? q : q + 1 };
    cache.set(bucket, terms);
  }
  return terms;
}

/** The refill time of `count` tokens, exactly: [whole µs, units of 1/tokens µs]. */
export function timeOf(count: number, terms: BucketTerms): [number, number] {
  return exactTime(count, terms.tokens, terms.period);
}

/** `timeOf`, in doubles while `count` × period stays below 2^53 (every take a bucket admits, unless huge). */
export function refillTime(count: number, terms: BucketTerms): [number, number] {
  const units = count * terms.period;
  if (!(units < EXACT)) return timeOf(count, terms);
  const T = terms.tokens;
  if (T === 1) return [units, 0];
  const q = Math.floor(units / T);
  return [q, units - q * T];
}

function exactTime(count: number, tokens: number, period: number): [number, number] {
  const units = BigInt(count) * BigInt(period);
  const t = BigInt(tokens);
  return [Number(units / t), Number(units % t)];
}

/** True when two buckets have the same capacity and rate (one name may not mean two definitions in a call). */
export function sameDefinition(a: TokenBucket, b: TokenBucket): boolean {
  return a === b || (a.capacity === b.capacity && a.rate.tokens === b.rate.tokens && a.rate.periodUs === b.rate.periodUs);
}
