// SPEC §6 "one store call per operation": counted by the Redis server itself
// (INFO commandstats, on a server of our own), under GraphQL Yoga and over
// graphql-ws.
import { makeExecutableSchema } from '@graphql-tools/schema';
import { createYoga } from 'graphql-yoga';
import type { YogaInitialContext } from 'graphql-yoga';
import { afterEach, describe, expect, it } from 'vitest';
import { useTokenBucket } from '../src/envelop/index.js';
import { tokenBucketSubscriptions } from '../src/graphql-ws/index.js';
import { Rate, RedisStore, TokenBucket, tokenBucketDirectiveTypeDefs } from '../src/index.js';
import { disposeClients, postJson, run, serveApolloWithSockets, serveHandler, socketClient } from './support/adapters.js';
import { uniquePrefix } from './support/clients.js';
import { captureLogger } from './support/graphql.js';
import type { ResponseBody } from './support/graphql.js';
import { ownRedis } from './support/own-redis.js';

const typeDefs = `${tokenBucketDirectiveTypeDefs}
type Query {
  a: Int @tokenBucket(name: "a", cost: 1)
  b: Int @tokenBucket(name: "b", cost: 2)
  list(first: Int = 5): [Entry!]! @tokenBucket(name: "c")
  free: Int
}
type Subscription {
  ticks(from: Int! = 1): Int! @tokenBucket(name: "a", cost: 1) @tokenBucket(name: "b", cost: 1)
}
type Entry { n: Int! next: Entry }
`;
const buckets = [
  new TokenBucket('a', 1000, Rate.perSecond(1000)),
  new TokenBucket('b', 1000, Rate.perSecond(1000)),
  new TokenBucket('c', 100, Rate.perHour(100)),
];
const schema = makeExecutableSchema({
  typeDefs,
  resolvers: {
    Query: { a: () => 1, b: () => 2, list: () => [{ n: 1 }], free: () => 0 },
    Subscription: {
      ticks: {
        subscribe: async function* (_: unknown, { from }: { from: number }) {
          for (let n = from; n >= 0; n--) yield { ticks: n };
        },
      },
    },
  },
});
const THREE_BUCKETS = { query: '{ a b list(first: 1) { n } }' };
const N = 12;

// A server of our own: INFO commandstats counts every client's calls.
const own = ownRedis();
const stops: (() => Promise<void>)[] = [];

afterEach(async () => {
  await disposeClients();
  await Promise.all(stops.splice(0).map((stop) => stop()));
});

let users = 0;
const freshUser = (): string => `calls-user-${++users}`;

describe('store calls per operation under GraphQL Yoga, counted by Redis', () => {
  async function serve(denyCache?: boolean): Promise<string> {
    const server = await serveHandler(
      createYoga({
        schema,
        batching: { limit: N },
        logging: false,
        plugins: [
          useTokenBucket<YogaInitialContext>({
            store: new RedisStore(own.client, { prefix: uniquePrefix('yoga-calls') }),
            buckets,
            identify: ({ request }) => request.headers.get('x-user-id') ?? 'anonymous',
            ...(denyCache === undefined ? {} : { denyCache }),
          }),
        ],
      }),
    );
    stops.push(server.stop);
    // The first call loads the script (EVALSHA, NOSCRIPT, EVAL); count the steady state.
    expect((await postJson<ResponseBody>(server.url, THREE_BUCKETS, { 'x-user-id': freshUser() })).status).toBe(200);
    await own.resetStats();
    return server.url;
  }

  /** c holds 100 and this costs 12 × (Entry 1 + next (1 + n 0)) = 24: four pass, the rest are denied. */
  async function drain(url: string): Promise<void> {
    const heavy = { 'x-user-id': freshUser() };
    for (let i = 0; i < N; i++) {
      const answer = await postJson<ResponseBody>(url, { query: '{ a b list(first: 12) { next { n } } }' }, heavy);
      expect(answer.status).toBe(i < 4 ? 200 : 429);
    }
  }

  it(`with denyCache: false, makes exactly one script call for each of ${N} operations touching 3 buckets, admitted or denied`, async () => {
    await drain(await serve(false));
    expect(await own.scriptCalls()).toEqual({ evalsha: N, eval: 0 });
  });

  it('with the deny cache, makes one script call per admitted operation and one for the first denial', async () => {
    // c refills 100 an hour: the 20 tokens the first denial lacks are minutes away.
    await drain(await serve());
    expect(await own.scriptCalls()).toEqual({ evalsha: 4 + 1, eval: 0 });
  });

  it('makes at most one script call per operation of a batch (operations decided together share one), and none for an operation nothing charges', async () => {
    const url = await serve();
    const answer = await postJson<ResponseBody[]>(url, Array.from({ length: N }, () => THREE_BUCKETS), { 'x-user-id': freshUser() });
    expect(answer.body).toHaveLength(N);
    for (const result of answer.body) expect(result.errors).toBeUndefined();
    const calls = await own.scriptCalls();
    // EVAL: a shared call's script loads on its first use
    expect(calls.evalsha - calls.eval).toBeLessThan(N);
    expect(calls.evalsha - calls.eval).toBeGreaterThan(0);
    for (let i = 0; i < N; i++) expect((await postJson<ResponseBody>(url, { query: '{ free }' })).body).toEqual({ data: { free: 0 } });
    expect(await own.scriptCalls()).toEqual(calls);
  });
});

describe('store calls per operation over graphql-ws, counted by Redis', () => {
  async function serve(chargeEachEvent: boolean): Promise<string> {
    const server = await serveApolloWithSockets({
      schema,
      logger: captureLogger(),
      sockets: tokenBucketSubscriptions({
        schema,
        store: new RedisStore(own.client, { prefix: uniquePrefix('ws-calls') }),
        buckets,
        identify: (ctx) => String(ctx.connectionParams?.['user']),
        chargeEachEvent,
      }),
    });
    stops.push(server.stop);
    const warm = await run(socketClient(server.wsUrl, { user: freshUser() }), THREE_BUCKETS);
    expect(warm.completed).toBe(true);
    await own.resetStats();
    return server.wsUrl;
  }

  it(`makes one script call per subscription start (two buckets) and per operation, ${N} of each`, async () => {
    const client = socketClient(await serve(false), { user: freshUser() });
    for (let i = 0; i < N; i++) expect(await run(client, { query: 'subscription { ticks(from: 3) }' })).toMatchObject({ completed: true });
    expect(await own.scriptCalls()).toEqual({ evalsha: N, eval: 0 });
    for (let i = 0; i < N; i++) expect(await run(client, THREE_BUCKETS)).toMatchObject({ completed: true });
    expect(await own.scriptCalls()).toEqual({ evalsha: 2 * N, eval: 0 });
  });

  it('with chargeEachEvent, makes one more script call per event', async () => {
    const client = socketClient(await serve(true), { user: freshUser() });
    const outcome = await run(client, { query: 'subscription { ticks(from: 3) }' });
    expect(outcome.results).toHaveLength(4);
    expect(await own.scriptCalls()).toEqual({ evalsha: 1 + 4, eval: 0 });
  });
});
