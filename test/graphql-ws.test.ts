// SPEC §6, graphql-ws: a real graphql-ws client against Apollo Server with
// graphql-ws's useServer on the same port. Subscriptions are priced when they
// start and refused with RATE_LIMITED in an `error` message (no event, no
// subscribe resolver); operations sent over the socket are charged as over
// HTTP, sharing the buckets; `chargeEachEvent` charges every event. On
// MemoryStore and on RedisStore.
import { EventEmitter, on } from 'node:events';
import type { BaseContext } from '@apollo/server';
import { makeExecutableSchema } from '@graphql-tools/schema';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, inject, it } from 'vitest';
import { tokenBucketSubscriptions } from '../src/graphql-ws/index.js';
import type { TokenBucketSubscriptionsOptions } from '../src/graphql-ws/index.js';
import { MemoryStore, Rate, RedisStore, TokenBucket, tokenBucketDirectiveTypeDefs, tokenBucketPlugin } from '../src/index.js';
import type { BucketKey, BucketStore } from '../src/index.js';
import { redisClient, uniquePrefix } from './support/clients.js';
import { RecordingStore, captureLogger, waitFor } from './support/graphql.js';
import { disposeClients, run, serveApolloWithSockets, socketClient, start } from './support/adapters.js';
import type { ApolloWithSockets, Outcome } from './support/adapters.js';

const typeDefs = `${tokenBucketDirectiveTypeDefs}
type Query {
  book: String @tokenBucket(name: "reads", cost: 1)
  free: Int
}
type Mutation {
  like: Int @tokenBucket(name: "writes", cost: 2)
}
type Subscription {
  ticks(from: Int! = 1): Int! @tokenBucket(name: "live", cost: 1)
  news: String! @tokenBucket(name: "live", cost: 1)
  quiet: Int
}
`;

// One token a minute: a denied subscription waits about 60 s.
const live = new TokenBucket('live', 3, Rate.perMinute(1));
const reads = new TokenBucket('reads', 3, Rate.perMinute(1));
const writes = new TokenBucket('writes', 4, Rate.perMinute(1));
const buckets = [live, reads, writes];

interface Harness {
  server: ApolloWithSockets;
  store: RecordingStore;
  /** How many times each subscription's `subscribe` resolver ran. */
  subscribed: { ticks: number; news: number };
  /** Generators of `ticks` that were closed (ran their `finally`). */
  ticksClosed: { count: number };
  news: EventEmitter;
  left(bucket: TokenBucket, key: BucketKey): Promise<number>;
}

const redisClients: Redis[] = [];
afterAll(async () => {
  await Promise.all(redisClients.map((c) => c.quit().catch(() => undefined)));
});

function redisStore(): RedisStore {
  const client = redisClient(inject('redisUrl'));
  redisClients.push(client);
  return new RedisStore(client, { prefix: uniquePrefix('graphql-ws') });
}

const stops: (() => Promise<void>)[] = [];
afterEach(async () => {
  await disposeClients();
  await Promise.all(stops.splice(0).map((stop) => stop()));
});

type SocketOptions = Partial<TokenBucketSubscriptionsOptions<Record<string, unknown> | undefined>>;

async function harness(makeStore: () => BucketStore & Required<Pick<BucketStore, 'acquireAll'>>, options: SocketOptions = {}): Promise<Harness> {
  const subscribed = { ticks: 0, news: 0 };
  const ticksClosed = { count: 0 };
  const news = new EventEmitter();
  const schema = makeExecutableSchema({
    typeDefs,
    resolvers: {
      Query: { book: () => 'Dune', free: () => 0 },
      Mutation: { like: () => 1 },
      Subscription: {
        ticks: {
          subscribe: async function* (_: unknown, { from }: { from: number }) {
            subscribed.ticks += 1;
            try {
              for (let n = from; n >= 0; n--) yield { ticks: n };
            } finally {
              ticksClosed.count += 1;
            }
          },
        },
        news: {
          subscribe: () => {
            subscribed.news += 1;
            return on(news, 'news');
          },
          resolve: ([headline]: [string]) => headline,
        },
        quiet: { subscribe: async function* () { yield { quiet: 1 }; } },
      },
    },
  });
  const inner = makeStore();
  const store = new RecordingStore({ acquire: (...a) => inner.acquire(...a), acquireAll: (r) => inner.acquireAll(r), reset: (...a) => inner.reset(...a) });
  const server = await serveApolloWithSockets<BaseContext & { user: string }>({
    schema,
    logger: captureLogger(),
    context: ({ req }) => Promise.resolve({ user: String(req.headers['x-user-id']) }),
    plugins: [tokenBucketPlugin<BaseContext & { user: string }>({ store, buckets, identify: ({ contextValue }) => contextValue.user })],
    sockets: tokenBucketSubscriptions({
      schema,
      store,
      buckets,
      identify: (ctx) => String(ctx.connectionParams?.['user']),
      reportCost: true,
      logger: captureLogger(),
      ...options,
    }),
  });
  stops.push(() => server.stop());
  const left = async (bucket: TokenBucket, key: BucketKey): Promise<number> => {
    const admission = await inner.acquire(bucket, key, 0);
    if (!admission.allowed) throw new Error('a cost-0 acquire was denied');
    return admission.remaining;
  };
  return { server, store, subscribed, ticksClosed, news, left };
}

let users = 0;
function freshUser(): string {
  users += 1;
  return `ws-user-${users}`;
}

const TICKS = { query: 'subscription { ticks(from: 1) }' };

function expectRateLimited(outcome: Outcome, bucket: string, cost: number, waitSeconds: [number, number] | null): void {
  expect(outcome.results).toEqual([]);
  expect(outcome.completed).toBe(false);
  expect(outcome.errors).toEqual([
    { message: expect.any(String), extensions: { code: 'RATE_LIMITED', retryAfter: waitSeconds === null ? null : expect.any(Number), bucket, cost } },
  ]);
  const retryAfter = outcome.errors?.[0]?.extensions?.['retryAfter'];
  if (waitSeconds !== null) {
    expect(retryAfter).toBeGreaterThan(waitSeconds[0]);
    expect(retryAfter).toBeLessThanOrEqual(waitSeconds[1]);
    expect((retryAfter as number) * 1000).toBeCloseTo(Math.round((retryAfter as number) * 1000), 6); // whole ms
  }
}

const subjects: [string, () => BucketStore & Required<Pick<BucketStore, 'acquireAll'>>][] = [
  ['MemoryStore', () => new MemoryStore()],
  ['RedisStore', redisStore],
];

describe.each(subjects)('graphql-ws beside Apollo Server, on %s', (_name, makeStore) => {
  it('refuses the 4th subscription of an identity with RATE_LIMITED and retryAfter: no event, no subscribe resolver', async () => {
    const h = await harness(makeStore);
    const ann = freshUser();
    const client = socketClient(h.server.wsUrl, { user: ann });
    for (let i = 0; i < 3; i++) {
      // The first event carries what starting the subscription cost.
      const report = { rateLimit: { live: { cost: 1, remaining: 2 - i, capacity: 3 } } };
      expect(await run(client, TICKS)).toEqual({ results: [{ data: { ticks: 1 }, extensions: report }, { data: { ticks: 0 } }], completed: true });
    }
    const denied = await run(client, TICKS);
    // 1 token at 1 a minute, less what refilled meanwhile.
    expectRateLimited(denied, 'live', 1, [55, 60]);
    expect(h.subscribed.ticks).toBe(3);
    expect(await h.left(live, ann)).toBe(0);
    expect(h.store.calls).toHaveLength(4); // one store call per subscription start, the denied one included

    // The socket stays usable, and another identity has its own bucket.
    expect(await run(client, { query: '{ book }' })).toMatchObject({ results: [{ data: { book: 'Dune' } }], completed: true });
    const bob = socketClient(h.server.wsUrl, { user: freshUser() });
    expect(await run(bob, TICKS)).toMatchObject({ results: [{ data: { ticks: 1 } }, { data: { ticks: 0 } }], completed: true });
  });

  it('admits exactly the capacity when subscriptions of one identity race, on one socket and on several', async () => {
    const h = await harness(makeStore);
    const user = freshUser();
    const one = socketClient(h.server.wsUrl, { user });
    const others = [socketClient(h.server.wsUrl, { user }), socketClient(h.server.wsUrl, { user })];
    const outcomes = await Promise.all([
      ...Array.from({ length: 6 }, () => run(one, { query: 'subscription { ticks(from: 0) }' })),
      ...others.flatMap((c) => [run(c, { query: 'subscription { ticks(from: 0) }' }), run(c, { query: 'subscription { ticks(from: 0) }' })]),
    ]);
    const served = outcomes.filter((o) => o.completed);
    const denied = outcomes.filter((o) => o.errors !== undefined);
    expect(served).toHaveLength(3);
    for (const o of served) expect(o.results).toEqual([{ data: { ticks: 0 }, extensions: { rateLimit: { live: expect.objectContaining({ cost: 1 }) } } }]);
    expect(denied).toHaveLength(7);
    for (const o of denied) expect(o.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', bucket: 'live', cost: 1 });
    expect(h.subscribed.ticks).toBe(3);
  });

  it('charges queries and mutations sent over the socket as over HTTP, from the same buckets', async () => {
    const h = await harness(makeStore);
    const user = freshUser();
    const client = socketClient(h.server.wsUrl, { user });
    expect(await run(client, { query: '{ book }' })).toEqual({
      results: [{ data: { book: 'Dune' }, extensions: { rateLimit: { reads: { cost: 1, remaining: 2, capacity: 3 } } } }],
      completed: true,
    });
    // The HTTP side spends the same bucket of the same identity.
    const http = await fetch(h.server.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-user-id': user },
      body: JSON.stringify({ query: '{ book }' }),
    });
    expect(http.status).toBe(200);
    expect(await run(client, { query: '{ book }' })).toMatchObject({ results: [{ data: { book: 'Dune' } }], completed: true });
    expectRateLimited(await run(client, { query: '{ book }' }), 'reads', 1, [55, 60]);
    const denied = await fetch(h.server.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-user-id': user },
      body: JSON.stringify({ query: '{ book }' }),
    });
    expect(denied.status).toBe(429);

    // A mutation costs 2 of 4: the third is denied and never runs.
    for (let i = 0; i < 2; i++) {
      expect(await run(client, { query: 'mutation { like }' })).toMatchObject({ results: [{ data: { like: 1 } }], completed: true });
    }
    expectRateLimited(await run(client, { query: 'mutation { like }' }), 'writes', 2, [115, 120]);
    expect(await h.left(writes, user)).toBe(0);

    // Nothing annotated: no store call, no report.
    const calls = h.store.calls.length;
    expect(await run(client, { query: '{ free }' })).toEqual({ results: [{ data: { free: 0 } }], completed: true });
    expect(await run(client, { query: 'subscription { quiet }' })).toEqual({ results: [{ data: { quiet: 1 } }], completed: true });
    expect(h.store.calls).toHaveLength(calls);
  });

  it('charges each subscription once by default, however many events it pushes', async () => {
    const h = await harness(makeStore);
    const user = freshUser();
    const outcome = await run(socketClient(h.server.wsUrl, { user }), { query: 'subscription { ticks(from: 9) }' });
    expect(outcome.completed).toBe(true);
    expect(outcome.results).toHaveLength(10);
    // No charge per event: the first event reports the start's charge, no other event a charge of its own.
    expect(outcome.results[0]?.extensions).toEqual({ rateLimit: { live: { cost: 1, remaining: 2, capacity: 3 } } });
    expect(outcome.results.slice(1).every((r) => r.extensions === undefined)).toBe(true);
    expect(await h.left(live, user)).toBe(2);
  });

  it('with chargeEachEvent, charges every event and ends the subscription with RATE_LIMITED at the first it cannot pay', async () => {
    const h = await harness(makeStore, { chargeEachEvent: true });
    const user = freshUser();
    const outcome = await run(socketClient(h.server.wsUrl, { user }), { query: 'subscription { ticks(from: 9) }' });
    // 3 tokens: the start, then two events; the third event is not sent.
    expect(outcome.results).toEqual([
      { data: { ticks: 9 }, extensions: { rateLimit: { live: { cost: 1, remaining: 1, capacity: 3 } } } },
      { data: { ticks: 8 }, extensions: { rateLimit: { live: { cost: 1, remaining: 0, capacity: 3 } } } },
    ]);
    expect(outcome.completed).toBe(false);
    expect(outcome.errors).toEqual([{ message: expect.any(String), extensions: { code: 'RATE_LIMITED', retryAfter: expect.any(Number), bucket: 'live', cost: 1 } }]);
    expect(outcome.errors?.[0]?.extensions?.['retryAfter']).toBeGreaterThan(55);
    // The source stream was closed, not left running.
    await waitFor('the ticks generator to close', 5_000, () => h.ticksClosed.count === 1);
    expect(await h.left(live, user)).toBe(0);
    // 1 start + 3 events priced, one store call each.
    expect(h.store.calls).toHaveLength(4);
  });

  it('with chargeEachEvent, an identify failing on an event ends the subscription with a generic error, logged and not sent', async () => {
    const logger = captureLogger();
    let calls = 0;
    const h = await harness(makeStore, {
      chargeEachEvent: true,
      logger,
      identify: (ctx) => {
        calls += 1;
        if (calls === 3) throw new Error('users db down at 10.0.0.5');
        return String(ctx.connectionParams?.['user']);
      },
    });
    const user = freshUser();
    const outcome = await run(socketClient(h.server.wsUrl, { user }), { query: 'subscription { ticks(from: 9) }' });
    // The start and the first event were charged; the second event is never sent.
    expect(outcome.results).toEqual([{ data: { ticks: 9 }, extensions: { rateLimit: { live: { cost: 1, remaining: 1, capacity: 3 } } } }]);
    expect(outcome.completed).toBe(false);
    expect(outcome.errors).toEqual([{ message: 'Internal server error', extensions: { code: 'INTERNAL_SERVER_ERROR' } }]);
    expect(logger.errors).toEqual([expect.stringContaining('users db down at 10.0.0.5')]);
    await waitFor('the ticks generator to close', 5_000, () => h.ticksClosed.count === 1);
    expect(await h.left(live, user)).toBe(1);
  });

  it('with chargeEachEvent, a client leaving a quiet subscription releases its source at once', async () => {
    const h = await harness(makeStore, { chargeEachEvent: true });
    const user = freshUser();
    const running = start(socketClient(h.server.wsUrl, { user }), { query: 'subscription { news }' });
    await waitFor('the subscription to listen', 5_000, () => h.news.listenerCount('news') === 1);
    h.news.emit('news', 'first');
    await waitFor('the first event', 5_000, () => running.results.length === 1);
    expect(running.results).toEqual([{ data: { news: 'first' }, extensions: { rateLimit: { live: { cost: 1, remaining: 1, capacity: 3 } } } }]);
    running.cancel();
    await waitFor('the listener to go', 5_000, () => h.news.listenerCount('news') === 0);
    expect(await h.left(live, user)).toBe(1);
  });
});

describe('graphql-ws: operations the limiter refuses to price, and bad set-ups', () => {
  it('answers a syntax error and an invalid operation with graphql-ws error messages, with no store call', async () => {
    const h = await harness(() => new MemoryStore());
    const client = socketClient(h.server.wsUrl, { user: freshUser() });
    const syntax = await run(client, { query: 'subscription { ticks(' });
    expect(syntax.errors?.[0]?.message).toMatch(/^Syntax Error/);
    const invalid = await run(client, { query: 'subscription { ticks(nope: 1) }' });
    expect(invalid.errors?.[0]?.message).toMatch(/Unknown argument "nope"/);
    const unnamed = await run(client, { query: 'query A { book } query B { book }' });
    expect(unnamed.errors?.[0]?.message).toMatch(/operation/i);
    expect(h.store.calls).toEqual([]);
    expect(h.subscribed.ticks).toBe(0);
  });

  it('refuses an operation that can never fit with retryAfter null, before any store call', async () => {
    const h = await harness(() => new MemoryStore());
    const client = socketClient(h.server.wsUrl, { user: freshUser() });
    const outcome = await run(client, { query: '{ a: book b: book c: book d: book }' });
    expectRateLimited(outcome, 'reads', 4, null);
    expect(h.store.calls).toEqual([]);
  });

  it('fails at once on a faulty annotation or option', () => {
    const schema = makeExecutableSchema({ typeDefs });
    expect(() => tokenBucketSubscriptions({ schema, store: new MemoryStore(), buckets: [live, reads], identify: () => 'x' })).toThrow(
      /@tokenBucket on Mutation\.like names bucket "writes", which is not in the plugin's buckets/,
    );
    const tight = new TokenBucket('live', 0, Rate.perMinute(1));
    expect(() => tokenBucketSubscriptions({ schema, store: new MemoryStore(), buckets: [tight, reads, writes], identify: () => 'x' })).toThrow(
      /costs more than the bucket's capacity of 0/,
    );
    const store = new MemoryStore();
    expect(() => tokenBucketSubscriptions({ store, buckets, identify: () => 'x' } as unknown as TokenBucketSubscriptionsOptions)).toThrow(
      /tokenBucketSubscriptions option "schema" must be the GraphQLSchema/,
    );
    expect(() => tokenBucketSubscriptions({ schema, store, buckets, identify: () => 'x', chargeEachEvent: 'yes' as unknown as boolean })).toThrow(
      /option "chargeEachEvent" must be a boolean/,
    );
    expect(() => tokenBucketSubscriptions({ schema, store, buckets, identify: 'user' as unknown as () => string })).toThrow(/option "identify" must be a function/);
  });
});
