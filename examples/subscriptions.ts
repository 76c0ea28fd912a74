// graphql-ws subscriptions beside Apollo Server (docs/graphql-ws.md):
// `npx tsx examples/subscriptions.ts`. Type-checked and run by `npm test`.
import { createServer } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { ApolloServer } from '@apollo/server';
import { ApolloServerPluginDrainHttpServer } from '@apollo/server/plugin/drainHttpServer';
import { expressMiddleware } from '@as-integrations/express5';
import { makeExecutableSchema } from '@graphql-tools/schema';
import express from 'express';
import type { Context } from 'graphql-ws';
import { useServer } from 'graphql-ws/use/ws';
import type { Extra } from 'graphql-ws/use/ws';
import { WebSocketServer } from 'ws';
import { MemoryStore, Rate, TokenBucket, tokenBucketDirectiveTypeDefs, tokenBucketPlugin } from '../src/index.js';
import { tokenBucketSubscriptions } from '../src/graphql-ws/index.js';

// 10 subscriptions in a burst, then one a minute, per user.
const live = new TokenBucket('live', 10, Rate.perMinute(1));

const schema = makeExecutableSchema({
  typeDefs: `#graphql
    ${tokenBucketDirectiveTypeDefs}
    type Query { hello: String }
    type Subscription {
      clock: String! @tokenBucket(name: "live", cost: 1)
    }
  `,
  resolvers: {
    Query: { hello: () => 'hello' },
    Subscription: {
      clock: {
        subscribe: async function* () {
          for (;;) {
            yield { clock: new Date().toISOString() };
            await sleep(1000);
          }
        },
      },
    },
  },
});

const store = new MemoryStore(); // or new RedisStore(redis), shared by both transports
const app = express();
const httpServer = createServer(app);
const wsServer = new WebSocketServer({ server: httpServer, path: '/graphql' });

const sockets = useServer(
  {
    schema,
    ...tokenBucketSubscriptions({
      schema,
      store,
      buckets: [live],
      // graphql-ws's context: connectionParams from the client, the upgrade request in `extra`.
      identify: (ctx: Context<{ userId?: string } | undefined, Extra>) => ctx.connectionParams?.userId ?? ctx.extra.request.socket.remoteAddress ?? 'unknown',
    }),
  },
  wsServer,
);

const server = new ApolloServer<{ userId: string }>({
  schema,
  plugins: [
    // Queries and mutations over HTTP, from the same store and buckets.
    tokenBucketPlugin({ store, buckets: [live], identify: ({ contextValue }) => contextValue.userId }),
    ApolloServerPluginDrainHttpServer({ httpServer }),
    { serverWillStart: async () => ({ drainServer: async () => void (await sockets.dispose()) }) },
  ],
});
await server.start();
app.use(
  '/graphql',
  express.json(),
  expressMiddleware(server, { context: async ({ req }) => ({ userId: String(req.headers['x-user-id'] ?? req.socket.remoteAddress) }) }),
);
const port = Number(process.env.PORT ?? 4000);
httpServer.listen(port, () => console.log(`ready at http://localhost:${port}/graphql and ws://localhost:${port}/graphql`));
