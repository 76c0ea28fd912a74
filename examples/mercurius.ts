// Fastify and Mercurius with mercuriusTokenBucket (docs/mercurius.md):
// `npx tsx examples/mercurius.ts`. Type-checked and run by `npm test`.
import { setTimeout as sleep } from 'node:timers/promises';
import Fastify from 'fastify';
import mercurius from 'mercurius';
import { MemoryStore, Rate, TokenBucket, tokenBucketDirectiveTypeDefs } from '../src/index.js';
import { mercuriusTokenBucket } from '../src/mercurius/index.js';

declare module 'mercurius' {
  interface MercuriusContext {
    /** Who sent the operation: `x-user-id` over HTTP, the `userId` connection parameter over the WebSocket. */
    userId?: string | undefined;
  }
}

// 20 searches in a burst, then one every 3 seconds, per user; 10 subscriptions, then one a minute.
const search = new TokenBucket('search', 20, new Rate(1, 3000));
const live = new TokenBucket('live', 10, Rate.perMinute(1));

const app = Fastify();
await app.register(mercurius, {
  schema: `
    ${tokenBucketDirectiveTypeDefs}
    type Query {
      search(term: String!): [String!]! @tokenBucket(name: "search", cost: 1)
    }
    type Subscription {
      clock: String! @tokenBucket(name: "live", cost: 1)
    }
  `,
  resolvers: {
    Query: { search: (_: unknown, { term }: { term: string }) => [`${term}?`] },
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
  context: (request) => ({ userId: request.headers['x-user-id']?.toString() }),
  subscription: { onConnect: ({ payload }) => ({ userId: (payload as { userId?: string } | undefined)?.userId }) },
  allowBatchedQueries: true,
});
// Registered after mercurius: its hooks run after those of the plugins registered before the server is ready.
await app.register(mercuriusTokenBucket, {
  store: new MemoryStore(), // or new RedisStore(redis) across replicas
  buckets: [search, live],
  // Mercurius' context: what `context` and `onConnect` return; context.reply.request is the Fastify request.
  identify: (context) => context.userId ?? context.reply.request.ip,
  reportCost: true,
});

const port = Number(process.env.PORT ?? 4000);
await app.listen({ port });
console.log(`ready at http://localhost:${port}/graphql and ws://localhost:${port}/graphql`);
