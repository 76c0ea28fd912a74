// checkAll (a dry run: one call, nothing written) and measured requests
// (counted, never denying), on every store. What a bucket holds is read with
// checkAll itself, which takes nothing.
import type { Cluster, Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it, vi } from 'vitest';
import { Rate } from '../src/rate.js';
import type { AcquireRequest, BucketKey } from '../src/stores/bucket-store.js';
import { MemoryStore } from '../src/stores/memory-store.js';
import { LuaScript } from '../src/stores/lua-script.js';
import { RedisStore } from '../src/stores/redis-store.js';
import { TokenBucket } from '../src/token-bucket.js';
import { CLIENT_FAMILIES, familyStore } from './support/client-families.js';
import { clusterClient, redisClient, uniquePrefix } from './support/clients.js';

const clients: (Redis | Cluster)[] = [];
afterAll(async () => {
  await Promise.all(clients.map((c) => c.quit().catch(() => undefined)));
});

function redisStore(kind: 'Redis' | 'Redis Cluster'): RedisStore<Redis | Cluster> {
  const client = kind === 'Redis' ? redisClient(inject('redisUrl')) : clusterClient(inject('redisClusterNodes'));
  clients.push(client);
  return new RedisStore(client, { prefix: uniquePrefix(`check measure ${kind}`) });
}

/** ioredis clients to look at what a store wrote. */
const inspectors = { redis: redisClient(inject('redisUrl')), cluster: clusterClient(inject('redisClusterNodes')) };
clients.push(inspectors.redis, inspectors.cluster);

const stores: [string, () => MemoryStore | RedisStore][] = [
  ['MemoryStore', () => new MemoryStore({ now: () => 1_800_000_000_000 })],
  ...CLIENT_FAMILIES.flatMap((family): [string, () => RedisStore][] => [
    [`RedisStore on Redis (${family})`, () => familyStore(family, 'redis', { prefix: uniquePrefix(`check measure ${family}`) })],
    [`RedisStore on Redis Cluster (${family})`, () => familyStore(family, 'cluster', { prefix: uniquePrefix(`check measure ${family}`) })],
  ]),
];

const slow = (name: string, capacity: number) => new TokenBucket(name, capacity, Rate.perHour(1));
const hour = 3_600_000;

describe.each(stores)('%s', (name, makeStore) => {
  const store = makeStore();

  async function holds(bucket: TokenBucket, key: BucketKey): Promise<number> {
    return (await store.checkAll([{ bucket, key, cost: 0 }])).remaining[0]!;
  }

  describe('checkAll', () => {
    it('answers what acquireAll would, writing nothing', async () => {
      const a = slow('check-a', 10);
      const b = slow('check-b', 5);
      await store.acquire(b, 'k', 4); // 1 left
      const requests: AcquireRequest[] = [
        { bucket: a, key: 'k', cost: 3 },
        { bucket: b, key: 'k', cost: 2 },
      ];
      const check = await store.checkAll(requests);
      expect(check).toEqual({
        allowed: false,
        retryAfterMs: expect.any(Number) as number,
        remaining: [10, 1],
        denied: [{ index: 1, retryAfterMs: expect.any(Number) as number }],
      });
      expect(check.retryAfterMs).toBeGreaterThan(hour - 60_000);
      expect(check.retryAfterMs).toBeLessThanOrEqual(hour);
      expect(await store.checkAll(requests)).toMatchObject({ allowed: false, remaining: [10, 1], denied: [{ index: 1 }] });
      expect(await store.acquireAll(requests)).toMatchObject({ allowed: false, remaining: [10, 1] });
      expect(await holds(a, 'k')).toBe(10);
      expect(await store.checkAll([{ bucket: a, key: 'k', cost: 10 }])).toEqual({ allowed: true, retryAfterMs: 0, remaining: [10], denied: [] });
      expect(await holds(a, 'k')).toBe(10);
    });

    it('counts every request before it on the same bucket, and says never for more than the capacity', async () => {
      const bucket = slow('check-twice', 6);
      await store.acquire(bucket, 'k', 1); // 5 left
      const check = await store.checkAll([
        { bucket, key: 'k', cost: 4 },
        { bucket, key: 'k', cost: 2 }, // 1 left after the first: an hour short
        { bucket, key: 'other', cost: 7 }, // more than the capacity
        { bucket, key: 'k', cost: 1 }, // 4 + 2 + 1 asked of 6: never
      ]);
      expect(check).toMatchObject({ allowed: false, retryAfterMs: null, remaining: [5, 5, 6, 5] });
      expect(check.denied).toEqual([
        { index: 1, retryAfterMs: expect.any(Number) as number },
        { index: 2, retryAfterMs: null },
        { index: 3, retryAfterMs: null },
      ]);
      expect(check.denied[0]!.retryAfterMs).toBeGreaterThan(hour - 60_000);
      expect(await holds(bucket, 'k')).toBe(5);
    });

    it('writes no key, on Redis', async () => {
      if (!(store instanceof RedisStore)) return;
      const bucket = slow('check-nokey', 3);
      await store.checkAll([{ bucket, key: 'k', cost: 2 }]);
      const inspector = name.includes('Cluster') ? inspectors.cluster : inspectors.redis;
      expect(await inspector.exists(store.keyFor(bucket, 'k'))).toBe(0);
    });

    it('answers an empty call without a store call', async () => {
      expect(await store.checkAll([])).toEqual({ allowed: true, retryAfterMs: 0, remaining: [], denied: [] });
    });
  });

  describe('measured requests', () => {
    it('are taken with the enforced ones when every request fits', async () => {
      const api = slow('m-api', 10);
      const meter = slow('m-meter', 10);
      expect(
        await store.acquireAll([
          { bucket: api, key: 'k', cost: 3 },
          { bucket: meter, key: 'k', cost: 4, measure: true },
        ]),
      ).toEqual({ allowed: true, remaining: [7, 6] });
      expect(await holds(meter, 'k')).toBe(6);
    });

    it('never deny: the enforced ones are taken, no measured one is, and the short ones are reported', async () => {
      const api = slow('m2-api', 10);
      const meter = slow('m2-meter', 10);
      const other = slow('m2-other', 10);
      await store.acquire(meter, 'k', 8); // 2 left
      const answer = await store.acquireAll([
        { bucket: meter, key: 'k', cost: 5, measure: true },
        { bucket: api, key: 'k', cost: 3 },
        { bucket: other, key: 'k', cost: 1, measure: true },
      ]);
      expect(answer).toEqual({
        allowed: true,
        remaining: [2, 7, 10],
        wouldDeny: [{ index: 0, retryAfterMs: expect.any(Number) as number }],
      });
      if (answer.allowed) expect(answer.wouldDeny?.[0]?.retryAfterMs).toBeGreaterThan(3 * hour - 60_000);
      expect(await holds(meter, 'k')).toBe(2);
      expect(await holds(other, 'k')).toBe(10);
      expect(await holds(api, 'k')).toBe(7);
    });

    it('report never when the cost is beyond the capacity', async () => {
      const api = slow('m3-api', 10);
      const meter = slow('m3-meter', 10);
      expect(
        await store.acquireAll([
          { bucket: api, key: 'k', cost: 1 },
          { bucket: meter, key: 'k', cost: 11, measure: true },
        ]),
      ).toEqual({ allowed: true, remaining: [9, 10], wouldDeny: [{ index: 1, retryAfterMs: null }] });
    });

    it('take nothing when an enforced request denies, and do not decide it', async () => {
      const api = slow('m4-api', 10);
      const meter = slow('m4-meter', 10);
      await store.acquire(api, 'k', 9);
      const answer = await store.acquireAll([
        { bucket: meter, key: 'k', cost: 50, measure: true },
        { bucket: api, key: 'k', cost: 2 },
      ]);
      expect(answer).toEqual({
        allowed: false,
        retryAfterMs: expect.any(Number) as number,
        denied: [{ index: 1, retryAfterMs: expect.any(Number) as number }],
        remaining: [10, 1],
      });
      expect(await holds(meter, 'k')).toBe(10);
    });

    it('leave a measured bucket exactly as full enforcement would, call after call', async () => {
      const api = slow('m5-api', 100);
      const meter = slow('m5-meter', 7);
      const enforcedMeter = slow('m5-enforced', 7);
      for (let i = 0; i < 6; i++) {
        const measured = await store.acquireAll([
          { bucket: api, key: 'm', cost: 1 },
          { bucket: meter, key: 'm', cost: 2, measure: true },
        ]);
        const enforced = await store.acquireAll([
          { bucket: api, key: 'e', cost: 1 },
          { bucket: enforcedMeter, key: 'e', cost: 2 },
        ]);
        expect(measured.allowed).toBe(true);
        expect(await holds(meter, 'm'), `call ${i}`).toBe(await holds(enforcedMeter, 'e'));
        if (measured.allowed) expect(measured.wouldDeny !== undefined, `call ${i}`).toBe(!enforced.allowed);
      }
    });

    it('decide nothing for the enforced ones: a measured request of the same bucket does not change their answer', async () => {
      const api = slow('m6-api', 5);
      await store.acquire(api, 'k', 1); // 4 left
      const answer = await store.acquireAll([
        { bucket: api, key: 'k', cost: 2, measure: true },
        { bucket: api, key: 'k', cost: 3 },
      ]);
      // enforced alone: 3 of 4 fit; with the measured 2 after them they would not
      expect(answer).toEqual({ allowed: true, remaining: [1, 1], wouldDeny: [{ index: 0, retryAfterMs: expect.any(Number) as number }] });
      expect(await holds(api, 'k')).toBe(1);
    });

    it('alone are taken when they fit and reported when they do not', async () => {
      const meter = slow('m7-meter', 3);
      expect(await store.acquireAll([{ bucket: meter, key: 'k', cost: 2, measure: true }])).toEqual({ allowed: true, remaining: [1] });
      expect(await store.acquireAll([{ bucket: meter, key: 'k', cost: 2, measure: true }])).toEqual({
        allowed: true,
        remaining: [1],
        wouldDeny: [{ index: 0, retryAfterMs: expect.any(Number) as number }],
      });
    });

    it('refuse a measure flag that is not a boolean', async () => {
      const api = slow('m8-api', 3);
      await expect(store.acquireAll([{ bucket: api, key: 'k', cost: 1, measure: 'yes' as unknown as boolean }])).rejects.toThrow(TypeError);
    });
  });
});

describe('RedisStore: one store call for every request of one slot', () => {
  it.each(['Redis', 'Redis Cluster'] as const)('acquireAll with measured requests and checkAll make one script call on %s', async (kind) => {
    const store = redisStore(kind);
    const calls = vi.spyOn(LuaScript.prototype, 'run');
    const api = slow('one-call-api', 10);
    const meter = slow('one-call-meter', 1);
    await store.acquireAll([
      { bucket: api, key: 'k', cost: 1 },
      { bucket: meter, key: 'k', cost: 5, measure: true },
    ]);
    await store.checkAll([
      { bucket: api, key: 'k', cost: 1 },
      { bucket: meter, key: 'k', cost: 5 },
    ]);
    expect(calls).toHaveBeenCalledTimes(2);
    calls.mockRestore();
  });
});
