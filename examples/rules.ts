// Buckets from `rules`, for a schema without @tokenBucket (docs/costs.md):
// `npx tsx examples/rules.ts`.
import { ApolloServer } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import { MemoryStore, Rate, TokenBucket, tokenBucketPlugin } from '../src/index.js';

const api = new TokenBucket('api', 1000, Rate.perHour(1000));
const lookups = new TokenBucket('lookups', 100, Rate.perHour(100));

const products = Array.from({ length: 20 }, (_, i) => ({ id: String(i + 1), name: `product ${i + 1}` }));

const server = new ApolloServer<{ user: string }>({
  // A schema you cannot annotate: no directive in it.
  typeDefs: `#graphql
    type Query {
      products(first: Int = 5): [Product!]!
      product(id: ID!): Product
    }
    type Product { id: ID! name: String }
  `,
  resolvers: {
    Query: {
      products: (_: unknown, { first }: { first: number }) => products.slice(0, Math.max(0, first)),
      product: (_: unknown, { id }: { id: string }) => products.find((p) => p.id === id) ?? null,
    },
  },
  plugins: [
    tokenBucketPlugin({
      store: new MemoryStore(),
      buckets: [api, lookups],
      identify: ({ contextValue }) => contextValue.user,
      rules: {
        Query: { bucket: 'api' }, // every operation's whole complexity, as @tokenBucket(name: "api") on Query
        'Query.product': [{ bucket: 'lookups', cost: 1 }], // one token of "lookups" per selection
      },
      reportCost: true,
    }),
  ],
});

const { url } = await startStandaloneServer(server, {
  listen: { port: Number(process.env.PORT ?? 4000) },
  context: async ({ req }) => ({ user: String(req.headers['x-user-id'] ?? req.socket.remoteAddress) }),
});
console.log(`ready at ${url}`);
