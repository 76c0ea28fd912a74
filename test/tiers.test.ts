// SPEC §4 "Tiers": `identify` returning `{ key, bucket }` gives that identity
// a bucket of its own capacity and rate, on every store; a bucket of another
// name is the caller's bug: logged, and the operation fails without running
// or being charged.
import { ApolloServer } from '@apollo/server';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, inject, it } from 'vitest';
import { tokenBucketSubscriptions } from '../src/graphql-ws/index.js';
import { MemoryStore, Rate, RedisStore, TokenBucket, tokenBucketDirectiveTypeDefs, tokenBucketPlugin } from '../src/index.js';
import type { BucketStore, Identity } from '../src/index.js';
import { makeExecutableSchema } from '@graphql-tools/schema';
import { disposeClients, run, serveApolloWithSockets, socketClient } from './support/adapters.js';
import { clusterClient, redisClient, uniquePrefix } from './support/clients.js';
import { RecordingStore, captureLogger } from './support/graphql.js';
import { TRANSPORTS, serveLimited } from './support/limited-servers.js';
import type { LimitedServer } from './support/limited-servers.js';

const typeDefs = `${tokenBucketDirectiveTypeDefs}
type Query {
  ping: Int @tokenBucket(name: "api", cost: 1)
  items(first: Int = 1): [Item!]!
}
# Each item returned costs 1: items(first: 20) { id } costs 20.
type Item @tokenBucket(name: "api", cost: 1) { id: ID! }
`;
let resolved = 0;
const resolvers = {
  Query: {
    ping: () => {
      resolved += 1;
      return 1;
    },
    items: (_: unknown, { first }: { first: number }) => {
      resolved += 1;
      return Array.from({ length: first }, (_x, i) => ({ id: String(i) }));
    },
  },
};

// Slow rates: nothing refills a whole token while a test runs.
const free = new TokenBucket('api', 5, Rate.perHour(5));
const pro = new TokenBucket('api', 50, Rate.perHour(50));

/** Users named `pro-…` are on the paid plan. */
const plans = (user: string): Identity => (user.startsWith('pro-') ? { key: user, bucket: pro } : user);

const clients: (Redis | Cluster)[] = [];
afterAll(async () => {
  await Promise.all(clients.map((c) => c.quit().catch(() => undefined)));
});

const servers: LimitedServer[] = [];
afterEach(async () => {
  await disposeClients();
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

function redisStore(kind: 'redis' | 'cluster'): BucketStore {
  const client = kind === 'redis' ? redisClient(inject('redisUrl')) : clusterClient(inject('redisClusterNodes'));
  clients.push(client);
  return new RedisStore(client, { prefix: uniquePrefix(`tiers-${kind}`) });
}

const stores: [string, () => BucketStore][] = [
  ['MemoryStore', () => new MemoryStore()],
  ['RedisStore on Redis', () => redisStore('redis')],
  ['RedisStore on Redis Cluster', () => redisStore('cluster')],
];

let users = 0;
const fresh = (prefix = 'user'): string => `${prefix}-tiers-${++users}`;

describe.each(stores)('plans on %s', (_name, makeStore) => {
  async function serve(): Promise<LimitedServer> {
    const server = await serveLimited('Apollo Server', typeDefs, resolvers, {
      store: makeStore(),
      buckets: [free],
      identify: plans,
      reportCost: true,
    });
    servers.push(server);
    return server;
  }

  it("gives a paid plan its bucket's capacity and rate, and the free plan the configured one", async () => {
    const server = await serve();
    const [basic, paid] = [fresh(), fresh('pro')];
    for (let i = 0; i < 5; i++) expect((await server.post({ query: '{ ping }' }, basic)).status).toBe(200);
    const denied = await server.post({ query: '{ ping }' }, basic);
    expect(denied.status).toBe(429);
    // 1 token at 5 an hour: 720 s.
    expect(denied.body.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', bucket: 'api', cost: 1 });
    expect(denied.body.errors?.[0]?.extensions?.['retryAfter']).toBeGreaterThan(719);

    // The bucket refills while the 50 requests run (for seconds on a loaded machine): the wait is 72 s less that.
    const spending = performance.now();
    for (let i = 0; i < 50; i++) {
      const admitted = await server.post({ query: '{ ping }' }, paid);
      expect(admitted.status).toBe(200);
      expect(admitted.body.extensions?.['rateLimit']).toEqual({ api: { cost: 1, remaining: 49 - i, capacity: 50 } });
    }
    const paidDenied = await server.post({ query: '{ ping }' }, paid);
    expect(paidDenied.status).toBe(429);
    // 1 token at 50 an hour: 72 s.
    const retryAfter = paidDenied.body.errors?.[0]?.extensions?.['retryAfter'] as number;
    expect(retryAfter).toBeGreaterThan(72 - (performance.now() - spending) / 1000 - 0.001);
    expect(retryAfter).toBeLessThanOrEqual(72);
  });

  it('keeps one bucket per identity across a plan change: an emptied free bucket upgrades to one as far from full', async () => {
    let plan: 'free' | 'pro' = 'free';
    const store = makeStore();
    const server = await serveLimited('Apollo Server', typeDefs, resolvers, {
      store,
      buckets: [free],
      identify: (user) => (plan === 'pro' ? { key: user, bucket: pro } : user),
      reportCost: true,
    });
    servers.push(server);
    const user = fresh();
    for (let i = 0; i < 5; i++) expect((await server.post({ query: '{ ping }' }, user)).status).toBe(200);
    plan = 'pro';
    // Full again in an hour, as the free bucket was: at 50 an hour, that is empty.
    const upgraded = await server.post({ query: '{ ping }' }, user);
    expect(upgraded.status).toBe(429);
    const retryAfter = upgraded.body.errors?.[0]?.extensions?.['retryAfter'] as number;
    expect(retryAfter).toBeGreaterThan(70);
    expect(retryAfter).toBeLessThanOrEqual(72);
  });

  it("checks a cost against the plan's capacity: above the free one fits a paid plan, above the paid one never does", async () => {
    const server = await serve();
    const [basic, paid] = [fresh(), fresh('pro')];
    const never = await server.post({ query: '{ items(first: 20) { id } }' }, basic);
    expect(never.status).toBe(429);
    expect(never.headers.get('retry-after')).toBeNull();
    expect(never.body.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', retryAfter: null, bucket: 'api', cost: 20 });
    expect(never.body.errors?.[0]?.message).toContain('capacity of 5');

    const fits = await server.post({ query: '{ items(first: 20) { id } }' }, paid);
    expect(fits.status).toBe(200);
    expect(fits.body.extensions?.['rateLimit']).toEqual({ api: { cost: 20, remaining: 30, capacity: 50 } });

    const tooBig = await server.post({ query: '{ items(first: 51) { id } }' }, paid);
    expect(tooBig.body.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', retryAfter: null, bucket: 'api', cost: 51 });
    expect(tooBig.body.errors?.[0]?.message).toContain('capacity of 50');
  });
});

describe('plans over graphql-ws', () => {
  it("gives a subscription's identity its plan's bucket", async () => {
    const schema = makeExecutableSchema({ typeDefs, resolvers });
    const server = await serveApolloWithSockets({
      schema,
      logger: captureLogger(),
      sockets: tokenBucketSubscriptions({
        schema,
        store: new MemoryStore(),
        buckets: [free],
        identify: (ctx) => plans(String(ctx.connectionParams?.['user'])),
        reportCost: true,
      }),
    });
    servers.push({ post: () => Promise.reject(new Error('unused')), logger: captureLogger(), stop: server.stop });
    const client = socketClient(server.wsUrl, { user: fresh('pro') });
    const outcome = await run(client, { query: '{ items(first: 20) { id } }' });
    expect(outcome.results[0]?.extensions).toEqual({ rateLimit: { api: { cost: 20, remaining: 30, capacity: 50 } } });
  });

  it('logs a plan bucket of another name and runs nothing: that operation alone gets an internal error, the socket lives on', async () => {
    const schema = makeExecutableSchema({ typeDefs, resolvers });
    const logger = captureLogger();
    const store = new RecordingStore(new MemoryStore());
    const server = await serveApolloWithSockets({
      schema,
      logger: captureLogger(),
      sockets: tokenBucketSubscriptions({
        schema,
        store,
        buckets: [free],
        identify: () => ({ key: 'x', bucket: new TokenBucket('other', 1000, Rate.perSecond(1)) }),
        logger,
      }),
    });
    servers.push({ post: () => Promise.reject(new Error('unused')), logger, stop: server.stop });
    const before = resolved;
    const client = socketClient(server.wsUrl, { user: fresh() });
    expect(await run(client, { query: '{ ping }' })).toEqual({ results: [], errors: [{ message: 'Internal server error', extensions: { code: 'INTERNAL_SERVER_ERROR' } }], completed: false });
    expect(resolved).toBe(before);
    expect(store.calls).toEqual([]);
    expect(logger.errors).toEqual([expect.stringMatching(/^graphql-token-bucket: .*identify returned a plan's bucket named "other" for bucket "api"/)]);
    // The socket lives on: an operation that needs no bucket runs over it.
    expect(await run(client, { query: '{ __typename }' })).toEqual({ results: [{ data: { __typename: 'Query' } }], completed: true });
  });
});

describe('start-up checks', () => {
  it("still check fixed costs against the configured bucket, whatever plans identify returns", async () => {
    const server = new ApolloServer({
      typeDefs: `${tokenBucketDirectiveTypeDefs} type Query { report: Int @tokenBucket(name: "api", cost: 10) }`,
      logger: captureLogger(),
      plugins: [tokenBucketPlugin({ store: new MemoryStore(), buckets: [free], identify: () => ({ key: 'x', bucket: pro }) })],
    });
    await expect(server.start()).rejects.toThrow(/cost: 10\) on Query\.report costs more than the bucket's capacity of 5/);
  });
});

describe.each(TRANSPORTS)('a plan bucket identify gets wrong, under %s', (transport) => {
  it.each([
    ['a bucket of another name', () => ({ key: 'x', bucket: new TokenBucket('apii', 1000, Rate.perSecond(1000)) }), /plan's bucket named "apii" for bucket "api"/],
    ['a bucket that is not a TokenBucket', () => ({ key: 'x', bucket: { name: 'api', capacity: 1e9, rate: Rate.perSecond(1e6) } }), /whose bucket is not a TokenBucket/],
    ['an object without a key', () => ({ bucket: pro }), /without key/],
    ['a plan whose key is not a key', () => ({ key: { id: 1 }, bucket: pro }), /a bucket key must be a string, number or bigint/],
  ])('%s: logged as an error, and the operation fails unrun and uncharged', async (_label, identify, message) => {
    const store = new RecordingStore(new MemoryStore());
    const server = await serveLimited(transport, typeDefs, resolvers, {
      store,
      buckets: [free],
      identify: identify as unknown as () => Identity,
    });
    servers.push(server);
    const before = resolved;
    const answer = await server.post({ query: '{ ping }' }, fresh());
    expect(answer.status).toBe(500);
    expect(answer.body.data ?? undefined).toBeUndefined();
    expect(answer.body.errors).toHaveLength(1);
    expect(answer.body.errors?.[0]).toEqual({ message: 'Internal server error', extensions: { code: 'INTERNAL_SERVER_ERROR' } });
    expect(resolved).toBe(before);
    expect(store.calls).toEqual([]);
    expect(server.logger.errors).toHaveLength(1);
    expect(server.logger.errors[0]).toMatch(message);
    expect(server.logger.errors[0]).toMatch(/^graphql-token-bucket: /);
  });
});
