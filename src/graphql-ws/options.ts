import type { GraphQLSchema } from 'graphql';
import type { ConnectionInitMessage, Context } from 'graphql-ws';
import type { SubscriptionLimitOptions } from '../core/events.js';
import type { LimiterOptions, Logger } from '../core/options.js';

/**
 * The options of `tokenBucketSubscriptions`: `identify` is given graphql-ws's
 * connection context (`connectionParams`, and `extra`, which holds the
 * `socket` and upgrade `request` with `graphql-ws/use/ws`) and the bucket.
 */
export type TokenBucketSubscriptionsOptions<
  P extends ConnectionInitMessage['payload'] = ConnectionInitMessage['payload'],
  E = unknown,
> = LimiterOptions<Context<P, E>> &
  SubscriptionLimitOptions & {
    /** The schema given to `useServer`: its `@tokenBucket`s are checked at once, and operations are priced against it. */
    schema: GraphQLSchema;
    /** Where store failures and refused schemas are reported. Default `console`. */
    logger?: Logger;
  };
