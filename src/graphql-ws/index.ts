// graphql-token-bucket/graphql-ws: the limiter for graphql-ws servers
// (`graphql-ws` is an optional peer dependency; only its types are imported).
export { tokenBucketSubscriptions } from './token-bucket-subscriptions.js';
export type { TokenBucketSubscriptionsHooks } from './token-bucket-subscriptions.js';
export type { SchemaFunction, TokenBucketSubscriptionsOptions } from './options.js';
export { DEFAULT_CHARGE_EACH_EVENT } from '../core/events.js';
export type { SubscriptionLimitOptions } from '../core/events.js';
