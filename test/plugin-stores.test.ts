// The plugin behaves the same on every store: MemoryStore, RedisStore on a
// single Redis, and RedisStore on a Redis Cluster (where buckets keyed by
// different identities live in different hash slots).
import { ApolloServer } from '@apollo/server';
import type { BaseContext } from '@apollo/server';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, inject, it } from 'vitest';
import { MemoryStore, Rate, RedisStore, TokenBucket, tokenBucketDirectiveTypeDefs, tokenBucketPlugin } from '../src/index.js';
import type { BucketKey, BucketStore, TokenBucketPluginOptions } from '../src/index.js';
import { clusterClient, redisClient, uniquePrefix } from './support/clients.js';
import { captureLogger, errorCodes, singleResult } from './support/graphql.js';
import type { ResponseBody } from './support/graphql.js';

interface Context extends BaseContext {
  user: string;
  org: string;
}

const typeDefs = `${tokenBucketDirectiveTypeDefs}
type Query {
  quota: Int @tokenBucket(name: "quota", cost: 1)
  team: Int @tokenBucket(name: "team", cost: 3)
  fast: Int @tokenBucket(name: "fast", cost: 2)
}
`;
const quota = new TokenBucket('quota', 3, Rate.perHour(3));
const team = new TokenBucket('team', 5, Rate.perHour(5));
const fast = new TokenBucket('fast', 2, new Rate(1, 100));

const clients: (Redis | Cluster)[] = [];
afterAll(async () => {
  await Promise.all(clients.map((c) => c.quit().catch(() => undefined)));
});

function redisStore(kind: 'redis' | 'cluster'): BucketStore {
  const client = kind === 'redis' ? redisClient(inject('redisUrl')) : clusterClient(inject('redisClusterNodes'));
  clients.push(client);
  return new RedisStore(client, { prefix: uniquePrefix(`plugin-${kind}`) });
}

const subjects: [string, () => BucketStore][] = [
  ['MemoryStore', () => new MemoryStore()],
  ['RedisStore on Redis', () => redisStore('redis')],
  ['RedisStore on Redis Cluster', () => redisStore('cluster')],
];

const servers: ApolloServer<Context>[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

describe.each(subjects)('the plugin on %s', (_name, makeStore) => {
  async function harness(identify?: TokenBucketPluginOptions<Context>['identify']) {
    const store = makeStore();
    const server = new ApolloServer<Context>({
      typeDefs,
      resolvers: { Query: { quota: () => 1, team: () => 2, fast: () => 3 } },
      logger: captureLogger(),
      plugins: [
        tokenBucketPlugin<Context>({
          store,
          buckets: [quota, team, fast],
          identify: identify ?? (({ contextValue }) => contextValue.user),
          reportCost: true,
          onStoreError: 'deny', // a store failure must show, not pass as success
        }),
      ],
    });
    servers.push(server);
    await server.start();
    const run = async (query: string, user = 'ann', org = 'acme'): Promise<ResponseBody> =>
      singleResult(await server.executeOperation({ query }, { contextValue: { user, org } }));
    const left = async (bucket: TokenBucket, key: BucketKey): Promise<number> => {
      const admission = await store.acquire(bucket, key, 0);
      if (!admission.allowed) throw new Error('a cost-0 acquire was denied');
      return admission.remaining;
    };
    return { run, left };
  }

  it('serves up to the capacity, reporting what is left, then denies with the wait for one token', async () => {
    const { run } = await harness();
    for (const remaining of [2, 1, 0]) {
      const result = await run('{ quota }');
      expect(result.data).toEqual({ quota: 1 });
      expect(result.extensions).toEqual({ rateLimit: { quota: { cost: 1, remaining, capacity: 3 } } });
    }
    const denied = await run('{ quota }');
    expect(denied.data).toBeUndefined();
    expect(denied.errors?.[0]?.extensions).toEqual({ code: 'RATE_LIMITED', retryAfter: expect.any(Number), bucket: 'quota', cost: 1 });
    const retryAfter = denied.errors?.[0]?.extensions?.['retryAfter'] as number;
    expect(retryAfter).toBeGreaterThan(1190); // one token every 1200 s
    expect(retryAfter).toBeLessThanOrEqual(1200);
  });

  it('lets a client through once it has waited retryAfter', async () => {
    const { run } = await harness();
    expect((await run('{ fast }')).data).toEqual({ fast: 3 });
    const denied = await run('{ fast }');
    const retryAfter = denied.errors?.[0]?.extensions?.['retryAfter'] as number;
    expect(errorCodes(denied)).toEqual(['RATE_LIMITED']);
    // 2 tokens at 1 per 100 ms, less what refilled since the first operation.
    expect(retryAfter).toBeGreaterThan(0.1);
    expect(retryAfter).toBeLessThanOrEqual(0.2);
    await new Promise((resolve) => setTimeout(resolve, retryAfter * 1000));
    expect((await run('{ fast }')).data).toEqual({ fast: 3 });
  });

  it('keeps identities apart', async () => {
    const { run, left } = await harness();
    for (let i = 0; i < 3; i++) expect(errorCodes(await run('{ quota }', 'ann'))).toEqual([]);
    expect(errorCodes(await run('{ quota }', 'ann'))).toEqual(['RATE_LIMITED']);
    expect((await run('{ quota }', 'ben')).extensions).toEqual({ rateLimit: { quota: { cost: 1, remaining: 2, capacity: 3 } } });
    expect(await left(quota, 'ann')).toBe(0);
    expect(await left(quota, 'ben')).toBe(2);
  });

  it.each([
    ['one identity for both buckets', undefined],
    ['a different identity per bucket', ((rc, bucket) => (bucket === team ? `org:${rc.contextValue.org}` : rc.contextValue.user)) as TokenBucketPluginOptions<Context>['identify']],
  ])('takes nothing from one bucket when the other is short, with %s', async (_label, identify) => {
    const { run, left } = await harness(identify);
    const teamKey = identify === undefined ? 'ann' : 'org:acme';
    expect((await run('{ quota team }')).extensions).toEqual({
      rateLimit: { quota: { cost: 1, remaining: 2, capacity: 3 }, team: { cost: 3, remaining: 2, capacity: 5 } },
    });
    const denied = await run('{ quota team }');
    expect(denied.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', bucket: 'team', cost: 3 });
    expect(await left(quota, 'ann')).toBe(2);
    expect(await left(team, teamKey)).toBe(2);
    expect((await run('{ quota }')).extensions).toEqual({ rateLimit: { quota: { cost: 1, remaining: 1, capacity: 3 } } });
  });
});
