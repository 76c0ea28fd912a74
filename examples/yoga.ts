// GraphQL Yoga with useTokenBucket (docs/yoga-envelop.md):
// `npx tsx examples/yoga.ts`. Type-checked and run by `npm test`.
import { createServer } from 'node:http';
import { createSchema, createYoga } from 'graphql-yoga';
import { MemoryStore, Rate, TokenBucket, tokenBucketDirectiveTypeDefs } from '../src/index.js';
import { useTokenBucket } from '../src/envelop/index.js';

// 20 searches in a burst, then one every 3 seconds, per user.
const search = new TokenBucket('search', 20, new Rate(1, 3000));

const yoga = createYoga({
  schema: createSchema({
    typeDefs: `#graphql
      ${tokenBucketDirectiveTypeDefs}
      type Query {
        search(term: String!): [String!]! @tokenBucket(name: "search", cost: 1)
      }
    `,
    resolvers: { Query: { search: (_: unknown, { term }: { term: string }) => [`${term}?`] } },
  }),
  batching: true,
  plugins: [
    useTokenBucket({
      store: new MemoryStore(), // or new RedisStore(redis) across replicas
      buckets: [search],
      // Yoga's context value: the Fetch API `request`, `params`, and what your `context` adds.
      identify: ({ request }) => request.headers.get('x-user-id') ?? 'anonymous',
      reportCost: true,
    }),
  ],
});

const port = Number(process.env.PORT ?? 4000);
createServer(yoga).listen(port, () => console.log(`ready at http://localhost:${port}/graphql`));
