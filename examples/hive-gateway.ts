// Hive Gateway over the subgraphs of examples/federation (docs/federation.md),
// limited with useTokenBucket, its buckets in Redis. Compose the supergraph
// first (`npx tsx examples/federation/supergraph.ts > supergraph.graphql`, as
// `rover supergraph compose` would), then
// `REDIS_URL=redis://localhost:6379 npx tsx examples/hive-gateway.ts`.
import { createServer } from 'node:http';
import { createGatewayRuntime } from '@graphql-hive/gateway-runtime';
import type { YogaInitialContext } from 'graphql-yoga';
import { Redis } from 'ioredis';
import { Rate, RedisStore, TokenBucket } from '../src/index.js';
import { useTokenBucket } from '../src/envelop/index.js';

// Fail fast while Redis is away, so that onStoreError applies at once (docs/redis.md).
const redis = new Redis(process.env.REDIS_URL ?? 'redis://localhost:6379', {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
  connectTimeout: 500,
  retryStrategy: (times) => Math.min(times * 50, 200),
});
redis.on('error', (error: Error) => console.warn(`redis: ${error.message}`));

// Stands in for your authentication: the owner of the API key in
// `Authorization: Bearer <key>`, else one identity for every anonymous client.
const apiKeys = new Map([
  ['key-of-ann', 'ann'],
  ['key-of-bob', 'bob'],
]);
function verifiedUser(request: Request): string {
  const key = /^Bearer (.+)$/.exec(request.headers.get('authorization') ?? '')?.[1];
  return (key === undefined ? undefined : apiKeys.get(key)) ?? 'anonymous';
}

const gateway = createGatewayRuntime({
  supergraph: process.env.SUPERGRAPH ?? './supergraph.graphql', // or { type: 'hive', endpoint, key }, polled
  plugins: () => [
    useTokenBucket<YogaInitialContext>({
      store: new RedisStore(redis),
      buckets: [new TokenBucket('api', 1000, Rate.perMinute(1000))],
      identify: ({ request }) => verifiedUser(request),
      reportCost: true,
    }),
  ],
});
const port = Number(process.env.PORT ?? 4000);
createServer(gateway).listen(port, () => console.log(`gateway ready at http://localhost:${port}/graphql`));
