// A schema built in code, with graphql-js objects, annotated as code-first
// builders write annotations (docs/code-first.md): `npx tsx examples/code-first.ts`.
import { ApolloServer } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import { GraphQLID, GraphQLInt, GraphQLList, GraphQLNonNull, GraphQLObjectType, GraphQLSchema, specifiedDirectives } from 'graphql';
import { MemoryStore, Rate, TokenBucket, costDirective, listSizeDirective, tokenBucketDirective, tokenBucketPlugin } from '../src/index.js';

const api = new TokenBucket('api', 1000, Rate.perHour(100));

const items = Array.from({ length: 50 }, (_, i) => ({ id: String(i + 1), price: 10 * (i + 1) }));

const Item = new GraphQLObjectType({
  name: 'Item',
  fields: {
    id: { type: new GraphQLNonNull(GraphQLID) },
    // @cost(weight: "7"), in graphql-tools' object form.
    price: { type: GraphQLInt, extensions: { directives: { cost: { weight: '7' } } } },
    // graphql-query-complexity's convention: a complexity number is the field's weight.
    stock: { type: GraphQLInt, resolve: () => 3, extensions: { complexity: 2 } },
  },
});

const Query = new GraphQLObjectType({
  name: 'Query',
  // @tokenBucket(name: "api") on the type: every operation pays its complexity to "api".
  extensions: { directives: { tokenBucket: { name: 'api' } } },
  fields: {
    items: {
      type: new GraphQLNonNull(new GraphQLList(new GraphQLNonNull(Item))),
      args: { first: { type: GraphQLInt } },
      // @listSize(assumedSize: 3), in the array form (Pothos', graphql-compose's).
      extensions: { directives: [{ name: 'listSize', args: { assumedSize: 3 } }] },
      resolve: (_: unknown, { first }: { first?: number | null }) => items.slice(0, first ?? 3),
    },
  },
});

const schema = new GraphQLSchema({
  query: Query,
  // Declared, so that tools printing the schema show them; undeclared ones are read as well.
  directives: [...specifiedDirectives, tokenBucketDirective, costDirective, listSizeDirective],
});

const server = new ApolloServer<{ user: string }>({
  schema,
  plugins: [
    tokenBucketPlugin({
      store: new MemoryStore(),
      buckets: [api],
      identify: ({ contextValue }) => contextValue.user,
      reportCost: true,
    }),
  ],
});

const { url } = await startStandaloneServer(server, {
  listen: { port: Number(process.env.PORT ?? 4000) },
  context: async ({ req }) => ({ user: String(req.headers['x-user-id'] ?? req.socket.remoteAddress) }),
});
console.log(`ready at ${url}`);
