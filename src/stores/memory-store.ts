import type { TokenBucket } from '../token-bucket.js';
import type {
  AcquireRequest,
  Admission,
  BatchAdmission,
  BucketKey,
  BucketStore,
  DeniedRequest,
} from './bucket-store.js';
import { acquireOne, assertBucket, denial, keyString, validateRequests } from './validate.js';

export interface MemoryStoreOptions {
  /** The clock, in milliseconds. Default: `performance.timeOrigin + performance.now()`. For tests. */
  now?: () => number;
  /** How often buckets that are full again are dropped, in ms. Default `DEFAULT_SWEEP_INTERVAL_MS`. */
  sweepIntervalMs?: number;
}

/** Default interval between sweeps of buckets that are full again. */
export const DEFAULT_SWEEP_INTERVAL_MS = 10_000;

/**
 * Refill time below half a microsecond is float noise, not tokens; at rates
 * faster than 2 tokens per microsecond, below a thousandth of a token (as in lua/acquire.lua).
 */
const SLACK_US = 0.5;

const systemClock = (): number => performance.timeOrigin + performance.now();

/**
 * Token buckets in this process's memory: the same semantics and the same
 * arithmetic as `RedisStore` (lua/acquire.lua), for development and
 * single-instance servers. A bucket's state is the microsecond at which it
 * is full again; a bucket that is full again is forgotten, so idle
 * identities cost nothing.
 */
export class MemoryStore implements BucketStore {
  /** (bucket, identity) -> when the bucket is full again, in µs */
  private readonly fullAt = new Map<string, number>();
  private readonly now: () => number;
  private readonly sweepIntervalMs: number;
  /** µs, like every time kept here */
  private nextSweep: number;
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(options: MemoryStoreOptions = {}) {
    if (options.now !== undefined && typeof options.now !== 'function') {
      throw new TypeError('MemoryStore option "now" must be a function returning milliseconds');
    }
    const sweep = options.sweepIntervalMs ?? DEFAULT_SWEEP_INTERVAL_MS;
    if (typeof sweep !== 'number' || !Number.isFinite(sweep) || sweep <= 0) {
      throw new RangeError(`MemoryStore option "sweepIntervalMs" must be a positive number, got ${String(sweep)}`);
    }
    this.now = options.now ?? systemClock;
    this.sweepIntervalMs = sweep;
    this.nextSweep = (this.now() + sweep) * 1000;
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

  acquire(bucket: TokenBucket, key: BucketKey, cost = 1): Promise<Admission> {
    return acquireOne(this, bucket, key, cost);
  }

  async acquireAll(requests: readonly AcquireRequest[]): Promise<BatchAdmission> {
    validateRequests(requests);
    const now = this.nowUs();
    if (now >= this.nextSweep) this.sweep(now);

    // The same steps as lua/acquire.lua: every request of the call counts
    // against its bucket, and only an all-admitted call is written.
    const state = new Map<string, number>();
    const asked = new Map<string, number>();
    const remaining: number[] = [];
    const denied: DeniedRequest[] = [];
    requests.forEach(({ bucket, key, cost }, index) => {
      const id = entryKey(bucket, key);
      const current = state.get(id) ?? Math.max(this.fullAt.get(id) ?? now, now);
      const total = (asked.get(id) ?? 0) + cost;
      asked.set(id, total);
      const interval = bucket.rate.periodUs / bucket.rate.tokens;
      const need = cost * interval;
      let after = current + need;
      // Microsecond times near 2^51 keep quarter-microsecond steps: a cost
      // below that would round away and take nothing. Round up instead.
      if (after - current < need) after += 2 ** (Math.floor(Math.log2(current)) - 52);
      state.set(id, after);

      const deficit = after - now;
      const limit = bucket.capacity * interval;
      const slack = Math.min(SLACK_US, interval / 1000);
      if (total > bucket.capacity) {
        denied.push({ index, retryAfterMs: null });
      } else if (deficit <= limit + slack) {
        remaining.push(Math.floor((limit - deficit + slack) / interval));
      } else {
        denied.push({ index, retryAfterMs: Math.ceil((deficit - limit - slack) / 1000) });
      }
    });
    if (denied.length > 0) return denial(denied);

    for (const [id, at] of state) {
      if (at > now) this.fullAt.set(id, at);
    }
    return { allowed: true, remaining };
  }

  async reset(bucket: TokenBucket, key: BucketKey): Promise<boolean> {
    assertBucket(bucket);
    const id = entryKey(bucket, key);
    const at = this.fullAt.get(id);
    this.fullAt.delete(id);
    return at !== undefined && at > this.nowUs();
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.fullAt.clear();
  }

  private nowUs(): number {
    return this.now() * 1000;
  }

  private sweep(nowUs: number): void {
    this.nextSweep = nowUs + this.sweepIntervalMs * 1000;
    for (const [id, at] of this.fullAt) {
      if (at <= nowUs) this.fullAt.delete(id);
    }
  }
}

/** Bucket names cannot hold NUL, so the pair stays unambiguous. */
function entryKey(bucket: TokenBucket, key: BucketKey): string {
  return `${bucket.name}\u0000${keyString(key)}`;
}
