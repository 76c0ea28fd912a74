// The deny cache forgets a pair's denial whenever tokens come back to it
// through the same store object: the application's own `store.reset`, and a
// refund made by another limiter of the process (graphql-ws hooks beside the
// Apollo Server plugin). Until then it denied, for the rest of the wait it
// remembered, what the store would admit.
import type { BaseContext } from '@apollo/server';
import { makeExecutableSchema } from '@graphql-tools/schema';
import { afterAll, afterEach, describe, expect, inject, it } from 'vitest';
import { tokenBucketSubscriptions } from '../src/graphql-ws/index.js';
import { MemoryStore, Rate, RedisStore, TokenBucket, tokenBucketDirectiveTypeDefs, tokenBucketPlugin } from '../src/index.js';
import type { BucketStore } from '../src/index.js';
import { disposeClients, postJson, run, serveApolloWithSockets, socketClient } from './support/adapters.js';
import { redisClient, uniquePrefix } from './support/clients.js';
import { SERVERS, startHttpServer, tokensLeft } from './support/http-servers.js';
import type { RunningHttpServer } from './support/http-servers.js';

const typeDefs = `${tokenBucketDirectiveTypeDefs}
type Query {
  books(first: Int = 10): [Book!]! @tokenBucket(name: "api")
  "Answers after 300 ms, with two books whatever \`first\` says."
  slow(first: Int = 10): [Book!]! @tokenBucket(name: "api")
}
type Book { title: String }
`;
// Slow enough that nothing visible refills during a test: a denial is remembered for minutes.
const api = new TokenBucket('api', 10, Rate.perHour(10));
const twoBooks = () => [{ title: 'Dune' }, { title: 'Emma' }];
const resolvers = {
  Query: {
    books: (_: unknown, { first }: { first: number }) => twoBooks().slice(0, first),
    slow: async () => {
      await new Promise((resolve) => setTimeout(resolve, 300));
      return twoBooks();
    },
  },
};

const redis = redisClient(inject('redisUrl'));
const running: RunningHttpServer[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.stop()));
  await disposeClients();
});
afterAll(async () => {
  await redis.quit();
});

const STORES = ['MemoryStore', 'RedisStore'] as const;
function makeStore(kind: (typeof STORES)[number]): BucketStore {
  return kind === 'MemoryStore' ? new MemoryStore() : new RedisStore(redis, { prefix: uniquePrefix('returns') });
}

describe.each(SERVERS)('%s', (kind) => {
  it.each(STORES)('admits at once after the application resets the bucket through the same %s', async (storeKind) => {
    const store = makeStore(storeKind);
    const server = await startHttpServer(kind, { typeDefs, resolvers, limits: { store, buckets: [api] } });
    running.push(server);
    const ann = { 'x-user': 'ann' };
    expect((await server.post({ query: '{ books(first: 10) { title } }' }, ann)).status).toBe(200);
    expect((await server.post({ query: '{ books(first: 10) { title } }' }, ann)).status).toBe(429);

    expect(await store.reset(api, 'ann')).toBe(true);
    expect(await tokensLeft(store, api, 'ann')).toBe(10);
    const after = await server.post({ query: '{ books(first: 10) { title } }' }, ann);
    expect(after.status).toBe(200);
    expect(after.body.data).toEqual({ books: twoBooks() });
  });
});

describe.each(STORES)('two limiters of one process on one %s', (storeKind) => {
  it("a refund over graphql-ws forgets the denial Apollo Server's plugin remembers", async () => {
    const store = makeStore(storeKind);
    const schema = makeExecutableSchema({ typeDefs, resolvers });
    const server = await serveApolloWithSockets<BaseContext>({
      schema,
      sockets: { ...tokenBucketSubscriptions({ schema, store, buckets: [api], identify: () => 'cat', refundUnusedCost: true }) },
      plugins: [tokenBucketPlugin({ store, buckets: [api], identify: () => 'cat' })],
    });
    try {
      // 10 books asked for over the socket: all 10 tokens taken while it runs, 8 given back after.
      const slow = run(socketClient(server.wsUrl), { query: '{ slow(first: 10) { title } }' });
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect((await postJson(server.url, { query: '{ books(first: 5) { title } }' })).status).toBe(429);
      expect((await slow).results).toEqual([{ data: { slow: twoBooks() } }]);
      expect(await tokensLeft(store, api, 'cat')).toBe(8);

      const again = await postJson(server.url, { query: '{ books(first: 5) { title } }' });
      expect(again.status).toBe(200);
      expect(await tokensLeft(store, api, 'cat')).toBe(3);
    } finally {
      await server.stop();
    }
  });
});
