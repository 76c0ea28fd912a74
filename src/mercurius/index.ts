// graphql-token-bucket/mercurius: the limiter as a Fastify plugin for
// Mercurius (`mercurius` and `fastify` are optional peer dependencies).
export { mercuriusTokenBucket } from './mercurius-token-bucket.js';
export type { MercuriusTokenBucketPlugin } from './mercurius-token-bucket.js';
export type { MercuriusTokenBucketOptions } from './options.js';
export { DEFAULT_CHARGE_EACH_EVENT } from '../core/events.js';
export type { SubscriptionLimitOptions } from '../core/events.js';
