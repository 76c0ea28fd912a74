import type { SubscriptionLimitOptions } from '../core/events.js';
import type { LimiterOptions, Logger } from '../core/options.js';

/**
 * The options of `useTokenBucket`: `identify` is given the GraphQL context
 * value (in GraphQL Yoga: `request`, `params` and what your `context`
 * factory adds) and the bucket.
 */
export type UseTokenBucketOptions<TContext> = LimiterOptions<TContext> &
  SubscriptionLimitOptions & {
    /** Where store failures and refused schemas are reported. Default: GraphQL Yoga's logger in Yoga, else `console`. */
    logger?: Logger;
  };
