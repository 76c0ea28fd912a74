import { DEFAULT_LIST_SIZE } from '../cost/cost-model.js';
import type { BucketKey, BucketStore } from '../stores/bucket-store.js';
import { TokenBucket } from '../token-bucket.js';

/** Default of `onStoreError`: a failing store lets operations through. */
export const DEFAULT_ON_STORE_ERROR = 'allow';
/** Default of `storeTimeoutMs`: how long an operation waits for the store. */
export const DEFAULT_STORE_TIMEOUT_MS = 1000;

/** Where the limiter reports what it cannot turn into a response: Apollo Server's logger, or `console`. */
export interface Logger {
  warn(message: string): void;
  error(message: string): void;
}

/**
 * What every server adapter accepts. `TContext` is what `identify` is given:
 * Apollo Server's request context, GraphQL Yoga's context value, graphql-ws's
 * connection context.
 */
export interface LimiterOptions<TContext> {
  /** Where the tokens live: `new RedisStore(redis)` across replicas, `new MemoryStore()` in one process. */
  store: BucketStore;
  /** Every bucket the schema's `@tokenBucket` directives name. */
  buckets: readonly TokenBucket[];
  /**
   * Whose tokens an operation spends, per bucket: a user id, an API key, a
   * client address. Buckets of one operation that return the same identity
   * are acquired together in one Redis round trip, on Redis Cluster too.
   */
  identify: (context: TContext, bucket: TokenBucket) => BucketKey | Promise<BucketKey>;
  /** Size assumed for a list field with no size argument and no `@listSize(assumedSize:)`. Default `DEFAULT_LIST_SIZE` (10). */
  defaultListSize?: number;
  /**
   * When the store fails or does not answer within `storeTimeoutMs`:
   * `'allow'` runs the operation and logs the error; `'deny'` answers
   * `RATE_LIMITER_UNAVAILABLE` with HTTP 503. Default `DEFAULT_ON_STORE_ERROR` (`'allow'`).
   */
  onStoreError?: 'allow' | 'deny';
  /** How long an operation waits for the store, in ms, before `onStoreError` applies. Default `DEFAULT_STORE_TIMEOUT_MS` (1000). */
  storeTimeoutMs?: number;
  /**
   * Charge introspection (`__schema`, `__type`) like the query type's own
   * fields: a type-level `@tokenBucket` on `Query` then prices it too. Default
   * `true`. Tools that introspect often in development (Apollo Sandbox, IDEs)
   * may need `false` there; Apollo Server disables introspection in production.
   */
  chargeIntrospection?: boolean;
  /** Add `extensions.rateLimit: { [bucket]: { cost, remaining, capacity } }` to responses. Default `false`. */
  reportCost?: boolean;
}

/** The options once checked, with their defaults filled in. */
export interface Settings<TContext> {
  readonly store: BucketStore;
  readonly buckets: ReadonlyMap<string, TokenBucket>;
  readonly identify: LimiterOptions<TContext>['identify'];
  readonly defaultListSize: number;
  readonly chargeIntrospection: boolean;
  readonly onStoreError: 'allow' | 'deny';
  readonly storeTimeoutMs: number;
  readonly reportCost: boolean;
}

/** Checks the options once, at construction: a bad option is a programming error, thrown at once. */
export function validateOptions<TContext>(options: LimiterOptions<TContext>, owner: string): Settings<TContext> {
  if (options === null || typeof options !== 'object') throw new TypeError(`${owner} needs an options object`);
  const { store, identify } = options;
  if (!store || (typeof store.acquireAll !== 'function' && typeof store.acquire !== 'function')) {
    throw new TypeError(`${owner} option "store" must be a BucketStore, e.g. new RedisStore(redis) or new MemoryStore()`);
  }
  if (typeof identify !== 'function') {
    throw new TypeError(`${owner} option "identify" must be a function (context, bucket) => key`);
  }
  if (!Array.isArray(options.buckets)) throw new TypeError(`${owner} option "buckets" must be an array of TokenBucket`);
  const buckets = new Map<string, TokenBucket>();
  for (const bucket of options.buckets as readonly unknown[]) {
    if (!(bucket instanceof TokenBucket)) throw new TypeError(`${owner} option "buckets" must hold only TokenBucket instances`);
    if (buckets.has(bucket.name)) throw new RangeError(`${owner} option "buckets" names "${bucket.name}" twice`);
    buckets.set(bucket.name, bucket);
  }
  const defaultListSize = options.defaultListSize ?? DEFAULT_LIST_SIZE;
  if (!Number.isSafeInteger(defaultListSize) || defaultListSize < 0) {
    throw new RangeError(`${owner} option "defaultListSize" must be a non-negative integer, got ${String(defaultListSize)}`);
  }
  const onStoreError = options.onStoreError ?? DEFAULT_ON_STORE_ERROR;
  if (onStoreError !== 'allow' && onStoreError !== 'deny') {
    throw new RangeError(`${owner} option "onStoreError" must be 'allow' or 'deny', got ${JSON.stringify(onStoreError)}`);
  }
  const storeTimeoutMs = options.storeTimeoutMs ?? DEFAULT_STORE_TIMEOUT_MS;
  if (typeof storeTimeoutMs !== 'number' || !(storeTimeoutMs > 0) || storeTimeoutMs > 2_147_483_647) {
    throw new RangeError(`${owner} option "storeTimeoutMs" must be a positive number of milliseconds, got ${String(storeTimeoutMs)}`);
  }
  return {
    store,
    buckets,
    identify,
    defaultListSize,
    chargeIntrospection: options.chargeIntrospection !== false,
    onStoreError,
    storeTimeoutMs,
    reportCost: options.reportCost === true,
  };
}
