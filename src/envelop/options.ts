import { SUBSCRIPTION_LIMIT_OPTIONS } from '../core/events.js';
import type { SubscriptionLimitOptions } from '../core/events.js';
import { LIMITER_OPTIONS } from '../core/options.js';
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

/** Every option of `useTokenBucket`, by name: any other is a `TypeError`. */
export const USE_TOKEN_BUCKET_OPTIONS: Readonly<Record<keyof UseTokenBucketOptions<unknown>, true>> = {
  ...LIMITER_OPTIONS,
  ...SUBSCRIPTION_LIMIT_OPTIONS,
  logger: true,
};
