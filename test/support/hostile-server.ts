// A child process for test/cost-hostile-memory.test.ts: Apollo Server with
// the limiter over HOSTILE_SCHEMA (or, given the argument `narrowed`,
// NARROWED_SCHEMA), run with a small heap. It prints the URL it listens on
// (a port the system chose) once it is ready.
import { ApolloServer } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import { makeExecutableSchema } from '@graphql-tools/schema';
import { MemoryStore, Rate, TokenBucket, tokenBucketPlugin } from '../../src/index.js';
import { HOSTILE_SCHEMA } from './hostile-documents.js';
import { NARROWED_SCHEMA, narrowedResolvers } from './narrowed-documents.js';

const object = (id: string) => ({ id, f: 1 });
const hostile = makeExecutableSchema({
  typeDefs: HOSTILE_SCHEMA,
  resolvers: {
    Query: {
      node: (_: unknown, { id }: { id: string }) => object(id),
      nodes: (_: unknown, { first }: { first: number }) => Array.from({ length: first }, (_v, i) => object(String(i))),
      search: (_: unknown, { first }: { first: number }) => Array.from({ length: first }, (_v, i) => object(String(i))),
    },
    // Every object is a T0; the t0 … t999 fields resolve to null.
    Node: { __resolveType: () => 'T0' },
    Any: { __resolveType: () => 'T0' },
  },
});

const schema = process.argv[2] === 'narrowed' ? makeExecutableSchema({ typeDefs: NARROWED_SCHEMA, resolvers: narrowedResolvers }) : hostile;
const server = new ApolloServer({
  schema,
  plugins: [
    tokenBucketPlugin({
      store: new MemoryStore(),
      buckets: [new TokenBucket('api', 1_000_000, Rate.perSecond(1_000_000))],
      identify: () => 'client',
      reportCost: true,
    }),
  ],
});
const { url } = await startStandaloneServer(server, { listen: { port: 0, host: '127.0.0.1' } });
console.log(`listening at ${url}`);
