// Apollo Gateway over the subgraphs of examples/federation (docs/federation.md),
// limited with tokenBucketPlugin, its buckets in Redis:
// `REDIS_URL=redis://localhost:6379 npx tsx examples/apollo-gateway.ts`.
// PRODUCTS_URL, REVIEWS_URL and INVENTORY_URL say where the subgraphs are.
import type { IncomingMessage } from 'node:http';
import { ApolloGateway, IntrospectAndCompose } from '@apollo/gateway';
import { ApolloServer } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import { Redis } from 'ioredis';
import { Rate, RedisStore, TokenBucket, tokenBucketPlugin } from '../src/index.js';

const gateway = new ApolloGateway({
  // Or `supergraphSdl` from `rover supergraph compose`, or Apollo GraphOS.
  supergraphSdl: new IntrospectAndCompose({
    subgraphs: [
      { name: 'products', url: process.env.PRODUCTS_URL ?? 'http://localhost:4001/' },
      { name: 'reviews', url: process.env.REVIEWS_URL ?? 'http://localhost:4002/' },
      { name: 'inventory', url: process.env.INVENTORY_URL ?? 'http://localhost:4003/' },
    ],
  }),
});

// Fail fast while Redis is away, so that onStoreError applies at once (docs/redis.md).
const redis = new Redis(process.env.REDIS_URL ?? 'redis://localhost:6379', {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
  connectTimeout: 500,
  retryStrategy: (times) => Math.min(times * 50, 200),
});
redis.on('error', (error: Error) => console.warn(`redis: ${error.message}`));

// Stands in for your authentication: the owner of the API key in
// `Authorization: Bearer <key>`, else the client's address.
const apiKeys = new Map([
  ['key-of-ann', 'ann'],
  ['key-of-bob', 'bob'],
]);
function verifiedUser(req: IncomingMessage): string {
  const key = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
  return (key === undefined ? undefined : apiKeys.get(key)) ?? req.socket.remoteAddress ?? 'unknown';
}

const server = new ApolloServer<{ userId: string }>({
  gateway,
  plugins: [
    tokenBucketPlugin({
      store: new RedisStore(redis),
      buckets: [new TokenBucket('api', 1000, Rate.perMinute(1000))],
      identify: ({ contextValue }) => contextValue.userId,
      reportCost: true,
    }),
  ],
});
const { url } = await startStandaloneServer(server, {
  listen: { port: Number(process.env.PORT ?? 4000) },
  context: async ({ req }) => ({ userId: verifiedUser(req) }),
});
console.log(`gateway ready at ${url}`);
