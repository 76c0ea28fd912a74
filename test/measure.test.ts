// SPEC §4 "Measure mode": measured buckets are charged as if enforced (their
// state is what enforcement would leave), never deny, and say so (a warning,
// `wouldDeny` in the report, the `would_deny` metric); enforced buckets of the
// same operation decide as if the measured ones did not exist; still one
// store call per operation, counted by Redis.
import { makeExecutableSchema } from '@graphql-tools/schema';
import { metrics } from '@opentelemetry/api';
import fc from 'fast-check';
import { parse } from 'graphql';
import type { OperationDefinitionNode } from 'graphql';
import { afterEach, describe, expect, it } from 'vitest';
import { Limiter } from '../src/core/limiter.js';
import { useTokenBucket } from '../src/envelop/index.js';
import { tokenBucketSubscriptions } from '../src/graphql-ws/index.js';
import { MemoryStore, Rate, RedisStore, TokenBucket, tokenBucketDirectiveTypeDefs, tokenBucketPlugin } from '../src/index.js';
import type { BucketKey, BucketStore } from '../src/index.js';
import { disposeClients, run, serveApolloWithSockets, socketClient } from './support/adapters.js';
import { uniquePrefix } from './support/clients.js';
import { captureLogger } from './support/graphql.js';
import type { ResponseBody } from './support/graphql.js';
import { TRANSPORTS, serveLimited } from './support/limited-servers.js';
import type { HeaderLimiterOptions, LimitedServer } from './support/limited-servers.js';
import { MetricsProbe } from './support/metrics.js';
import { ownRedis } from './support/own-redis.js';

const typeDefs = `${tokenBucketDirectiveTypeDefs}
type Query {
  take(first: Int!): [Token!]!
  other(first: Int!): [Other!]!
}
type Subscription {
  ticks(from: Int!): Int! @tokenBucket(name: "x", cost: 6)
}
# take(first: n) { id } costs n tokens of x; other(first: n) { id } n of y.
type Token @tokenBucket(name: "x", cost: 1) { id: ID! }
type Other @tokenBucket(name: "y", cost: 1) { id: ID! }
`;
let resolved = 0;
const list = (_: unknown, { first }: { first: number }) => {
  resolved += 1;
  return Array.from({ length: first }, (_x, i) => ({ id: String(i) }));
};
const resolvers = {
  Query: { take: list, other: list },
  Subscription: {
    ticks: {
      subscribe: async function* (_: unknown, { from }: { from: number }) {
        for (let n = from; n >= 0; n--) yield { ticks: n };
      },
    },
  },
};
// Slow rates: nothing refills a whole token while a test runs.
const x = new TokenBucket('x', 10, Rate.perHour(10));
const y = new TokenBucket('y', 10, Rate.perHour(10));
const take = (n: number) => ({ query: `{ take(first: ${n}) { id } }` });
const both = (nx: number, ny: number) => ({ query: `{ take(first: ${nx}) { id } other(first: ${ny}) { id } }` });

// A server of our own: INFO commandstats counts every client's calls.
const own = ownRedis();
const servers: LimitedServer[] = [];

afterEach(async () => {
  await disposeClients();
  await Promise.all(servers.splice(0).map((s) => s.stop()));
  metrics.disable();
});

let users = 0;
const fresh = (): string => `measure-${++users}`;
const rateLimit = (body: ResponseBody) => body.extensions?.['rateLimit'];
/** The logger's "would deny" lines (Apollo Server also warns at start-up that this schema prices subscriptions). */
const wouldDenyWarnings = (server: LimitedServer) => server.logger.warnings.filter((w) => w.includes('would deny'));

interface Served {
  server: LimitedServer;
  store: BucketStore;
  /** Whole tokens the pair holds now (a cost-0 acquire takes nothing). */
  left(bucket: TokenBucket, key: BucketKey): Promise<number>;
}

describe.each(TRANSPORTS)('measure mode under %s, on Redis', (transport) => {
  async function serve(options: Partial<HeaderLimiterOptions>): Promise<Served> {
    const store = new RedisStore(own.client, { prefix: uniquePrefix('measure') });
    const server = await serveLimited(transport, typeDefs, resolvers, { store, buckets: [x, y], reportCost: true, ...options });
    servers.push(server);
    // Loads the script once, so every later call is one EVALSHA.
    expect((await server.post(take(0), fresh())).status).toBe(200);
    const left = async (bucket: TokenBucket, key: BucketKey): Promise<number> => {
      const answer = await store.acquire(bucket, key, 0);
      if (!answer.allowed) throw new Error('a cost-0 acquire is always admitted');
      return answer.remaining;
    };
    return { server, store, left };
  }

  it('runs an operation only a measured bucket would deny, warns, reports wouldDeny, and leaves the bucket as enforcement would', async () => {
    const { server, left } = await serve({ measure: ['x'] });
    const user = fresh();
    const calls = await own.roundTrips();
    const first = await server.post(take(6), user);
    expect(first.status).toBe(200);
    expect(rateLimit(first.body)).toEqual({ x: { cost: 6, remaining: 4, capacity: 10 } });

    const before = resolved;
    const over = await server.post(take(6), user);
    expect(over.status).toBe(200);
    expect(over.headers.get('retry-after')).toBeNull();
    expect(over.body.errors).toBeUndefined();
    expect((over.body.data?.['take'] as unknown[]).length).toBe(6);
    expect(resolved).toBe(before + 1);
    expect(rateLimit(over.body)).toEqual({ x: { cost: 6, remaining: 4, capacity: 10, wouldDeny: true } });
    expect(wouldDenyWarnings(server)).toEqual([
      expect.stringMatching(new RegExp(`^graphql-token-bucket: would deny bucket "x" to identity "${user}": the operation costs 6 tokens \\(retry after (71[0-9]|720)\\.?[0-9]* s\\); measured, so it runs$`)),
    ]);
    expect(await own.roundTrips()).toBe(calls + 2);
    // Enforced, the second would have taken nothing: 4 left.
    expect(await left(x, user)).toBe(4);
  });

  it('charges an enforced bucket beside a measured one exactly as if the measured one did not exist, in one store call each', async () => {
    const { server, left } = await serve({ measure: ['x'] });
    const user = fresh();
    const calls = await own.roundTrips();
    expect((await server.post(both(8, 2), user)).status).toBe(200);
    // x would deny 8 more; y decides alone and admits its 3.
    const measuredShort = await server.post(both(8, 3), user);
    expect(measuredShort.status).toBe(200);
    expect(rateLimit(measuredShort.body)).toEqual({
      x: { cost: 8, remaining: 2, capacity: 10, wouldDeny: true },
      y: { cost: 3, remaining: 5, capacity: 10 },
    });
    // y short: denied, and nothing is taken from either bucket.
    const enforcedShort = await server.post(both(1, 6), user);
    expect(enforcedShort.status).toBe(429);
    expect(enforcedShort.body.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', bucket: 'y', cost: 6 });
    // Both fit: both are taken.
    expect(rateLimit((await server.post(both(2, 5), user)).body)).toEqual({
      x: { cost: 2, remaining: 0, capacity: 10 },
      y: { cost: 5, remaining: 0, capacity: 10 },
    });
    // One store call per operation.
    expect(await own.roundTrips()).toBe(calls + 4);
    expect(await left(x, user)).toBe(0);
    expect(await left(y, user)).toBe(0);
  });

  it('never caches what a measured bucket would deny: each such operation is charged by the store', async () => {
    const { server } = await serve({ measure: true });
    const user = fresh();
    expect((await server.post(take(10), user)).status).toBe(200);
    const calls = await own.roundTrips();
    for (let i = 0; i < 5; i++) expect(rateLimit((await server.post(take(3), user)).body)).toMatchObject({ x: { wouldDeny: true } });
    expect(await own.roundTrips()).toBe(calls + 5);
  });

  it('with measure: true, runs an operation above a capacity, reporting it would never fit', async () => {
    const { server, left } = await serve({ measure: true });
    const user = fresh();
    const calls = await own.roundTrips();
    const huge = await server.post(both(11, 2), user);
    expect(huge.status).toBe(200);
    expect(rateLimit(huge.body)).toEqual({
      x: { cost: 11, remaining: 10, capacity: 10, wouldDeny: true },
      y: { cost: 2, remaining: 10, capacity: 10 },
    });
    expect(wouldDenyWarnings(server)).toEqual([
      `graphql-token-bucket: would deny bucket "x" to identity "${user}": the operation costs 11 tokens (more than its capacity of 10: never); measured, so it runs`,
    ]);
    expect(await own.roundTrips()).toBe(calls + 1);
    // Enforced, the operation would have been refused whole: neither bucket is charged.
    expect(await left(x, user)).toBe(10);
    expect(await left(y, user)).toBe(10);
  });

  it('leaves every measured bucket in the state enforcement leaves it, over any sequence of operations', async () => {
    const measured = await serve({ measure: true });
    const enforced = await serve({ measure: false, denyCache: false });
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(fc.integer({ min: 0, max: 11 }), fc.integer({ min: 0, max: 11 })), { minLength: 1, maxLength: 12 }), async (steps) => {
        const user = fresh();
        for (const [nx, ny] of steps) {
          const [a, b] = await Promise.all([measured.server.post(both(nx, ny), user), enforced.server.post(both(nx, ny), user)]);
          expect(a.status).toBe(200);
          expect([200, 429]).toContain(b.status);
          expect([await measured.left(x, user), await measured.left(y, user)]).toEqual([await enforced.left(x, user), await enforced.left(y, user)]);
        }
      }),
      { numRuns: 15 },
    );
  });
});

describe('measure mode elsewhere', () => {
  it('counts would_deny in the metrics', async () => {
    const probe = new MetricsProbe();
    const server = await serveLimited('Apollo Server', typeDefs, resolvers, {
      store: new MemoryStore(),
      buckets: [x, y],
      measure: ['x'],
      meterProvider: probe.provider,
    });
    servers.push(server);
    const user = fresh();
    for (const n of [6, 6, 11]) expect((await server.post(take(n), user)).status).toBe(200);
    expect((await probe.read()).decisions).toEqual({ 'x allowed': 1, 'x would_deny': 2 });
    await probe.shutdown();
  });

  it('starts a subscription over graphql-ws that only a measured bucket would deny', async () => {
    const schema = makeExecutableSchema({ typeDefs, resolvers });
    const logger = captureLogger();
    const server = await serveApolloWithSockets({
      schema,
      logger: captureLogger(),
      sockets: tokenBucketSubscriptions({
        schema,
        store: new MemoryStore(),
        buckets: [x, y],
        identify: (ctx) => String(ctx.connectionParams?.['user']),
        measure: ['x'],
        logger,
      }),
    });
    servers.push({ post: () => Promise.reject(new Error('unused')), logger, stop: server.stop });
    const client = socketClient(server.wsUrl, { user: fresh() });
    for (let i = 0; i < 2; i++) expect(await run(client, { query: 'subscription { ticks(from: 1) }' })).toMatchObject({ completed: true, results: [{ data: { ticks: 1 } }, { data: { ticks: 0 } }] });
    expect(logger.warnings).toEqual([expect.stringMatching(/^graphql-token-bucket: would deny bucket "x" to identity "measure-\d+": the operation costs 6 tokens/)]);
  });

  it('refuses a measure option naming a bucket not in buckets, or of the wrong type, at construction', () => {
    const schema = makeExecutableSchema({ typeDefs, resolvers });
    const base = { store: new MemoryStore(), buckets: [x, y], identify: () => 'me' };
    expect(() => tokenBucketPlugin({ ...base, measure: ['x', 'z'] })).toThrow(new RangeError('tokenBucketPlugin option "measure" names "z", not in "buckets" ("x", "y")'));
    expect(() => useTokenBucket({ ...base, measure: ['X'] })).toThrow(RangeError);
    expect(() => tokenBucketSubscriptions({ ...base, schema, measure: [''] })).toThrow(RangeError);
    expect(() => tokenBucketPlugin({ ...base, measure: 'x' as unknown as string[] })).toThrow(TypeError);
    expect(() => tokenBucketPlugin({ ...base, denyCache: 'no' as unknown as boolean })).toThrow(TypeError);
    expect(() => tokenBucketPlugin({ ...base, meterProvider: {} as never })).toThrow(TypeError);
  });
});

describe('measure mode in the limiter', () => {
  it('tells a refund what was taken: nothing from measured buckets of an operation one of them would deny', async () => {
    const schema = makeExecutableSchema({ typeDefs, resolvers });
    const limiter = new Limiter<string>({ store: new MemoryStore(), buckets: [x, y], identify: (user) => user, measure: ['x'] }, 'test');
    limiter.load(schema);
    const taken = async (nx: number, ny: number): Promise<Record<string, number>> => {
      const document = parse(both(nx, ny).query);
      const decision = await limiter.decide({ schema, document, operation: document.definitions[0] as OperationDefinitionNode, variables: undefined, context: 'fay', logger: captureLogger() });
      if (decision.kind !== 'allowed') throw new Error(`expected an admission, got ${decision.kind}`);
      return Object.fromEntries(decision.charges.map((c, i) => [c.bucket.name, decision.taken[i]!]));
    };
    expect(await taken(8, 2)).toEqual({ x: 8, y: 2 });
    expect(await taken(8, 3)).toEqual({ x: 0, y: 3 });
    expect(await taken(11, 1)).toEqual({ x: 0, y: 1 });
    expect(await taken(2, 1)).toEqual({ x: 2, y: 1 });
  });
});
