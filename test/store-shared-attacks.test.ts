// Hostile review of the shared acquire path (lua/acquire-each.lua) and of
// what every store call reads back: regressions for defects proven against a
// real Redis and a real Redis Cluster.
import { Cluster, Redis } from 'ioredis';
import { Cluster as ValkeyCluster, Redis as ValkeyRedis } from 'iovalkey';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { Rate } from '../src/rate.js';
import { RedisStore } from '../src/stores/redis-store.js';
import type { RedisStoreClient } from '../src/stores/redis-client.js';
import { TokenBucket } from '../src/token-bucket.js';
import { CLIENT_FAMILIES, familyClient, sharedTarget } from './support/client-families.js';
import { uniquePrefix } from './support/clients.js';

const hourly = (name: string, capacity: number) => new TokenBucket(name, capacity, Rate.perHour(1));

describe('an ioredis or iovalkey client whose options type numbers as strings (stringNumbers)', () => {
  const url = inject('redisUrl');
  const nodes = inject('redisClusterNodes')!;
  const clients: [string, RedisStoreClient & { disconnect(): void }][] = [
    ['ioredis Redis', new Redis(url, { stringNumbers: true })],
    ['ioredis Cluster', new Cluster(nodes, { redisOptions: { stringNumbers: true } })],
    ['iovalkey Redis', new ValkeyRedis(url, { stringNumbers: true })],
    ['iovalkey Cluster', new ValkeyCluster(nodes.map(({ host, port }) => ({ host, port })), { redisOptions: { stringNumbers: true } })],
  ];
  afterAll(() => {
    for (const [, client] of clients) client.disconnect();
  });

  // 0.3 read the scripts' integer replies as strings on the store's own connection (a duplicate with the
  // client's options): every call failed with "unexpected reply" after Redis had applied it, and reset said false.
  it.each(clients)('%s: every call reads its reply as with the default options', async (_name, client) => {
    const store = new RedisStore(client, { prefix: uniquePrefix('string-numbers') });
    const a = hourly('a', 5);
    const b = hourly('b', 3);
    expect(await store.acquire(a, 'k', 1)).toEqual({ allowed: true, remaining: 4 });
    // one tick: a shared call
    expect(await Promise.all([store.acquire(a, 'k', 2), store.acquire(a, 'k', 3), store.acquireAll([{ bucket: b, key: 'k', cost: 2 }])])).toEqual([
      { allowed: true, remaining: 2 },
      { allowed: false, retryAfterMs: expect.any(Number) as number },
      { allowed: true, remaining: [1] },
    ]);
    expect(await store.acquireAll([{ bucket: a, key: 'k', cost: 1 }, { bucket: b, key: 'k', cost: 1 }])).toEqual({ allowed: true, remaining: [1, 0] });
    expect(await store.checkAll([{ bucket: a, key: 'k', cost: 9 }])).toMatchObject({ allowed: false, denied: [{ index: 0, retryAfterMs: null }], remaining: [1] });
    expect(await store.refundAll([{ bucket: a, key: 'k', cost: 4 }])).toEqual([5]);
    expect(await store.reset(b, 'k')).toBe(true);
    expect(await store.reset(b, 'k')).toBe(false);
    await store.close();
  });
});

describe.each(CLIENT_FAMILIES)('%s', (family) => {
  describe.each(['redis', 'cluster'] as const)('%s: a reset sent while takes are in flight', (kind) => {
    const client = familyClient(family, sharedTarget(kind));

    // 0.3 forgot the reset when the last take in flight was answered, before asking whether that take had been
    // reset since: its receipt stayed (the reset had given its tokens back), a later take by the same store
    // continued the chain from before the reset, and lua/refund.lua, seeing a chain older than the reset's mark,
    // gave nothing back: the bucket ended 3 tokens emptier than had they never been taken.
    it('leaves no receipt of them: a refund of a later take by the same store is exact', async () => {
      const store = new RedisStore(client, { prefix: uniquePrefix(`reset-in-flight-${family}-${kind}`) });
      const bucket = hourly('r', 100);
      // one tick: one shared call, sent at the tick's end; the reset goes right after it
      const takes = Promise.all([store.acquire(bucket, 'k', 5), store.acquire(bucket, 'k', 1)]);
      await new Promise((resolve) => process.nextTick(resolve));
      const reset = store.reset(bucket, 'k');
      expect(await takes).toEqual([{ allowed: true, remaining: 95 }, { allowed: true, remaining: 94 }]);
      expect(await reset).toBe(true);
      // a pair named twice: not known to be taken from a full bucket, so it continues whatever chain is kept
      expect(await store.acquireAll([{ bucket, key: 'k', cost: 1 }, { bucket, key: 'k', cost: 2 }])).toEqual({ allowed: true, remaining: [99, 97] });
      await store.refund(bucket, 'k', 3);
      expect(await store.acquire(bucket, 'k', 0)).toEqual({ allowed: true, remaining: 100 });
      await store.close();
    });
  });
});
