import type { GraphQLSchema } from 'graphql';
import type { ConnectionInitMessage, Context, SubscribePayload } from 'graphql-ws';
import { SUBSCRIPTION_LIMIT_OPTIONS } from '../core/events.js';
import type { SubscriptionLimitOptions } from '../core/events.js';
import { LIMITER_OPTIONS } from '../core/options.js';
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
    /**
     * The schema given to `useServer`: its `@tokenBucket`s are checked at once,
     * and operations are priced against it. Or a function that returns it, for
     * a server that builds its schema after these options (NestJS): called for
     * each operation, its schema checked when first met (a faulty annotation
     * is logged, and what it prices is refused with `RATE_LIMITER_UNAVAILABLE`).
     */
    schema: GraphQLSchema | SchemaFunction<P, E>;
    /** Where store failures and refused schemas are reported. Default `console`. */
    logger?: Logger;
  };

/** The schema of a graphql-ws operation, as `useServer`'s own `schema` function gives it. */
export type SchemaFunction<P extends ConnectionInitMessage['payload'] = ConnectionInitMessage['payload'], E = unknown> = (
  ctx: Context<P, E>,
  id: string,
  payload: SubscribePayload,
) => GraphQLSchema | Promise<GraphQLSchema>;

/** Every option of `tokenBucketSubscriptions`, by name: any other is a `TypeError`. */
export const TOKEN_BUCKET_SUBSCRIPTIONS_OPTIONS: Readonly<Record<keyof TokenBucketSubscriptionsOptions, true>> = {
  ...LIMITER_OPTIONS,
  ...SUBSCRIPTION_LIMIT_OPTIONS,
  schema: true,
  logger: true,
};
