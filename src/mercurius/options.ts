import type { MercuriusContext } from 'mercurius';
import { SUBSCRIPTION_LIMIT_OPTIONS } from '../core/events.js';
import type { SubscriptionLimitOptions } from '../core/events.js';
import { LIMITER_OPTIONS } from '../core/options.js';
import type { LimiterOptions, Logger } from '../core/options.js';

/**
 * The options of `mercuriusTokenBucket`: `identify` is given Mercurius'
 * context (over HTTP `context.reply.request` is the Fastify request; over
 * the WebSocket, `context.request` is the upgrade request, and a
 * subscription's context has `reply.request` too) and the bucket.
 */
export type MercuriusTokenBucketOptions<TContext = MercuriusContext> = LimiterOptions<TContext> &
  SubscriptionLimitOptions & {
    /** Where store failures, refused schemas and `identify`'s faults are reported. Default: the Fastify instance's logger. */
    logger?: Logger;
  };

/** Every option of `mercuriusTokenBucket`, by name: any other is a `TypeError`. */
export const MERCURIUS_TOKEN_BUCKET_OPTIONS: Readonly<Record<keyof MercuriusTokenBucketOptions, true>> = {
  ...LIMITER_OPTIONS,
  ...SUBSCRIPTION_LIMIT_OPTIONS,
  logger: true,
};
