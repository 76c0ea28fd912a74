import { TokenBucket } from '../token-bucket.js';
import type { StoredState } from './bucket-arithmetic.js';
import { levelAfterTake, runAcquire, runRefund, stateOfLevel } from './bucket-arithmetic.js';
import type { CallRequest, CallResult } from './bucket-arithmetic.js';
import type { AcquireRequest, Admission, BatchAdmission, BatchCheck, BucketKey, BucketStore, DeniedRequest } from './bucket-store.js';
import type { BucketTerms } from './bucket-terms.js';
import { termsOf, timeOf } from './bucket-terms.js';
import type { FullAt } from './full-at.js';
import { DEFAULT_MAX_RECEIPTS, ReceiptBook } from './receipts.js';
import { tokensReturned } from './returns.js';
import { acquireOne, assertBucket, assertCost, checked, denial, keyString, measuredLast, pairKey, refundPairs, unorder, validateRequests } from './validate.js';

export interface MemoryStoreOptions {
  /** The clock, in milliseconds. Default: `performance.timeOrigin + performance.now()`. For tests. */
  now?: () => number;
  /**
   * How often buckets that are full again are dropped, in ms: 1 to
   * 2,147,483,647 (the longest a Node timer waits). Default `DEFAULT_SWEEP_INTERVAL_MS` (10,000).
   * No sweep timer runs when `now` is given.
   */
  sweepIntervalMs?: number;
  /**
   * How many (bucket, key) pairs the store remembers its takes of, so that
   * `refund` can give them back. Default `DEFAULT_MAX_RECEIPTS` (10,000); 0
   * turns refunds off.
   */
  maxReceipts?: number;
}

/** Default interval between sweeps of buckets that are full again. */
export const DEFAULT_SWEEP_INTERVAL_MS = 10_000;

/** The longest delay a Node timer honours; longer ones fire after 1 ms. */
const MAX_TIMER_MS = 2 ** 31 - 1;

const systemClock = (): number => performance.timeOrigin + performance.now();

/**
 * Every time the arithmetic handles must stay an exact double: below 2^53
 * µs (the year 2255). A bucket's state is the time it is full again, up to
 * a full refill ahead of the clock (at most 100 years, `MAX_REFILL_YEARS`),
 * so a clock reading plus the bucket's full refill must stay below it.
 */
const EXACT_US = 2 ** 53;

/**
 * Token buckets in this process's memory: the same semantics and the same
 * arithmetic as `RedisStore` (lua/acquire.lua), for development and
 * single-instance servers. A bucket's state is the time at which it is full
 * again; a bucket that is full again is forgotten, so idle identities cost
 * nothing.
 */
export class MemoryStore implements BucketStore {
  /** (bucket, identity) -> when the bucket is full again, in µs */
  private readonly fullAt = new Map<string, StoredState>();
  private readonly now: () => number;
  private readonly sweepIntervalMs: number;
  private readonly receipts: ReceiptBook;
  /** µs, like every time kept here */
  private nextSweep: number;
  private timer: ReturnType<typeof setInterval> | undefined;

  /** @param options `now` (default the system clock), `sweepIntervalMs` (default 10,000) and `maxReceipts` (default 10,000); all optional. */
  constructor(options: MemoryStoreOptions = {}) {
    if (options.now !== undefined && typeof options.now !== 'function') {
      throw new TypeError('MemoryStore option "now" must be a function returning milliseconds');
    }
    const sweep = options.sweepIntervalMs ?? DEFAULT_SWEEP_INTERVAL_MS;
    if (typeof sweep !== 'number' || !Number.isFinite(sweep) || sweep < 1 || sweep > MAX_TIMER_MS) {
      throw new RangeError(`MemoryStore option "sweepIntervalMs" must be between 1 and ${MAX_TIMER_MS} ms, got ${String(sweep)}`);
    }
    const maxReceipts = options.maxReceipts ?? DEFAULT_MAX_RECEIPTS;
    if (!Number.isSafeInteger(maxReceipts) || maxReceipts < 0) {
      throw new RangeError(`MemoryStore option "maxReceipts" must be a non-negative integer, got ${String(maxReceipts)}`);
    }
    this.now = options.now ?? systemClock;
    this.sweepIntervalMs = sweep;
    this.receipts = new ReceiptBook(maxReceipts);
    this.nextSweep = this.nowUs() + sweep * 1000;
    if (options.now === undefined) {
      this.timer = setInterval(() => this.sweep(this.nowUs()), sweep);
      this.timer.unref();
    }
  }

  /** Buckets currently held (those not full again). */
  get size(): number {
    this.sweep(this.nowUs());
    return this.fullAt.size;
  }

  /** Takes `cost` (default 1) tokens from the key's bucket, or nothing when it holds fewer. */
  async acquire(bucket: TokenBucket, key: BucketKey, cost = 1): Promise<Admission> {
    assertBucket(bucket);
    assertCost(cost, bucket);
    const id = pairKey(bucket, keyString(key));
    const now = this.nowFor(bucket);
    if (now >= this.nextSweep) this.sweep(now);
    const terms = termsOf(bucket);
    const L = levelAfterTake(terms, cost, this.read(id, now), now);
    if (L === undefined) return acquireOne(this, bucket, key, cost);
    if (cost > 0) this.take(id, terms, L, cost, now);
    return { allowed: true, remaining: Math.floor(L / terms.period) };
  }

  /**
   * Takes every enforced request's tokens, or none when one of them is
   * short; measured requests (`measure: true`) are taken too when every
   * request would be admitted, and reported in `wouldDeny` otherwise.
   */
  async acquireAll(requests: readonly AcquireRequest[]): Promise<BatchAdmission> {
    const keys = validateRequests(requests);
    if (requests.length === 0) return { allowed: true, remaining: [] };
    const now = this.nowFor(requests);
    const quick = this.takeAll(requests, keys, now);
    if (quick !== undefined) return { allowed: true, remaining: quick };
    const order = measuredLast(requests);
    const enforced = order.filter((i) => requests[i]!.measure !== true).length;
    const result = this.run(requests, keys, order, enforced, false, now);
    if (result.flag === 0) return denial(shortOf(result, order), unorder(result.remaining, order));
    const remaining = unorder(result.remaining, order);
    const ids = requests.map(({ bucket }, i) => pairKey(bucket, keys[i]!));
    order.forEach((index, position) => {
      const { bucket, cost } = requests[index]!;
      const id = ids[index]!;
      // from a full bucket: it left the capacity less this request (unknown for a pair asked for twice)
      const fromFull = remaining[index] === bucket.capacity - cost && ids.indexOf(id) === ids.lastIndexOf(id);
      if (result.fullAt[position] && cost > 0) this.receipts.record(id, termsOf(bucket), cost, now, fromFull);
    });
    if (result.flag === 2) {
      const wouldDeny = shortOf(result, order);
      return { allowed: true, remaining, wouldDeny };
    }
    return { allowed: true, remaining };
  }

  /** What `acquireAll` would answer now; nothing is taken. */
  async checkAll(requests: readonly AcquireRequest[]): Promise<BatchCheck> {
    const keys = validateRequests(requests, 'checkAll');
    if (requests.length === 0) return checked([], []);
    const order = requests.map((_, i) => i);
    const result = this.run(requests, keys, order, requests.length, true, this.nowFor(requests));
    return checked(shortOf(result, order), result.remaining);
  }

  /** Gives back up to `tokens` this store took from the key's bucket (see `refundAll`). */
  async refund(bucket: TokenBucket, key: BucketKey, tokens: number): Promise<void> {
    assertBucket(bucket);
    assertCost(tokens, bucket);
    await this.refundAll([{ bucket, key, cost: tokens }]);
  }

  /**
   * Gives back up to `cost` tokens per request, of those this store took:
   * never more than is still outstanding of them (tokens that have refilled
   * since are not given twice), never above capacity. Resolves to the whole
   * tokens each request's bucket holds after it.
   */
  async refundAll(requests: readonly AcquireRequest[]): Promise<number[]> {
    const keys = validateRequests(requests, 'refundAll');
    const now = this.nowFor(requests);
    const byPair = new Map<string, number>();
    for (const { id, bucket, tokens } of refundPairs(requests, keys)) {
      const terms = termsOf(bucket);
      const claim = this.receipts.claim(id, terms, tokens);
      const given = claim === undefined ? 0 : tokens;
      const step = { id, terms, tokens: given, tokensTime: terms.huge ? timeOf(given, terms) : ([0, 0] as const), bound: claim?.bound ?? [] };
      const result = runRefund(step, this.read(id, now), now);
      if (result.changed) this.write(id, result.state);
      byPair.set(id, result.remaining);
    }
    const left = requests.map(({ bucket }, i) => byPair.get(pairKey(bucket, keys[i]!)) ?? 0);
    tokensReturned(
      this,
      requests.map(({ bucket, key }, i) => ({ bucket, key, left: left[i] })),
    );
    return left;
  }

  async reset(bucket: TokenBucket, key: BucketKey): Promise<boolean> {
    assertBucket(bucket);
    const id = pairKey(bucket, keyString(key));
    const now = this.nowUs();
    const held = this.read(id, now) !== undefined;
    this.fullAt.delete(id);
    this.receipts.forget(id);
    tokensReturned(this, [{ bucket, key }]);
    return held;
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.fullAt.clear();
    this.receipts.clear();
  }

  /**
   * lua/acquire.lua's common case: every request enforced and admitted, on
   * distinct pairs, none huge. The whole tokens left, or undefined when the
   * general path must decide.
   */
  private takeAll(requests: readonly AcquireRequest[], keys: readonly string[], now: number): number[] | undefined {
    const n = requests.length;
    if (now >= this.nextSweep) this.sweep(now);
    const ids: string[] = [];
    const levels: number[] = [];
    for (let i = 0; i < n; i++) {
      const { bucket, cost, measure } = requests[i]!;
      const id = pairKey(bucket, keys[i]!);
      if (measure === true || (n > 1 && ids.includes(id))) return undefined;
      const L = levelAfterTake(termsOf(bucket), cost, this.read(id, now), now);
      if (L === undefined) return undefined;
      ids.push(id);
      levels.push(L);
    }
    return levels.map((L, i) => {
      const { bucket, cost } = requests[i]!;
      const terms = termsOf(bucket);
      if (cost > 0) this.take(ids[i]!, terms, L, cost, now);
      return Math.floor(L / terms.period);
    });
  }

  /** Keeps a bucket left at level `L` after taking `cost`, and the receipt for a refund. */
  private take(id: string, terms: BucketTerms, L: number, cost: number, now: number): void {
    this.write(id, stateOfLevel(terms, L, now));
    this.receipts.record(id, terms, cost, now, L + cost * terms.period === terms.full);
  }

  private run(
    requests: readonly AcquireRequest[],
    keys: readonly string[],
    order: readonly number[],
    enforced: number,
    check: boolean,
    now: number,
  ): CallResult {
    if (now >= this.nextSweep) this.sweep(now);
    const calls: CallRequest[] = order.map((index) => {
      const { bucket, cost } = requests[index]!;
      const terms = termsOf(bucket);
      return { id: pairKey(bucket, keys[index]!), terms, cost, costTime: terms.huge ? timeOf(cost, terms) : [0, 0] };
    });
    const result = runAcquire(calls, enforced, check, (id) => this.read(id, now), now);
    for (const [id, state] of result.writes) this.write(id, state);
    return result;
  }

  /** A bucket full again reads as absent; the sweep (or the next write) removes it. */
  private read(id: string, now: number): StoredState | undefined {
    const state = this.fullAt.get(id);
    return state !== undefined && stateUs(state) <= now ? undefined : state;
  }

  private write(id: string, state: FullAt | null): void {
    if (state === null) this.fullAt.delete(id);
    else this.fullAt.set(id, state.num === 0 ? state.at : state);
  }

  private nowUs(): number {
    const ms = this.now();
    const us = typeof ms === 'number' ? Math.round(ms * 1000) : NaN;
    if (!(us >= 0 && us < EXACT_US)) {
      throw new RangeError(`MemoryStore clock returned ${String(ms)}; it must return milliseconds since the epoch, below 2^53 µs (where its arithmetic is exact)`);
    }
    return us;
  }

  /** The clock, refused where a state of these buckets would lie beyond the exact range. */
  private nowFor(of: TokenBucket | readonly { bucket: TokenBucket }[]): number {
    const now = this.nowUs();
    const refuse = (bucket: TokenBucket): never => {
      throw new RangeError(`MemoryStore clock returned ${now / 1000} ms: bucket "${bucket.name}" would be full again beyond 2^53 µs, where its arithmetic is not exact`);
    };
    if (of instanceof TokenBucket) {
      if (!(now + termsOf(of).refillUs < EXACT_US)) refuse(of);
    } else {
      for (const { bucket } of of) if (!(now + termsOf(bucket).refillUs < EXACT_US)) refuse(bucket);
    }
    return now;
  }

  private sweep(nowUs: number): void {
    this.nextSweep = nowUs + this.sweepIntervalMs * 1000;
    for (const [id, state] of this.fullAt) {
      if (stateUs(state) <= nowUs) this.fullAt.delete(id);
    }
  }
}

/** A state's time in µs, rounded up (for eviction only). */
function stateUs(state: StoredState): number {
  return typeof state === 'number' ? state : state.num === 0 ? state.at : state.at + 1;
}

/** The short requests of a result, by request index. */
function shortOf(result: CallResult, order: readonly number[]): DeniedRequest[] {
  const denied: DeniedRequest[] = [];
  result.waits.forEach((w, position) => {
    if (w !== -2) denied.push({ index: order[position]!, retryAfterMs: w === -1 ? null : w });
  });
  return denied.sort((a, b) => a.index - b.index);
}
