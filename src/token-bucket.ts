import { Rate } from './rate.js';

const NAME = /^[A-Za-z0-9_.-]{1,64}$/;

/** The longest full refill a bucket may have: an empty bucket is full again within 100 years. */
export const MAX_REFILL_YEARS = 100;

/** MAX_REFILL_YEARS in microseconds, in Julian years of 365.25 days. */
const MAX_REFILL_US = BigInt(MAX_REFILL_YEARS) * 31_557_600_000_000n;

/**
 * A named bucket definition: up to `capacity` tokens, refilled at `rate`.
 * One definition serves every identity; each (bucket, key) pair has its own
 * tokens in the store.
 *
 * A full refill (capacity × period ÷ tokens) must take at most
 * `MAX_REFILL_YEARS`: the stores keep a bucket as the time it is full again,
 * and bound every stored time by it.
 */
export class TokenBucket {
  /** What `@tokenBucket(name:)`, `rules` and reports call it: 1-64 characters of `[A-Za-z0-9_.-]`. */
  readonly name: string;
  /** The most tokens it holds, and what a new identity starts with (the burst). */
  readonly capacity: number;
  /** How fast it refills. */
  readonly rate: Rate;

  /**
   * @param name 1-64 characters of `[A-Za-z0-9_.-]`, else a `RangeError`.
   * @param capacity The burst: a non-negative safe integer, else a
   *   `RangeError` (0 admits only operations that cost nothing).
   * @param rate How fast an emptied bucket refills, e.g. `Rate.perMinute(100)`.
   *   A bucket whose full refill (capacity × period ÷ tokens) takes longer
   *   than `MAX_REFILL_YEARS` (100) years is a `RangeError`.
   * No defaults: every bucket says all three.
   */
  constructor(name: string, capacity: number, rate: Rate) {
    if (typeof name !== 'string' || !NAME.test(name)) {
      throw new RangeError(`a bucket name must be 1-64 characters of [A-Za-z0-9_.-], got ${JSON.stringify(name)}`);
    }
    if (!Number.isSafeInteger(capacity) || capacity < 0) {
      throw new RangeError(`bucket "${name}": capacity must be a non-negative safe integer, got ${String(capacity)}`);
    }
    if (!(rate instanceof Rate)) {
      throw new RangeError(`bucket "${name}": rate must be a Rate, e.g. Rate.perSecond(10)`);
    }
    if (BigInt(capacity) * BigInt(rate.periodUs) > BigInt(rate.tokens) * MAX_REFILL_US) {
      throw new RangeError(
        `bucket "${name}": ${capacity} tokens at ${rate.toString()} take longer than ${MAX_REFILL_YEARS} years to refill; ` +
          'lower the capacity or refill faster',
      );
    }
    this.name = name;
    this.capacity = capacity;
    this.rate = rate;
    // The stores compute a bucket's terms once: a capacity changed afterwards would be ignored.
    if (new.target === TokenBucket) Object.freeze(this);
  }
}
