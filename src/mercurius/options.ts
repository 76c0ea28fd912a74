import type { MercuriusContext } from 'mercurius';
import type { SubscriptionLimitOptions } from '../core/events.js';
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
