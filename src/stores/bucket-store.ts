import type { TokenBucket } from '../token-bucket.js';

/** Whose tokens: a user id, an API key, a client address. */
export type BucketKey = string | number | bigint;

/** The answer to one acquire. */
export type Admission =
  | { allowed: true; remaining: number }
  /** `retryAfterMs` is null when the cost exceeds the capacity: it can never succeed. */
  | { allowed: false; retryAfterMs: number | null };

/** One (bucket, key, cost) request of an all-or-nothing acquire, check or refund. */
export interface AcquireRequest {
  bucket: TokenBucket;
  key: BucketKey;
  /** Tokens to take (or, in `refundAll`, to give back): a non-negative safe integer. */
  cost: number;
  /**
   * Counted, never denying (default false). A measured request is taken
   * only when every request of the call would be admitted, so its bucket
   * evolves exactly as under enforcement; the enforced requests decide as
   * if it were not there. See `acquireAll`.
   */
  measure?: boolean;
}

/** One request that was short. */
export interface DeniedRequest {
  /** Index of the request in the array given to the store. */
  index: number;
  /** Milliseconds until this bucket holds enough; null when it never will. */
  retryAfterMs: number | null;
}

/** The answer to an all-or-nothing acquire. */
export type BatchAdmission =
  /**
   * Every enforced request took its tokens; `remaining[i]` is what request
   * i's bucket has left. `wouldDeny` lists the measured requests that were
   * short (then no measured request took anything); absent when none was.
   */
  | { allowed: true; remaining: number[]; wouldDeny?: DeniedRequest[] }
  /**
   * Nothing was taken. `retryAfterMs` is when all of them could succeed
   * (the longest wait), or null when one of them never can. `denied` lists
   * the short enforced requests; `remaining[i]` is what request i's bucket
   * holds now.
   */
  | { allowed: false; retryAfterMs: number | null; denied: DeniedRequest[]; remaining: number[] };

/** What an acquire of the same requests would answer now; nothing is taken. */
export interface BatchCheck {
  /** True when every request would be admitted. */
  allowed: boolean;
  /** The longest wait of `denied`, null when one never fits, 0 when none is short. */
  retryAfterMs: number | null;
  /** Whole tokens request i's bucket holds now, before any taking. */
  remaining: number[];
  /** Requests that would be short, each counting what the requests before it asked of the same bucket. */
  denied: DeniedRequest[];
}

export interface BucketStore {
  /** Takes `cost` (default 1) tokens from the key's bucket, or nothing when it holds fewer. */
  acquire(bucket: TokenBucket, key: BucketKey, cost?: number): Promise<Admission>;
  /**
   * Takes every request's tokens, or none of them when any bucket is short.
   * `RedisStore` and `MemoryStore` have it; the plugin calls a store without
   * it once per bucket, which is not all or nothing.
   */
  acquireAll?(requests: readonly AcquireRequest[]): Promise<BatchAdmission>;
  /** What `acquireAll` would answer now, writing nothing. */
  checkAll?(requests: readonly AcquireRequest[]): Promise<BatchCheck>;
  /**
   * Gives back up to `tokens` this store took from the key's bucket: never
   * more than the bucket would hold had they not been taken, never above
   * its capacity.
   */
  refund?(bucket: TokenBucket, key: BucketKey, tokens: number): Promise<void>;
  /**
   * `refund` for several requests (`cost` is the tokens to give back), in one
   * call per Redis Cluster hash slot. `RedisStore` and `MemoryStore` resolve
   * to the whole tokens each request's bucket holds after it.
   */
  refundAll?(requests: readonly AcquireRequest[]): Promise<void | number[]>;
  /** Deletes the key's bucket (it is full again); true if it had been used. */
  reset(bucket: TokenBucket, key: BucketKey): Promise<boolean>;
  close?(): Promise<void>;
}
