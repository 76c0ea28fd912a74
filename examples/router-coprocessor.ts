// Per-client cost limits for Apollo Router, as a coprocessor in your own Node
// process (docs/apollo-router.md):
// `REDIS_URL=redis://localhost:6379 npx tsx examples/router-coprocessor.ts`,
// then point router.yaml's `coprocessor.url` at it.
import { createServer } from 'node:http';
import { Redis } from 'ioredis';
import { Rate, RedisStore, TokenBucket } from '../src/index.js';
import { routerCoprocessor } from '../src/router/index.js';
import type { RouterRequest } from '../src/router/index.js';

// 1,000 tokens per user, refilled at 100 a minute: the supergraph's @tokenBucket(name: "api") spends them.
const api = new TokenBucket('api', 1000, Rate.perMinute(100));

// Fail fast while Redis is away, so that onStoreError applies at once (docs/redis.md).
const redis = new Redis(process.env.REDIS_URL ?? 'redis://localhost:6379', {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
  connectTimeout: 500,
  retryStrategy: (times) => Math.min(times * 50, 200),
});
redis.on('error', (error: Error) => console.warn(`redis: ${error.message}`));

// Whose tokens: the subject of the JWT the Router's authentication plugin verified.
// Requests without one share a single bucket.
function identify(request: RouterRequest): string {
  const claims = request.context['apollo::authentication::jwt_claims'] as { sub?: unknown } | undefined;
  return typeof claims?.sub === 'string' ? `user:${claims.sub}` : 'anonymous';
}

const handler = routerCoprocessor({
  store: new RedisStore(redis),
  buckets: [api],
  identify,
  reportCost: true,
  refundUnusedCost: true,
  rateLimitHeaders: true,
  // The same secret in every replica behind the Router (32 characters or more).
  contextSecret: process.env.COPROCESSOR_SECRET ?? 'development-only-secret-0123456789',
});

const port = Number(process.env.PORT ?? 8081);
createServer(handler).listen(port, '127.0.0.1', () => console.log(`coprocessor ready at http://127.0.0.1:${port}/`));
