export { Rate } from './rate.js';
export { TokenBucket, MAX_REFILL_YEARS } from './token-bucket.js';
export type {
  AcquireRequest,
  Admission,
  BatchAdmission,
  BatchCheck,
  BucketKey,
  BucketStore,
  DeniedRequest,
} from './stores/bucket-store.js';
export { MAX_BATCH_REQUESTS } from './stores/validate.js';
export { DEFAULT_MAX_RECEIPTS } from './stores/receipts.js';
export { RedisStore } from './stores/redis-store.js';
export type { RedisStoreOptions } from './stores/redis-store.js';
export type { IoredisLikeClient, NodeRedisClient, NodeRedisCluster, RedisStoreClient } from './stores/redis-client.js';
export { DEFAULT_PREFIX } from './stores/redis-keys.js';
export { MemoryStore, DEFAULT_SWEEP_INTERVAL_MS } from './stores/memory-store.js';
export type { MemoryStoreOptions } from './stores/memory-store.js';
export { costDirective, costDirectiveTypeDefs, listSizeDirective, tokenBucketDirective, tokenBucketDirectiveTypeDefs } from './directive.js';
export { CostModel, DEFAULT_LIST_SIZE } from './cost/cost-model.js';
export type { CoordinateRule, CostModelOptions, RequiredSelections, TokenBucketAnnotation } from './cost/cost-model.js';
export { DEFAULT_OVERRIDE_LABELS, supergraphPricing } from './cost/federation.js';
export type { PricingSource, SupergraphPricingOptions } from './cost/federation.js';
export type { TokenBucketRule, TokenBucketRules } from './core/rules.js';
export { tokenBucketPlugin } from './apollo/token-bucket-plugin.js';
export type { BucketReport } from './core/limiter.js';
export { DEFAULT_MEASURE, DEFAULT_ON_STORE_ERROR, DEFAULT_STORE_TIMEOUT_MS } from './core/options.js';
export { DEFAULT_DENY_CACHE, DENY_CACHE_MAX_ENTRIES } from './core/deny-cache.js';
export type { Identity } from './core/tiers.js';
export type { MeterProviderLike, MeterLike, DecisionResult } from './core/metrics.js';
export { DEFAULT_REFUND_UNUSED_COST } from './core/refunds.js';
export { DEFAULT_COST_HEADER } from './core/cost-header.js';
export type { BucketCheck } from './core/dry-run.js';
export { DEFAULT_RATE_LIMIT_HEADERS } from './core/ratelimit-headers.js';
export type { LimiterOptions, Logger } from './core/options.js';
export type { TokenBucketPluginOptions } from './apollo/options.js';
export type { ApolloRequestContextLike, TokenBucketApolloPlugin } from './apollo/plugin-type.js';
export { getRetryAfter, RATE_LIMITED, RATE_LIMITER_UNAVAILABLE } from './client.js';
