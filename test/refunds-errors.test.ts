// refundUnusedCost prices the response, where a null means nothing below it
// ran. An error nulls more than its own field when that field is non-null:
// its parent (a list item, an object, the whole `data`) turns null too, and
// the parent's other fields had run by then. Such a response cannot tell
// what the work cost, so the operation keeps its estimate: otherwise one
// failing non-null field (a client asking a field it may not read) would make
// any operation free. Through Apollo Server and GraphQL Yoga over HTTP and
// graphql-ws over a socket, on MemoryStore and on Redis.
import { makeExecutableSchema } from '@graphql-tools/schema';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, inject, it } from 'vitest';
import { tokenBucketSubscriptions } from '../src/graphql-ws/index.js';
import { MemoryStore, Rate, RedisStore, TokenBucket, tokenBucketDirectiveTypeDefs } from '../src/index.js';
import type { BucketStore } from '../src/index.js';
import { disposeClients, run, serveApolloWithSockets, socketClient } from './support/adapters.js';
import { redisClient, uniquePrefix } from './support/clients.js';
import { SERVERS, startHttpServer, tokensLeft } from './support/http-servers.js';

const typeDefs = `${tokenBucketDirectiveTypeDefs}
type Query {
  items(first: Int!): [Item!]! @tokenBucket(name: "api")
  people(first: Int!): [Person] @tokenBucket(name: "api")
  viewer: Viewer
  "Always fails; non-null, so its failure nulls all of data."
  boom: String!
  "Always fails; nullable, so only itself is null."
  maybe: String
}
type Viewer {
  items(first: Int!): [Item!]! @tokenBucket(name: "api")
  "Fails for everybody: nulls the viewer."
  secret: String!
}
type Person {
  friends(first: Int!): [Item!]!
  "Fails for everybody: nulls the person."
  secret: String!
}
type Item { id: ID! }
`;
// Slow enough that nothing visible refills during a test.
const api = new TokenBucket('api', 1000, Rate.perHour(1000));

/** Items the resolvers produced: the work a client made the server do. */
let produced = 0;
const list = (_: unknown, { first }: { first: number }) => {
  produced += first;
  return Array.from({ length: first }, (_x, i) => ({ id: String(i) }));
};
const fail = () => {
  throw new Error('not for you');
};
const resolvers = {
  Query: { items: list, people: (_: unknown, { first }: { first: number }) => Array.from({ length: first }, () => ({})), viewer: () => ({}), boom: fail, maybe: fail },
  Viewer: { items: list, secret: fail },
  Person: { friends: list, secret: fail },
};

const redisClients: Redis[] = [];
afterAll(async () => {
  await Promise.all(redisClients.map((c) => c.quit().catch(() => undefined)));
});
const STORES: [string, () => BucketStore][] = [
  ['MemoryStore', () => new MemoryStore()],
  [
    'RedisStore',
    () => {
      const client = redisClient(inject('redisUrl'));
      redisClients.push(client);
      return new RedisStore(client, { prefix: uniquePrefix('refunds-errors') });
    },
  ],
];

const running: { stop(): Promise<void> }[] = [];
afterEach(async () => {
  await disposeClients();
  await Promise.all(running.splice(0).map((s) => s.stop()));
});

let users = 0;
const freshUser = (): string => `refunds-errors-${++users}`;

/** What each operation costs, what its response holds, and what it keeps. */
const CASES = [
  {
    name: 'a failing non-null root field nulls all of data',
    query: '{ items(first: 100) { id } boom }',
    data: null,
    estimate: 100,
    produced: 100,
  },
  {
    name: 'a failing non-null field nulls the object above it',
    query: '{ viewer { items(first: 100) { id } secret } }',
    data: { viewer: null },
    estimate: 100,
    produced: 100,
  },
  {
    name: "a failing non-null field nulls each item of a list, after the items' lists were made",
    query: '{ people(first: 10) { friends(first: 10) { id } secret } }',
    data: { people: Array(10).fill(null) },
    // 10 × (Person 1 + 10 × Item 1)
    estimate: 110,
    produced: 100,
  },
] as const;

describe.each(STORES)('refundUnusedCost on %s, when an error nulls more than its own field', (_storeName, makeStore) => {
  describe.each(SERVERS)('over %s', (kind) => {
    it.each(CASES)('keeps the estimate: $name', async ({ query, data, estimate, produced: made }) => {
      const store = makeStore();
      const server = await startHttpServer(kind, { typeDefs, resolvers, limits: { store, buckets: [api], refundUnusedCost: true, reportCost: true } });
      running.push(server);
      const user = freshUser();
      const before = produced;
      const answer = await server.post({ query }, { 'x-user': user });
      expect(answer.status).toBe(200);
      expect(answer.body.data).toEqual(data);
      expect(answer.body.errors?.length).toBeGreaterThan(0);
      // The work was done...
      expect(produced - before).toBe(made);
      // ...and paid for.
      expect(answer.body.extensions).toEqual({ rateLimit: { api: { cost: estimate, actualCost: estimate, remaining: 1000 - estimate, capacity: 1000 } } });
      expect(await tokensLeft(store, api, user)).toBe(1000 - estimate);
    });

    it('still refunds when the failing field is nullable: only it is null, and nothing below it ran', async () => {
      const store = makeStore();
      const server = await startHttpServer(kind, { typeDefs, resolvers, limits: { store, buckets: [api], refundUnusedCost: true, reportCost: true } });
      running.push(server);
      const user = freshUser();
      const answer = await server.post({ query: '{ viewer { items(first: 100) { id } } maybe }' }, { 'x-user': user });
      expect(answer.body.data).toEqual({ viewer: { items: expect.any(Array) }, maybe: null });
      expect(answer.body.extensions).toEqual({ rateLimit: { api: { cost: 100, actualCost: 100, remaining: 900, capacity: 1000 } } });
      const short = await server.post({ query: '{ people(first: 10) { friends(first: 10) { id } } maybe }' }, { 'x-user': user });
      expect(short.body.extensions).toEqual({ rateLimit: { api: { cost: 110, actualCost: 110, remaining: 790, capacity: 1000 } } });
      const refunded = await server.post({ query: '{ items(first: 100) { id } maybe }' }, { 'x-user': user });
      expect(refunded.body.data).toEqual({ items: expect.any(Array), maybe: null });
      expect((refunded.body.data?.['items'] as unknown[]).length).toBe(100);
      expect(await tokensLeft(store, api, user)).toBe(690);
    });
  });

  it.each(CASES)('keeps the estimate over graphql-ws: $name', async ({ query, data, estimate }) => {
    const store = makeStore();
    const schema = makeExecutableSchema({ typeDefs, resolvers });
    const server = await serveApolloWithSockets({
      schema,
      sockets: tokenBucketSubscriptions({ schema, store, buckets: [api], identify: (ctx) => String(ctx.connectionParams?.['user']), reportCost: true, refundUnusedCost: true }),
    });
    running.push(server);
    const user = freshUser();
    const outcome = await run(socketClient(server.wsUrl, { user }), { query });
    expect(outcome.results).toHaveLength(1);
    expect(outcome.results[0]!.data).toEqual(data);
    expect(outcome.results[0]!.extensions).toEqual({ rateLimit: { api: { cost: estimate, actualCost: estimate, remaining: 1000 - estimate, capacity: 1000 } } });
    expect(await tokensLeft(store, api, user)).toBe(1000 - estimate);
  });
});
