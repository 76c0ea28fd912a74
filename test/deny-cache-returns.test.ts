// The deny cache forgets a pair's denial whenever tokens come back to it
// through the same store object: the application's own `store.reset`, and a
// refund made by another limiter of the process (graphql-ws hooks beside the
// Apollo Server plugin). Until then it denied, for the rest of the wait it
// remembered, what the store would admit. So does a denial the store decided
// before a refund landed and answered after it.
import type { BaseContext } from '@apollo/server';
import { makeExecutableSchema } from '@graphql-tools/schema';
import { parse } from 'graphql';
import type { OperationDefinitionNode } from 'graphql';
import { afterAll, afterEach, describe, expect, inject, it } from 'vitest';
import { Limiter } from '../src/core/limiter.js';
import { refundUnused } from '../src/core/refunds.js';
import { tokenBucketSubscriptions } from '../src/graphql-ws/index.js';
import { MemoryStore, Rate, RedisStore, TokenBucket, tokenBucketDirectiveTypeDefs, tokenBucketPlugin } from '../src/index.js';
import type { BucketStore } from '../src/index.js';
import { captureLogger } from './support/graphql.js';
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

describe.each(STORES)('a refund landing while a denial is on its way, on %s', (storeKind) => {
  it('is not undone by remembering that denial', async () => {
    const schema = makeExecutableSchema({ typeDefs, resolvers });
    const operation = (query: string) => {
      const document = parse(query);
      return { schema, document, operation: document.definitions[0] as OperationDefinitionNode, variables: {}, context: {}, logger: captureLogger() };
    };
    let denials = 0;
    const stale: number[] = [];
    // The refund is sent 0 to 39 turns of process.nextTick after the denied acquire (RedisStore sends
    // the acquires of a tick at its end): somewhere in there it lands after the store decided the
    // acquire and before the limiter has read the denial.
    for (let delay = 0; delay < 40; delay++) {
      const store = makeStore(storeKind);
      const limiter = new Limiter<unknown>({ store, buckets: [api], identify: () => 'dan', refundUnusedCost: true }, 'test');
      const all = operation('{ books(first: 10) { title } }');
      const taken = await limiter.decide(all);
      if (taken.kind !== 'allowed') throw new Error(`expected the first operation admitted, got ${taken.kind}`);
      const short = limiter.decide(operation('{ books(first: 5) { title } }'));
      for (let i = 0; i < delay; i++) await new Promise((resolve) => process.nextTick(resolve));
      // The response held one book of ten: 9 tokens go back.
      const [denied, refunded] = await Promise.all([short, refundUnused(limiter, all, taken, { data: { books: [{ title: 'Dune' }] } })]);
      expect(refunded.actualCosts).toEqual([1]);
      if (denied.kind !== 'denied') continue;
      expect(await tokensLeft(store, api, 'dan')).toBe(9);
      denials += 1;
      if ((await limiter.decide(operation('{ books(first: 5) { title } }'))).kind !== 'allowed') stale.push(delay);
    }
    expect(denials).toBeGreaterThan(20);
    expect(stale).toEqual([]);
  });
});
