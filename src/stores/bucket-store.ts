import type { TokenBucket } from '../token-bucket.js';

/** Whose tokens: a user id, an API key, a client address. */
export type BucketKey = string | number | bigint;

/** The answer to one acquire. */
export type Admission =
  | { allowed: true; remaining: number }
  /** `retryAfterMs` is null when the cost exceeds the capacity: it can never succeed. */
  | { allowed: false; retryAfterMs: number | null };

/** One (bucket, key, cost) request of an all-or-nothing acquire. */
export interface AcquireRequest {
  bucket: TokenBucket;
  key: BucketKey;
  cost: number;
}

/** One request that was short in a denied all-or-nothing acquire. */
export interface DeniedRequest {
  /** Index of the request in the array given to `acquireAll`. */
  index: number;
  /** Milliseconds until this bucket holds enough; null when it never will. */
  retryAfterMs: number | null;
}

/** The answer to an all-or-nothing acquire. */
export type BatchAdmission =
  /** Every request took its tokens; `remaining[i]` is what request i's bucket has left. */
  | { allowed: true; remaining: number[] }
  /**
   * Nothing was taken. `retryAfterMs` is when all of them could succeed
   * (the longest wait), or null when one of them never can.
   */
  | { allowed: false; retryAfterMs: number | null; denied: DeniedRequest[] };

export interface BucketStore {
  /** Takes `cost` (default 1) tokens from the key's bucket, or nothing when it holds fewer. */
  acquire(bucket: TokenBucket, key: BucketKey, cost?: number): Promise<Admission>;
  /**
   * Takes every request's tokens, or none of them when any bucket is short.
   * `RedisStore` and `MemoryStore` have it; the plugin calls a store without
   * it once per bucket, which is not all or nothing.
   */
  acquireAll?(requests: readonly AcquireRequest[]): Promise<BatchAdmission>;
  /** Deletes the key's bucket (it is full again); true if it had been used. */
  reset(bucket: TokenBucket, key: BucketKey): Promise<boolean>;
  close?(): Promise<void>;
}
