// Apollo Server with its buckets in Redis (docs/getting-started.md):
// `REDIS_URL=redis://localhost:6379 NODE_ENV=production npx tsx examples/apollo-server.ts`.
import { ApolloServer } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import { Redis } from 'ioredis';
import { Rate, RedisStore, TokenBucket, tokenBucketDirectiveTypeDefs, tokenBucketPlugin } from '../src/index.js';

// 20 searches in a burst, then one a minute, per user.
const search = new TokenBucket('search', 20, Rate.perMinute(1));

const typeDefs = `#graphql
  ${tokenBucketDirectiveTypeDefs}
  type Query {
    search(term: String!): [String!]! @tokenBucket(name: "search", cost: 1)
  }
`;

// Fail fast while Redis is away, so that onStoreError applies at once (docs/redis.md).
const redis = new Redis(process.env.REDIS_URL ?? 'redis://localhost:6379', {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
  connectTimeout: 500,
  retryStrategy: (times) => Math.min(times * 50, 200),
});
redis.on('error', (error: Error) => console.warn(`redis: ${error.message}`));

const server = new ApolloServer<{ userId: string }>({
  typeDefs,
  resolvers: { Query: { search: (_: unknown, { term }: { term: string }) => [`${term}?`] } },
  plugins: [
    tokenBucketPlugin({
      store: new RedisStore(redis),
      buckets: [search],
      identify: ({ contextValue }) => contextValue.userId,
    }),
  ],
});

const { url } = await startStandaloneServer(server, {
  listen: { port: Number(process.env.PORT ?? 4000) },
  // A header any client can set, for the demonstration; in production, the authenticated user's id.
  context: async ({ req }) => ({ userId: String(req.headers['x-user-id'] ?? req.socket.remoteAddress) }),
});
console.log(`ready at ${url}`);
