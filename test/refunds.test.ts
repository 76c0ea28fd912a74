// SPEC §4, refundUnusedCost, through real HTTP on Apollo Server and GraphQL
// Yoga, on MemoryStore, RedisStore on Redis and RedisStore on a Redis
// Cluster: the response about to be sent is priced (lists by the items they
// hold, nothing below a null), the unused estimate goes back in one store call
// before the response leaves, and the next operation can spend it.
import type { Cluster, Redis } from 'ioredis';
import { afterAll, afterEach, beforeEach, describe, expect, inject, it } from 'vitest';
import { tokenBucketSubscriptions } from '../src/graphql-ws/index.js';
import { MemoryStore, Rate, RedisStore, TokenBucket, tokenBucketDirectiveTypeDefs, tokenBucketPlugin } from '../src/index.js';
import type { AcquireRequest, Admission, BatchAdmission, BucketKey, BucketStore, LimiterOptions } from '../src/index.js';
import { makeExecutableSchema } from '@graphql-tools/schema';
import { disposeClients, run, serveApolloWithSockets, socketClient } from './support/adapters.js';
import { clusterClient, redisClient, uniquePrefix } from './support/clients.js';
import { waitFor } from './support/graphql.js';
import type { ResponseBody } from './support/graphql.js';
import { MetricsProbe } from './support/metrics.js';
import { SERVERS, startHttpServer, tokensLeft } from './support/http-servers.js';
import type { ServerKind } from './support/http-servers.js';

const typeDefs = `${tokenBucketDirectiveTypeDefs}
type Query {
  items(first: Int!): [Item!]! @tokenBucket(name: "api")
  "Returns everything in stock, whatever \`first\` says."
  greedy(first: Int!): [Item!]! @tokenBucket(name: "api")
  item(id: ID!): Item @tokenBucket(name: "api")
  "Three items, the second of which fails itself (nothing below it runs)."
  flaky(first: Int!): [Item] @tokenBucket(name: "api")
}
type Mutation {
  restock(first: Int!): [Item!]! @tokenBucket(name: "api")
}
type Subscription {
  arrivals(first: Int!): [Item!]! @tokenBucket(name: "api")
}
type Item {
  id: ID!
  price: Int @tokenBucket(name: "price", cost: 2)
  child: Item
}
`;
// Slow enough that nothing visible refills during a test.
const api = new TokenBucket('api', 100, Rate.perHour(100));
const price = new TokenBucket('price', 100, Rate.perHour(100));
const buckets = [api, price];

interface Item {
  id: string;
  price: number;
  child?: Item | null;
}

let stock: Item[];
beforeEach(() => {
  stock = [1, 2, 3].map((n) => ({ id: String(n), price: n * 10 }));
});

const resolvers = {
  Query: {
    items: (_: unknown, { first }: { first: number }) => stock.slice(0, first),
    greedy: () => stock,
    item: (_: unknown, { id }: { id: string }) => stock.find((i) => i.id === id) ?? null,
    // An item that is an Error fails at its own place in the list. (An item nulled by a failing
    // non-null field of its own had its other fields run: that keeps the estimate, see refunds-errors.)
    flaky: () => [{ id: '1', price: 10 }, new Error('this item failed'), { id: '3', price: 30 }],
  },
  Mutation: { restock: (_: unknown, { first }: { first: number }) => stock.slice(0, first) },
  Subscription: {
    arrivals: {
      subscribe: async function* (_: unknown, { first }: { first: number }) {
        yield { arrivals: stock.slice(0, Math.min(first, 1)) };
      },
    },
  },
  Item: {
    child: (item: Item) => item.child ?? null,
  },
};

/** Passes every call on to a real store, counting them. */
class CountingStore implements BucketStore {
  readonly calls = { acquire: 0, refund: 0 };
  readonly refunds: AcquireRequest[][] = [];

  constructor(readonly inner: Required<Pick<BucketStore, 'acquire' | 'acquireAll' | 'refundAll' | 'checkAll' | 'reset'>>) {}

  acquire(bucket: TokenBucket, key: BucketKey, cost?: number): Promise<Admission> {
    return this.inner.acquire(bucket, key, cost);
  }

  acquireAll(requests: readonly AcquireRequest[]): Promise<BatchAdmission> {
    this.calls.acquire += 1;
    return this.inner.acquireAll(requests);
  }

  refundAll(requests: readonly AcquireRequest[]): Promise<void | number[]> {
    this.calls.refund += 1;
    this.refunds.push(requests.map((r) => ({ ...r })));
    return this.inner.refundAll(requests);
  }

  reset(bucket: TokenBucket, key: BucketKey): Promise<boolean> {
    return this.inner.reset(bucket, key);
  }
}

const clients: (Redis | Cluster)[] = [];
afterAll(async () => {
  await Promise.all(clients.map((c) => c.quit().catch(() => undefined)));
});

function redisStore(kind: 'redis' | 'cluster'): RedisStore {
  const client = kind === 'redis' ? redisClient(inject('redisUrl')) : clusterClient(inject('redisClusterNodes'));
  clients.push(client);
  return new RedisStore(client, { prefix: uniquePrefix(`refunds-${kind}`) });
}

const STORES: [string, () => RedisStore | MemoryStore][] = [
  ['MemoryStore', () => new MemoryStore()],
  ['RedisStore on Redis', () => redisStore('redis')],
  ['RedisStore on Redis Cluster', () => redisStore('cluster')],
];

const running: { stop(): Promise<void> }[] = [];
afterEach(async () => {
  await disposeClients();
  await Promise.all(running.splice(0).map((s) => s.stop()));
});

let users = 0;
const freshUser = (): string => `refunds-${++users}`;

type Limits = Partial<Omit<LimiterOptions<unknown>, 'identify'>>;

const SUBJECTS = SERVERS.flatMap((server) => STORES.map(([storeName, makeStore]) => [`${server}, ${storeName}`, server, makeStore] as const));

describe.each(SUBJECTS)('refundUnusedCost on %s', (_name, kind: ServerKind, makeStore) => {
  async function serve(limits: Limits = {}) {
    const store = new CountingStore(makeStore());
    const server = await startHttpServer(kind, { typeDefs, resolvers, limits: { store, buckets, reportCost: true, refundUnusedCost: true, ...limits } });
    running.push(server);
    const user = freshUser();
    const post = <TBody = ResponseBody>(payload: unknown) => server.post<TBody>(payload, { 'x-user': user });
    const query = (text: string) => post({ query: text });
    return { store, server, user, post, query, left: (bucket: TokenBucket) => tokensLeft(store, bucket, user) };
  }

  it('gives back what a list shorter than asked did not use, before the response leaves', async () => {
    const { store, query, left } = await serve();
    const answer = await query('{ items(first: 10) { id } }');
    expect(answer.status).toBe(200);
    // Estimated 10 × (1 + 0); three items came back: 3 × (1 + 0).
    expect(answer.body).toEqual({
      data: { items: [{ id: '1' }, { id: '2' }, { id: '3' }] },
      extensions: { rateLimit: { api: { cost: 10, actualCost: 3, remaining: 97, capacity: 100 } } },
    });
    expect(await left(api)).toBe(97);
    expect(store.calls).toEqual({ acquire: 1, refund: 1 });
    expect(store.refunds[0]!.map(({ bucket, cost }) => [bucket.name, cost])).toEqual([['api', 7]]);
  });

  it('lets the next operation spend the tokens given back', async () => {
    const { query } = await serve();
    // Estimated at the whole capacity; three items came back.
    expect((await query('{ items(first: 100) { id } }')).body.extensions).toEqual({
      rateLimit: { api: { cost: 100, actualCost: 3, remaining: 97, capacity: 100 } },
    });
    // Without the refund the bucket would be empty now.
    stock = Array.from({ length: 97 }, (_, i) => ({ id: String(i + 1), price: 1 }));
    const next = await query('{ items(first: 97) { id } }');
    expect(next.status).toBe(200);
    expect(next.body.extensions).toEqual({ rateLimit: { api: { cost: 97, actualCost: 97, remaining: 0, capacity: 100 } } });
    const denied = await query('{ items(first: 1) { id } }');
    expect(denied.status).toBe(429);
  });

  it('charges nothing below a null object', async () => {
    const { query, left } = await serve();
    const answer = await query('{ item(id: "missing") { id child { id child { id } } } }');
    expect(answer.status).toBe(200);
    // Estimated 1 × (1 + 1 × (1 + 1 × 1)); the item is null: its own weight only.
    expect(answer.body).toEqual({ data: { item: null }, extensions: { rateLimit: { api: { cost: 3, actualCost: 1, remaining: 99, capacity: 100 } } } });
    expect(await left(api)).toBe(99);
  });

  it('charges a failed item of a list its own weight and nothing below it', async () => {
    const { query, left } = await serve();
    const answer = await query('{ flaky(first: 5) { id price } }');
    expect(answer.status).toBe(200);
    expect(answer.body.data).toEqual({ flaky: [{ id: '1', price: 10 }, null, { id: '3', price: 30 }] });
    expect(answer.body.errors?.map((e) => e.path)).toEqual([['flaky', 1]]);
    // Estimated api 5 × 1 and price 5 × 2; three items came back, prices of two.
    expect(answer.body.extensions).toEqual({
      rateLimit: { api: { cost: 5, actualCost: 3, remaining: 97, capacity: 100 }, price: { cost: 10, actualCost: 4, remaining: 96, capacity: 100 } },
    });
    expect(await left(price)).toBe(96);
  });

  it('charges a fixed cost once per time its field appears in the short list', async () => {
    const { store, query, left } = await serve();
    const answer = await query('{ items(first: 10) { price child { id } } }');
    // Estimated api 10 × (1 + 1), price 10 × 2; three items, each with a null child (1).
    expect(answer.body.extensions).toEqual({
      rateLimit: { api: { cost: 20, actualCost: 6, remaining: 94, capacity: 100 }, price: { cost: 20, actualCost: 6, remaining: 94, capacity: 100 } },
    });
    expect(await left(price)).toBe(94);
    expect(store.calls).toEqual({ acquire: 1, refund: 1 });
  });

  it('refunds a mutation the same way', async () => {
    const { query, left } = await serve();
    const answer = await query('mutation { restock(first: 10) { id } }');
    expect(answer.body.extensions).toEqual({ rateLimit: { api: { cost: 10, actualCost: 3, remaining: 97, capacity: 100 } } });
    expect(await left(api)).toBe(97);
  });

  it('never gives back more than the estimate: more items than asked pay the estimate, with no refund call', async () => {
    const { store, query, left } = await serve();
    const answer = await query('{ greedy(first: 2) { id price } }');
    expect(answer.body.data?.['greedy']).toHaveLength(3);
    expect(answer.body.extensions).toEqual({
      rateLimit: { api: { cost: 2, actualCost: 2, remaining: 98, capacity: 100 }, price: { cost: 4, actualCost: 4, remaining: 96, capacity: 100 } },
    });
    expect(await left(api)).toBe(98);
    expect(store.calls).toEqual({ acquire: 1, refund: 0 });
  });

  it('makes no second store call when the response used the whole estimate', async () => {
    const { store, query } = await serve();
    for (let i = 0; i < 3; i++) {
      const answer = await query('{ items(first: 3) { id price } }');
      expect(answer.body.extensions).toEqual({
        rateLimit: {
          api: { cost: 3, actualCost: 3, remaining: 97 - 3 * i, capacity: 100 },
          price: { cost: 6, actualCost: 6, remaining: 94 - 6 * i, capacity: 100 },
        },
      });
    }
    expect(store.calls).toEqual({ acquire: 3, refund: 0 });
  });

  it('refunds each operation of a batch on its own', async () => {
    const { store, post, left } = await serve();
    const answer = await post<ResponseBody[]>([{ query: '{ items(first: 10) { id } }' }, { query: '{ item(id: "2") { id } }' }]);
    expect(answer.status).toBe(200);
    expect(answer.body.map((r) => (r.extensions?.['rateLimit'] as Record<string, unknown>)['api'])).toEqual([
      { cost: 10, actualCost: 3, remaining: expect.any(Number), capacity: 100 },
      { cost: 1, actualCost: 1, remaining: expect.any(Number), capacity: 100 },
    ]);
    expect(await left(api)).toBe(96);
    expect(store.calls).toEqual({ acquire: 2, refund: 1 });
  });

  it('pays the estimate without the option', async () => {
    const { store, query, left } = await serve({ refundUnusedCost: false });
    const answer = await query('{ items(first: 10) { id } }');
    expect(answer.body.extensions).toEqual({ rateLimit: { api: { cost: 10, remaining: 90, capacity: 100 } } });
    expect(await left(api)).toBe(90);
    expect(store.calls).toEqual({ acquire: 1, refund: 0 });
  });

  it('sends the RateLimit fields with what is left after the refund', async () => {
    const { query } = await serve({ rateLimitHeaders: true });
    const answer = await query('{ items(first: 10) { id } }');
    expect(answer.headers.get('ratelimit')).toBe('"api";r=97;t=108');
  });
});

describe.each(SERVERS)('refundUnusedCost with a store that fails, on %s', (kind: ServerKind) => {
  async function serve(store: BucketStore, limits: Limits = {}) {
    const server = await startHttpServer(kind, { typeDefs, resolvers, limits: { store, buckets, reportCost: true, refundUnusedCost: true, ...limits } });
    running.push(server);
    return server;
  }

  it('logs a failing refund and sends the response unchanged, at its estimate', async () => {
    const inner = new MemoryStore();
    const store: BucketStore = {
      acquire: (bucket, key, cost) => inner.acquire(bucket, key, cost),
      acquireAll: (requests) => inner.acquireAll(requests),
      refundAll: () => Promise.reject(new Error('READONLY You can\'t write against a read only replica.')),
      reset: (bucket, key) => inner.reset(bucket, key),
    };
    const server = await serve(store);
    const user = freshUser();
    const answer = await server.post({ query: '{ items(first: 10) { id } }' }, { 'x-user': user });
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({
      data: { items: [{ id: '1' }, { id: '2' }, { id: '3' }] },
      extensions: { rateLimit: { api: { cost: 10, actualCost: 3, remaining: 90, capacity: 100 } } },
    });
    expect(server.logger.warnings.join('\n')).toMatch(/refund failed.*READONLY/);
    expect(await tokensLeft(inner, api, user)).toBe(90);
  });

  it('waits for a refund at most storeTimeoutMs', async () => {
    const inner = new MemoryStore();
    const store: BucketStore = {
      acquire: (bucket, key, cost) => inner.acquire(bucket, key, cost),
      acquireAll: (requests) => inner.acquireAll(requests),
      refundAll: () => new Promise(() => {}),
      reset: (bucket, key) => inner.reset(bucket, key),
    };
    const server = await serve(store, { storeTimeoutMs: 200 });
    const started = performance.now();
    const answer = await server.post({ query: '{ items(first: 10) { id } }' }, { 'x-user': freshUser() });
    const ms = performance.now() - started;
    expect(answer.status).toBe(200);
    expect(answer.body.data).toEqual({ items: [{ id: '1' }, { id: '2' }, { id: '3' }] });
    expect(ms).toBeGreaterThanOrEqual(195);
    expect(ms).toBeLessThan(2000);
    expect(server.logger.warnings.join('\n')).toMatch(/refund failed.*did not answer within 200 ms/);
  });

  it('gives back with refund, one call per bucket, on a store without refundAll', async () => {
    const inner = new MemoryStore();
    const refunded: [string, number][] = [];
    const store: BucketStore = {
      acquire: (bucket, key, cost) => inner.acquire(bucket, key, cost),
      acquireAll: (requests) => inner.acquireAll(requests),
      refund: (bucket, key, tokens) => {
        refunded.push([bucket.name, tokens]);
        return inner.refund(bucket, key, tokens);
      },
      reset: (bucket, key) => inner.reset(bucket, key),
    };
    const server = await serve(store);
    const user = freshUser();
    const answer = await server.post({ query: '{ items(first: 10) { price } }' }, { 'x-user': user });
    expect(answer.status).toBe(200);
    expect(refunded.sort()).toEqual([['api', 7], ['price', 14]]);
    expect(await tokensLeft(inner, api, user)).toBe(97);
    expect(await tokensLeft(inner, price, user)).toBe(94);
  });
});

describe.each(SERVERS)('refundUnusedCost with the deny cache and metrics, on %s', (kind: ServerKind) => {
  it('lets an operation through once a refund gave back what a remembered denial lacked', async () => {
    let release = (): void => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    const slowResolvers = {
      ...resolvers,
      Query: { ...resolvers.Query, items: async (_: unknown, { first }: { first: number }) => (first === 100 ? (await gate, stock) : stock.slice(0, first)) },
    };
    const store = new MemoryStore();
    const server = await startHttpServer(kind, { typeDefs, resolvers: slowResolvers, limits: { store, buckets, refundUnusedCost: true, denyCache: true } });
    running.push(server);
    const user = freshUser();
    const post = (query: string) => server.post({ query }, { 'x-user': user });
    // Takes the whole bucket, then waits in its resolver.
    const whole = post('{ items(first: 100) { id } }');
    await waitForTokens(store, user, 0);
    // Denied by the store: this process remembers the denial for its wait (an hour).
    expect((await post('{ items(first: 50) { id } }')).status).toBe(429);
    expect((await post('{ items(first: 50) { id } }')).status).toBe(429);
    release();
    expect((await whole).status).toBe(200);
    expect(await tokensLeft(store, api, user)).toBe(97);
    // The refund made the remembered denial wrong: the store is asked again.
    const after = await post('{ items(first: 50) { id } }');
    expect(after.status).toBe(200);
  });

  it('records the actual cost of each bucket', async () => {
    const probe = new MetricsProbe();
    try {
      const server = await startHttpServer(kind, { typeDefs, resolvers, limits: { store: new MemoryStore(), buckets, refundUnusedCost: true, meterProvider: probe.provider } });
      running.push(server);
      const user = freshUser();
      expect((await server.post({ query: '{ items(first: 10) { price } }' }, { 'x-user': user })).status).toBe(200);
      expect((await server.post({ query: '{ item(id: "missing") { id } }' }, { 'x-user': user })).status).toBe(200);
      const readings = await probe.read();
      expect(readings.histogram('graphql.token_bucket.cost.actual', 'api')).toMatchObject({ count: 2, sum: 3 + 1, min: 1, max: 3 });
      expect(readings.histogram('graphql.token_bucket.cost.actual', 'price')).toMatchObject({ count: 1, sum: 6 });
      expect(readings.histogram('graphql.token_bucket.cost.estimated', 'api')).toMatchObject({ count: 2, sum: 10 + 1 });
    } finally {
      await probe.shutdown();
    }
  });
});

/** Waits until the bucket holds `tokens` (an operation under way has taken them). */
async function waitForTokens(store: BucketStore, user: string, tokens: number): Promise<void> {
  await waitFor(`${tokens} tokens left`, 2000, async () => (await tokensLeft(store, api, user)) === tokens);
}

describe('refundUnusedCost elsewhere', () => {
  it('needs a store that can give tokens back', () => {
    const store: BucketStore = { acquire: () => Promise.resolve({ allowed: true, remaining: 0 }), reset: () => Promise.resolve(false) };
    expect(() => tokenBucketPlugin({ store, buckets, identify: () => 'x', refundUnusedCost: true })).toThrow(/"refundUnusedCost" needs a store with refundAll or refund/);
    expect(() => tokenBucketPlugin({ store: new MemoryStore(), buckets, identify: () => 'x', refundUnusedCost: 1 as unknown as boolean })).toThrow(
      /option "refundUnusedCost" must be a boolean/,
    );
  });

  it('refunds queries over graphql-ws, and keeps a subscription at its estimate', async () => {
    const store = new MemoryStore();
    const schema = makeExecutableSchema({ typeDefs, resolvers });
    const server = await serveApolloWithSockets({
      schema,
      sockets: tokenBucketSubscriptions({ schema, store, buckets, identify: (ctx) => String(ctx.connectionParams?.['user']), reportCost: true, refundUnusedCost: true }),
    });
    running.push(server);
    const user = freshUser();
    const client = socketClient(server.wsUrl, { user });

    const query = await run(client, { query: '{ items(first: 10) { id } }' });
    expect(query.results).toEqual([
      { data: { items: [{ id: '1' }, { id: '2' }, { id: '3' }] }, extensions: { rateLimit: { api: { cost: 10, actualCost: 3, remaining: 97, capacity: 100 } } } },
    ]);
    expect(await tokensLeft(store, api, user)).toBe(97);

    const subscription = await run(client, { query: 'subscription { arrivals(first: 10) { id } }' });
    expect(subscription.completed).toBe(true);
    // Its first event reports what starting it cost: the estimate, nothing given back.
    expect(subscription.results).toEqual([{ data: { arrivals: [{ id: '1' }] }, extensions: { rateLimit: { api: { cost: 10, remaining: 87, capacity: 100 } } } }]);
    expect(await tokensLeft(store, api, user)).toBe(87);
  });

  it('keeps a subscription over GraphQL Yoga at its estimate', async () => {
    const { postSse } = await import('./support/adapters.js');
    const store = new MemoryStore();
    const server = await startHttpServer('GraphQL Yoga', { typeDefs, resolvers, limits: { store, buckets, refundUnusedCost: true } });
    running.push(server);
    const user = freshUser();
    const answer = await postSse(server.url, { query: 'subscription { arrivals(first: 10) { id } }' }, { 'x-user': user });
    expect(answer.status).toBe(200);
    expect(answer.events.filter((e) => e.event === 'next').map((e) => e.data)).toEqual([{ data: { arrivals: [{ id: '1' }] } }]);
    expect(await tokensLeft(store, api, user)).toBe(90);
  });
});
