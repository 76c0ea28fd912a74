// The schema of examples/code-first.ts built with Pothos and its directives
// plugin (docs/code-first.md): `npx tsx examples/pothos.ts`.
import SchemaBuilder from '@pothos/core';
import DirectivesPlugin from '@pothos/plugin-directives';
import { ApolloServer } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import { MemoryStore, Rate, TokenBucket, costDirective, listSizeDirective, tokenBucketDirective, tokenBucketPlugin } from '../src/index.js';

const api = new TokenBucket('api', 1000, Rate.perHour(100));

interface Item {
  id: string;
  price: number;
}
const items: Item[] = Array.from({ length: 50 }, (_, i) => ({ id: String(i + 1), price: 10 * (i + 1) }));

// The directives' arguments, typed for Pothos.
const builder = new SchemaBuilder<{
  Directives: {
    tokenBucket: { locations: 'OBJECT' | 'INTERFACE' | 'FIELD_DEFINITION'; args: { name: string; cost?: number } };
    cost: { locations: 'OBJECT' | 'FIELD_DEFINITION' | 'ARGUMENT_DEFINITION' | 'INPUT_FIELD_DEFINITION' | 'SCALAR' | 'ENUM'; args: { weight: string } };
    listSize: { locations: 'FIELD_DEFINITION'; args: { assumedSize?: number; slicingArguments?: string[]; sizedFields?: string[] } };
  };
}>({ plugins: [DirectivesPlugin] });

const ItemRef = builder.objectRef<Item>('Item').implement({
  fields: (t) => ({
    id: t.exposeID('id', { nullable: false }),
    price: t.exposeInt('price', { directives: { cost: { weight: '7' } } }),
    stock: t.int({ resolve: () => 3, extensions: { complexity: 2 } }),
  }),
});

builder.queryType({
  directives: { tokenBucket: { name: 'api' } },
  fields: (t) => ({
    items: t.field({
      type: [ItemRef],
      args: { first: t.arg.int() },
      directives: { listSize: { assumedSize: 3 } },
      resolve: (_, { first }) => items.slice(0, first ?? 3),
    }),
  }),
});

const server = new ApolloServer<{ user: string }>({
  schema: builder.toSchema({ directives: [tokenBucketDirective, costDirective, listSizeDirective] }),
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
