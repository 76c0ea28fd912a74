// Measure mode (docs/measure-mode.md): `search` counts but never denies; the
// server's log says whom it would have denied. `npx tsx examples/measure-mode.ts`.
import { ApolloServer } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import { MemoryStore, Rate, TokenBucket, tokenBucketDirectiveTypeDefs, tokenBucketPlugin } from '../src/index.js';

const api = new TokenBucket('api', 1000, Rate.perHour(1000));
const search = new TokenBucket('search', 20, Rate.perHour(60)); // a burst of 20, then one a minute

const server = new ApolloServer<{ user: string }>({
  typeDefs: `#graphql
    ${tokenBucketDirectiveTypeDefs}
    type Query @tokenBucket(name: "api") {
      search(term: String!, first: Int = 1): [Book!]! @tokenBucket(name: "search", cost: 5)
    }
    type Book { title: String! }
  `,
  resolvers: { Query: { search: (_: unknown, { term, first }: { term: string; first: number }) => Array.from({ length: Math.min(first, 10) }, () => ({ title: term })) } },
  plugins: [
    tokenBucketPlugin({
      store: new MemoryStore(),
      buckets: [api, search],
      identify: ({ contextValue }) => contextValue.user,
      measure: ['search'], // `api` is enforced; `search` is measured
      reportCost: true,
    }),
  ],
});

const { url } = await startStandaloneServer(server, {
  listen: { port: Number(process.env.PORT ?? 4000) },
  context: async ({ req }) => ({ user: String(req.headers['x-user-id'] ?? req.socket.remoteAddress) }),
});
console.log(`ready at ${url}`);
