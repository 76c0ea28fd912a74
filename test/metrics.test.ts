// SPEC §4 "Metrics": what the limiter records through @opentelemetry/api,
// read back with @opentelemetry/sdk-metrics' in-memory exporter: a decision
// per bucket and result (store errors, the deny cache's denials and each
// event's charge included), the estimated and actual cost, and how long each
// store call took.
import { makeExecutableSchema } from '@graphql-tools/schema';
import { metrics } from '@opentelemetry/api';
import { afterEach, describe, expect, it } from 'vitest';
import { Limiter } from '../src/core/limiter.js';
import { tokenBucketSubscriptions } from '../src/graphql-ws/index.js';
import { MemoryStore, Rate, TokenBucket, tokenBucketDirectiveTypeDefs } from '../src/index.js';
import type { AcquireRequest, BatchAdmission, BucketStore } from '../src/index.js';
import { disposeClients, run, serveApolloWithSockets, socketClient } from './support/adapters.js';
import { captureLogger } from './support/graphql.js';
import { serveLimited } from './support/limited-servers.js';
import type { LimitedServer, Transport } from './support/limited-servers.js';
import { MetricsProbe } from './support/metrics.js';

const typeDefs = `${tokenBucketDirectiveTypeDefs}
type Query {
  take(first: Int!): [Token!]!
  other(first: Int!): [Other!]!
}
type Subscription {
  ticks(from: Int!): Int! @tokenBucket(name: "x", cost: 1)
}
# take(first: n) { id } costs n tokens of x; other(first: n) { id } n of y.
type Token @tokenBucket(name: "x", cost: 1) { id: ID! }
type Other @tokenBucket(name: "y", cost: 1) { id: ID! }
`;
const list = (_: unknown, { first }: { first: number }) => Array.from({ length: first }, (_x, i) => ({ id: String(i) }));
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

const probes: MetricsProbe[] = [];
const servers: LimitedServer[] = [];
afterEach(async () => {
  await disposeClients();
  await Promise.all(servers.splice(0).map((s) => s.stop()));
  metrics.disable();
  await Promise.all(probes.splice(0).map((p) => p.shutdown()));
});

function probe(): MetricsProbe {
  const created = new MetricsProbe();
  probes.push(created);
  return created;
}

let users = 0;
const fresh = (): string => `metrics-${++users}`;

/** Allowed, denied by the store, denied by the deny cache, never, and a two-bucket operation: 4 store calls. */
async function traffic(server: LimitedServer): Promise<void> {
  const user = fresh();
  const statuses = [];
  for (const n of [4, 4, 4, 4, 11]) statuses.push((await server.post(take(n), user)).status);
  statuses.push((await server.post({ query: '{ take(first: 1) { id } other(first: 2) { id } }' }, user)).status);
  expect(statuses).toEqual([200, 200, 429, 429, 429, 200]);
}

async function expectTrafficRecorded(readings: Awaited<ReturnType<MetricsProbe['read']>>): Promise<void> {
  expect(readings.decisions).toEqual({ 'x allowed': 3, 'x denied': 2, 'x never': 1, 'y allowed': 1 });
  expect(readings.histogram('graphql.token_bucket.cost.estimated', 'x')).toMatchObject({ count: 6, sum: 4 * 4 + 11 + 1, min: 1, max: 11 });
  expect(readings.histogram('graphql.token_bucket.cost.estimated', 'y')).toMatchObject({ count: 1, sum: 2 });
  const duration = readings.histogram('graphql.token_bucket.store.duration');
  expect(duration?.count).toBe(4);
  expect(duration?.min).toBeGreaterThan(0);
  expect(duration?.max).toBeLessThan(1);
  expect(readings.descriptor('graphql.token_bucket.store.duration')?.unit).toBe('s');
}

describe.each<[Transport, 'global' | 'option']>([
  ['Apollo Server', 'global'],
  ['GraphQL Yoga', 'option'],
  ['Apollo Server', 'option'],
  ['GraphQL Yoga', 'global'],
])('metrics under %s, MeterProvider given as %s', (transport, how) => {
  it('counts each decision per bucket and result, and records costs and store durations', async () => {
    const readings = probe();
    const server = await serveLimited(transport, typeDefs, resolvers, {
      store: new MemoryStore(),
      buckets: [x, y],
      ...(how === 'option' ? { meterProvider: readings.provider } : {}),
    });
    servers.push(server);
    // Registered after the server was made: the limiter looks the meter up when it records.
    if (how === 'global') expect(metrics.setGlobalMeterProvider(readings.provider)).toBe(true);
    await traffic(server);
    await expectTrafficRecorded(await readings.read());
  });

  it('counts store failures, one per bucket of the operation, with their duration', async () => {
    const readings = probe();
    const failing: BucketStore = {
      acquire: () => Promise.reject(new Error('connection lost')),
      acquireAll: (_requests: readonly AcquireRequest[]): Promise<BatchAdmission> => Promise.reject(new Error('connection lost')),
      reset: () => Promise.resolve(false),
    };
    const server = await serveLimited(transport, typeDefs, resolvers, {
      store: failing,
      buckets: [x, y],
      onStoreError: 'allow',
      ...(how === 'option' ? { meterProvider: readings.provider } : {}),
    });
    servers.push(server);
    if (how === 'global') metrics.setGlobalMeterProvider(readings.provider);
    expect((await server.post({ query: '{ take(first: 1) { id } other(first: 2) { id } }' }, fresh())).status).toBe(200);
    const read = await readings.read();
    expect(read.decisions).toEqual({ 'x store_error': 1, 'y store_error': 1 });
    expect(read.histogram('graphql.token_bucket.store.duration')?.count).toBe(1);
  });
});

describe('metrics over graphql-ws', () => {
  it("counts the start of a subscription and each event's charge", async () => {
    const readings = probe();
    metrics.setGlobalMeterProvider(readings.provider);
    const schema = makeExecutableSchema({ typeDefs, resolvers });
    const server = await serveApolloWithSockets({
      schema,
      logger: captureLogger(),
      sockets: tokenBucketSubscriptions({
        schema,
        store: new MemoryStore(),
        buckets: [x, y],
        identify: (ctx) => String(ctx.connectionParams?.['user']),
        chargeEachEvent: true,
      }),
    });
    servers.push({ post: () => Promise.reject(new Error('unused')), logger: captureLogger(), stop: server.stop });
    const client = socketClient(server.wsUrl, { user: fresh() });
    // 1 at the start and 1 per event: 10 tokens cover the start and 9 of the 11 events.
    const outcome = await run(client, { query: 'subscription { ticks(from: 10) }' });
    expect(outcome.results).toHaveLength(9);
    expect(outcome.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', bucket: 'x' });
    const read = await readings.read();
    expect(read.decisions).toEqual({ 'x allowed': 10, 'x denied': 1 });
    expect(read.histogram('graphql.token_bucket.cost.estimated', 'x')).toMatchObject({ count: 11, sum: 11 });
  });
});

describe('metrics without an SDK, and the actual cost', () => {
  it('records nothing and costs nothing noticeable without a MeterProvider', async () => {
    const server = await serveLimited('Apollo Server', typeDefs, resolvers, { store: new MemoryStore(), buckets: [x, y] });
    servers.push(server);
    await traffic(server);
    // A provider registered now sees only what comes after.
    const readings = probe();
    metrics.setGlobalMeterProvider(readings.provider);
    expect((await readings.read()).decisions).toEqual({});
    expect((await server.post(take(1), fresh())).status).toBe(200);
    expect((await readings.read()).decisions).toEqual({ 'x allowed': 1 });
  });

  it('records the actual cost of an operation per bucket', async () => {
    const readings = probe();
    const limiter = new Limiter({ store: new MemoryStore(), buckets: [x, y], identify: () => 'me', meterProvider: readings.provider }, 'test');
    limiter.metrics.actualCost('x', 3);
    limiter.metrics.actualCost('x', 0);
    const read = await readings.read();
    expect(read.histogram('graphql.token_bucket.cost.actual', 'x')).toMatchObject({ count: 2, sum: 3 });
    expect(read.descriptor('graphql.token_bucket.cost.actual')?.unit).toBe('{token}');
  });
});

describe.each(['Apollo Server', 'GraphQL Yoga'] as const)('a MeterProvider that fails, on %s', (transport: Transport) => {
  /** Fails when asked for its meter, or in each instrument's recording. */
  const BROKEN = {
    'getMeter throws': { getMeter: () => { throw new Error('the meter provider is shut down'); } },
    'recording throws': {
      getMeter: () => ({
        createCounter: () => ({ add: () => { throw new Error('the exporter failed'); } }),
        createHistogram: () => ({ record: () => { throw new Error('the exporter failed'); } }),
      }),
    },
  };

  it.each(Object.keys(BROKEN) as (keyof typeof BROKEN)[])('never fails an operation or its tokens (%s), and says so once', async (how) => {
    const store = new MemoryStore();
    const server = await serveLimited(transport, typeDefs, resolvers, { store, buckets: [x, y], meterProvider: BROKEN[how] });
    servers.push(server);
    const user = fresh();
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await server.post(take(4), user));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 429]);
    expect(answers[0]!.body.data).toEqual({ take: [{ id: '0' }, { id: '1' }, { id: '2' }, { id: '3' }] });
    expect(answers[2]!.body.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', bucket: 'x', cost: 4 });
    // What was admitted ran, and took its tokens: nothing was taken for an operation that failed.
    expect(await store.acquire(x, user, 0)).toEqual({ allowed: true, remaining: 2 });
    const lines = server.logger.warnings.filter((w) => w.includes('metrics'));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/graphql-token-bucket: recording metrics failed.*(shut down|exporter failed)/);
  });
});
