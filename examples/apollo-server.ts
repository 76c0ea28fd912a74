// The README's quick start, kept compiling by `npm test` (type-check).
// Run it with `npx tsx examples/quick-start.ts` next to a Redis on localhost.
import { ApolloServer } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import { Redis } from 'ioredis';
import { Rate, RedisStore, TokenBucket, tokenBucketDirectiveTypeDefs, tokenBucketPlugin } from '../src/index.js';

// 20 searches in a burst, then one every 3 seconds, per user.
const search = new TokenBucket('search', 20, new Rate(1, 3000));

const typeDefs = `#graphql
  ${tokenBucketDirectiveTypeDefs}
  type Query {
    search(term: String!): [String!]! @tokenBucket(name: "search", cost: 1)
  }
`;

const redis = new Redis(process.env.REDIS_URL ?? 'redis://localhost:6379', {
  enableOfflineQueue: false, // fail fast while disconnected instead of queueing
  maxRetriesPerRequest: 0,
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
  // An identity the client cannot choose in production: the authenticated user's id, not a header.
  context: async ({ req }) => ({ userId: String(req.headers['x-user-id'] ?? req.socket.remoteAddress) }),
});
console.log(`ready at ${url}`);
