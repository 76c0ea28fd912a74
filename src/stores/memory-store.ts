import type { TokenBucket } from '../token-bucket.js';
import type {
  AcquireRequest,
  Admission,
  BatchAdmission,
  BucketKey,
  BucketStore,
  DeniedRequest,
} from './bucket-store.js';
import { assertBucket, assertCost, denial, keyString, validateRequests } from './validate.js';

export interface MemoryStoreOptions {
  /** The clock, in milliseconds. Default: `performance.timeOrigin + performance.now()`. For tests. */
  now?: () => number;
  /** How often idle buckets that are full again are dropped, in ms. Default `DEFAULT_SWEEP_INTERVAL_MS`. */
  sweepIntervalMs?: number;
}

/** Default interval between sweeps of buckets that are full again. */
export const DEFAULT_SWEEP_INTERVAL_MS = 10_000;

interface Entry {
  tokens: number;
  /** ms */
  ts: number;
  /** ms: when the bucket is full again and the entry can go */
  expiresAt: number;
}

const systemClock = (): number => performance.timeOrigin + performance.now();

/**
 * Token buckets in this process's memory: the same semantics as
 * `RedisStore`, for development and single-instance servers. A bucket that
 * is full again is forgotten, so idle identities cost nothing.
 */
export class MemoryStore implements BucketStore {
  private readonly entries = new Map<string, Entry>();
  private readonly now: () => number;
  private readonly sweepIntervalMs: number;
  private nextSweep: number;
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(options: MemoryStoreOptions = {}) {
    if (options.now !== undefined && typeof options.now !== 'function') {
      throw new TypeError('MemoryStore option "now" must be a function returning milliseconds');
    }
    const sweep = options.sweepIntervalMs ?? DEFAULT_SWEEP_INTERVAL_MS;
    if (!Number.isFinite(sweep) || sweep <= 0) {
      throw new RangeError(`MemoryStore option "sweepIntervalMs" must be a positive number, got ${String(sweep)}`);
    }
    this.now = options.now ?? systemClock;
    this.sweepIntervalMs = sweep;
    this.nextSweep = this.now() + sweep;
    if (options.now === undefined) {
      this.timer = setInterval(() => this.sweep(this.now()), sweep);
      this.timer.unref();
    }
  }

  /** Buckets currently held (those not full again). */
  get size(): number {
    this.sweep(this.now());
    return this.entries.size;
  }

  async acquire(bucket: TokenBucket, key: BucketKey, cost = 1): Promise<Admission> {
    assertBucket(bucket);
    assertCost(cost, bucket);
    const result = await this.acquireAll([{ bucket, key, cost }]);
    return result.allowed
      ? { allowed: true, remaining: result.remaining[0] ?? 0 }
      : { allowed: false, retryAfterMs: result.retryAfterMs };
  }

  async acquireAll(requests: readonly AcquireRequest[]): Promise<BatchAdmission> {
    validateRequests(requests);
    const now = this.now();
    if (now >= this.nextSweep) this.sweep(now);

    // Work on copies so a denial leaves every bucket as it was.
    const working = new Map<string, { bucket: TokenBucket; tokens: number; changed: boolean }>();
    const remaining: number[] = [];
    const denied: DeniedRequest[] = [];
    requests.forEach(({ bucket, key, cost }, index) => {
      const id = entryKey(bucket, key);
      let state = working.get(id);
      if (!state) {
        state = { bucket, tokens: this.tokensAt(id, bucket, now), changed: false };
        working.set(id, state);
      }
      const refill = bucket.rate.tokens / bucket.rate.periodMs; // tokens per ms
      if (cost > bucket.capacity) {
        denied.push({ index, retryAfterMs: null });
      } else if (state.tokens >= cost) {
        if (cost > 0) {
          state.tokens -= cost;
          state.changed = true;
        }
        remaining.push(Math.floor(state.tokens));
      } else {
        denied.push({ index, retryAfterMs: Math.ceil((cost - state.tokens) / refill) });
      }
    });
    if (denied.length > 0) return denial(denied);

    for (const [id, state] of working) {
      if (!state.changed) continue;
      const { capacity, rate } = state.bucket;
      if (state.tokens >= capacity) {
        this.entries.delete(id);
      } else {
        const refill = rate.tokens / rate.periodMs;
        this.entries.set(id, { tokens: state.tokens, ts: now, expiresAt: now + Math.ceil((capacity - state.tokens) / refill) });
      }
    }
    return { allowed: true, remaining };
  }

  async reset(bucket: TokenBucket, key: BucketKey): Promise<boolean> {
    assertBucket(bucket);
    const id = entryKey(bucket, key);
    const entry = this.entries.get(id);
    this.entries.delete(id);
    return entry !== undefined && entry.expiresAt > this.now();
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.entries.clear();
  }

  private tokensAt(id: string, bucket: TokenBucket, now: number): number {
    const entry = this.entries.get(id);
    if (!entry || entry.expiresAt <= now) return bucket.capacity;
    const refill = bucket.rate.tokens / bucket.rate.periodMs;
    return Math.min(bucket.capacity, entry.tokens + Math.max(0, now - entry.ts) * refill);
  }

  private sweep(now: number): void {
    this.nextSweep = now + this.sweepIntervalMs;
    for (const [id, entry] of this.entries) {
      if (entry.expiresAt <= now) this.entries.delete(id);
    }
  }
}

/** Bucket names cannot hold NUL, so the pair stays unambiguous. */
function entryKey(bucket: TokenBucket, key: BucketKey): string {
  return `${bucket.name}\u0000${keyString(key)}`;
}
