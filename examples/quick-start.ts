// The README's quick start: `NODE_ENV=production npx tsx examples/quick-start.ts`.
// test/examples.test.ts runs it and test/docs-blocks.test.ts checks that the
// README shows this file and what it prints.
import { ApolloServer } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import { MemoryStore, Rate, TokenBucket, tokenBucketDirectiveTypeDefs, tokenBucketPlugin } from '../src/index.js';

// 3 searches in a burst, then one every 20 seconds, per client address.
const search = new TokenBucket('search', 3, Rate.perMinute(3));

const server = new ApolloServer<{ client: string }>({
  typeDefs: `${tokenBucketDirectiveTypeDefs}
    type Query { search(term: String!): [String!]! @tokenBucket(name: "search", cost: 1) }`,
  resolvers: { Query: { search: (_: unknown, { term }: { term: string }) => [`${term}?`] } },
  plugins: [tokenBucketPlugin({ store: new MemoryStore(), buckets: [search], identify: ({ contextValue }) => contextValue.client })],
});

const { url } = await startStandaloneServer(server, {
  listen: { port: Number(process.env.PORT ?? 4000) },
  context: async ({ req }) => ({ client: req.socket.remoteAddress ?? 'unknown' }),
});
console.log(`ready at ${url}`);
