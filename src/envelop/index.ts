// graphql-token-bucket/envelop: the limiter as an envelop plugin, for GraphQL
// Yoga and every envelop-based server (`@envelop/core` is an optional peer
// dependency; only its types are imported).
export { useTokenBucket } from './use-token-bucket.js';
export type { TokenBucketEnvelopPlugin } from './use-token-bucket.js';
export type { UseTokenBucketOptions } from './options.js';
export { DEFAULT_CHARGE_EACH_EVENT } from '../core/events.js';
export type { SubscriptionLimitOptions } from '../core/events.js';
