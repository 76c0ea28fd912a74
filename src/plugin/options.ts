import type { BaseContext, GraphQLRequestContext } from '@apollo/server';
import type { BucketKey, BucketStore } from '../stores/bucket-store.js';
import type { TokenBucket } from '../token-bucket.js';

/** Default of `onStoreError`: a failing store lets operations through. */
export const DEFAULT_ON_STORE_ERROR = 'allow';
/** Default of `storeTimeoutMs`: how long an operation waits for the store. */
export const DEFAULT_STORE_TIMEOUT_MS = 1000;

export interface TokenBucketPluginOptions<TContext extends BaseContext = BaseContext> {
  /** Where the tokens live: `new RedisStore(redis)` across replicas, `new MemoryStore()` in one process. */
  store: BucketStore;
  /** Every bucket the schema's `@tokenBucket` directives name. */
  buckets: readonly TokenBucket[];
  /**
   * Whose tokens an operation spends, per bucket: a user id, an API key, a
   * client address. Buckets of one operation that return the same identity
   * are acquired together in one Redis round trip, on Redis Cluster too.
   */
  identify: (requestContext: GraphQLRequestContext<TContext>, bucket: TokenBucket) => BucketKey | Promise<BucketKey>;
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
