// The ioredis settings a limiter needs to answer within its bound while
// Redis is down: commands fail at once instead of waiting in a queue for a
// reconnect, and reconnects are tried often so the limiter is back soon
// after Redis is.
import type { ClusterOptions, RedisOptions } from 'ioredis';

export const redisOptions = {
  /** A command issued while disconnected fails at once instead of queueing. */
  enableOfflineQueue: false,
  /** A command in flight when the connection drops fails instead of being resent. */
  maxRetriesPerRequest: 0,
  connectTimeout: 500,
  /** Reconnect every 50–200 ms, forever. */
  retryStrategy: (times: number) => Math.min(times * 50, 200),
} satisfies RedisOptions;

export const clusterOptions = {
  enableOfflineQueue: false,
  clusterRetryStrategy: (times: number) => Math.min(times * 50, 200),
  retryDelayOnFailover: 50,
  retryDelayOnClusterDown: 50,
  retryDelayOnTryAgain: 50,
  slotsRefreshTimeout: 500,
  redisOptions: { connectTimeout: 500, maxRetriesPerRequest: 0 },
} satisfies ClusterOptions;
