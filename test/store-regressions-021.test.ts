// Regressions of 0.2: races, resets, concurrency and foreign state around
// the bucket arithmetic. Each failed on 0.2.
import type { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { Rate } from '../src/rate.js';
import { MemoryStore } from '../src/stores/memory-store.js';
import { RedisStore } from '../src/stores/redis-store.js';
import { TokenBucket } from '../src/token-bucket.js';
import { clusterClient, redisClient, uniquePrefix } from './support/clients.js';
import type { FaultProxy } from './support/fault-proxy.js';
import { startFaultProxy } from './support/fault-proxy.js';
import type { RedisServerProcess } from './support/redis-server.js';
import { startRedisServer } from './support/redis-server.js';

const clients: (Redis | Cluster)[] = [];
afterAll(async () => {
  await Promise.all(clients.map((c) => c.quit().catch(() => undefined)));
});

type Kind = 'Redis' | 'Redis Cluster';

function redis(kind: Kind): Redis | Cluster {
  const client = kind === 'Redis' ? redisClient(inject('redisUrl')) : clusterClient(inject('redisClusterNodes'));
  clients.push(client);
  return client;
}

const hourly = (name: string, capacity: number): TokenBucket => new TokenBucket(name, capacity, Rate.perHour(1));

async function holds(store: MemoryStore | RedisStore, bucket: TokenBucket, key: string): Promise<number> {
  const answer = await store.acquire(bucket, key, 0);
  return answer.allowed ? answer.remaining : -1;
}

describe('a take whose reply arrives after a reset', () => {
  let server: RedisServerProcess;
  let proxy: FaultProxy;
  let proxied: Redis;
  beforeAll(async () => {
    server = await startRedisServer();
    proxy = await startFaultProxy(server);
    proxied = redisClient(proxy.url);
  });
  afterAll(async () => {
    await proxied?.quit();
    await proxy?.close();
    await server?.stop();
  });

  it('is not given back by a later refund (0.2 gave back tokens others took after the reset)', async () => {
    const prefix = uniquePrefix('reset race');
    const store = new RedisStore(proxied, { prefix });
    const other = new RedisStore(redis('Redis'), { prefix });
    const api = hourly('api', 10);
    await store.acquire(api, 'probe', 0);
    // The acquire runs before the reset; its reply is held until the reset has been sent.
    proxy.hold();
    const taking = store.acquire(api, 'alice', 10);
    const resetting = store.reset(api, 'alice');
    await proxy.held();
    proxy.release();
    expect(await taking).toEqual({ allowed: true, remaining: 0 });
    expect(await resetting).toBe(true);
    expect(await other.acquire(api, 'alice', 10)).toEqual({ allowed: true, remaining: 0 });
    await store.refund(api, 'alice', 10);
    expect(await holds(other, api, 'alice')).toBe(0);
  });
});

describe.each(['Redis', 'Redis Cluster'] as const)('resets on %s are a boundary for refunds', (kind) => {
  it('a reset by another process voids the takes before it (0.2 gave them back on top of the full bucket)', async () => {
    const prefix = uniquePrefix(`reset mark ${kind}`);
    const store = new RedisStore(redis(kind), { prefix });
    const other = new RedisStore(redis(kind), { prefix });
    const api = hourly('api', 10);
    await store.acquire(api, 'alice', 6);
    expect(await other.reset(api, 'alice')).toBe(true);
    expect(await other.acquire(api, 'alice', 10)).toEqual({ allowed: true, remaining: 0 });
    await store.refund(api, 'alice', 6);
    expect(await holds(other, api, 'alice')).toBe(0);
  });

  it('takes after the reset are given back', async () => {
    const prefix = uniquePrefix(`reset after ${kind}`);
    const store = new RedisStore(redis(kind), { prefix });
    const other = new RedisStore(redis(kind), { prefix });
    const api = hourly('api', 10);
    await store.acquire(api, 'alice', 6);
    await other.reset(api, 'alice');
    await store.acquire(api, 'alice', 7);
    await store.refund(api, 'alice', 7);
    expect(await holds(store, api, 'alice')).toBe(10);
  });
});

describe('refunds are exact under concurrency within one process', () => {
  const subjects: [string, () => { stores: (MemoryStore | RedisStore)[] }][] = [
    ['MemoryStore', () => ({ stores: [new MemoryStore()] })],
    ...(['Redis', 'Redis Cluster'] as const).map((kind): [string, () => { stores: RedisStore[] }] => [
      `RedisStore on ${kind}, two connections`,
      () => {
        const prefix = uniquePrefix(`concurrent refunds ${kind}`);
        return { stores: [new RedisStore(redis(kind), { prefix }), new RedisStore(redis(kind), { prefix })] };
      },
    ]),
  ];

  it.each(subjects)('%s: 200 concurrent (acquire 3, refund 2) on a bucket of 1000 end at 800', async (_name, make) => {
    const { stores } = make();
    const api = hourly('api', 1000);
    await Promise.all(
      Array.from({ length: 200 }, async (_, i) => {
        const store = stores[i % stores.length]!;
        expect(await store.acquire(api, 'alice', 3)).toMatchObject({ allowed: true });
        await store.refund(api, 'alice', 2);
      }),
    );
    expect(await holds(stores[0]!, api, 'alice')).toBe(800);
  });

  it.each(subjects)('%s: three concurrent on one store end exact', async (_name, make) => {
    const { stores } = make();
    const store = stores[0]!;
    const api = hourly('api', 50);
    await Promise.all(
      Array.from({ length: 3 }, async () => {
        await store.acquire(api, 'bob', 10);
        await store.refund(api, 'bob', 4);
      }),
    );
    expect(await holds(store, api, 'bob')).toBe(32);
  });
});

describe.each([
  ['MemoryStore', () => new MemoryStore()],
  ['RedisStore', () => new RedisStore(redis('Redis'), { prefix: uniquePrefix('fresh refund') })],
] as const)('a refund right after its take, on %s', (_name, make) => {
  it('leaves the bucket full again, whatever refilled in the meantime (0.2 RedisStore gave back a millisecond less)', async () => {
    const store = make();
    const fast = new TokenBucket('fast', 1000, Rate.perSecond(1000));
    for (let i = 0; i < 20; i++) {
      expect(await store.acquire(fast, `k${i}`, 1000)).toEqual({ allowed: true, remaining: 0 });
      expect(await store.refundAll([{ bucket: fast, key: `k${i}`, cost: 1000 }])).toEqual([1000]);
    }
  });
});

describe.each(['Redis', 'Redis Cluster'] as const)('another Redis type at a bucket key, on %s', (kind) => {
  it('is an error naming the key on every path, never read or overwritten (0.2 read it as a full bucket with two requests and overwrote it)', async () => {
    const client = redis(kind);
    const prefix = uniquePrefix(`foreign type ${kind}`);
    const store = new RedisStore(client, { prefix });
    const api = hourly('api', 10);
    const search = hourly('search', 10);
    const key = store.keyFor(api, 'alice');
    await client.hset(key, 'field', 'value');
    const named = new RegExp(`key ${key.replace(/[{}]/g, '\\$&')} does not hold a token bucket state`);
    await expect(store.acquire(api, 'alice', 1)).rejects.toThrow(named);
    await expect(store.acquire(api, 'alice', 0)).rejects.toThrow(named);
    await expect(
      store.acquireAll([
        { bucket: search, key: 'alice', cost: 1 },
        { bucket: api, key: 'alice', cost: 1 },
      ]),
    ).rejects.toThrow(named);
    await expect(store.acquireAll([{ bucket: api, key: 'alice', cost: 1, measure: true }])).rejects.toThrow(named);
    await expect(store.checkAll([{ bucket: api, key: 'alice', cost: 1 }])).rejects.toThrow(named);
    await store.acquire(search, 'alice', 4);
    await expect(
      store.refundAll([
        { bucket: search, key: 'alice', cost: 4 },
        { bucket: api, key: 'alice', cost: 1 },
      ]),
    ).rejects.toThrow(named);
    await expect(store.reset(api, 'alice')).rejects.toThrow(named);
    expect(await client.type(key)).toBe('hash');
    expect(await client.hgetall(key)).toEqual({ field: 'value' });
    // nothing of the failed calls was applied: the other bucket's take of 4 stands, refund and all
    expect(await holds(store, search, 'alice')).toBe(6);
  });
});

describe.each([
  ['MemoryStore', () => new MemoryStore()],
  ['RedisStore', () => new RedisStore(redis('Redis'), { prefix: uniquePrefix('integer identities') })],
] as const)('integer identities on %s', (_name, make) => {
  it('equal as numbers are one key at every magnitude (0.2: 1e21 was "1e+21")', async () => {
    const store = make();
    const api = hourly('api', 100);
    for (const [i, [number, text, big]] of ([
      [1e21, '1000000000000000000000', 10n ** 21n],
      [2 ** 53, '9007199254740992', 2n ** 53n],
      [-1e22, '-10000000000000000000000', -(10n ** 22n)],
      [1.7976931348623157e308, BigInt(1.7976931348623157e308).toString(), BigInt(1.7976931348623157e308)],
    ] as const).entries()) {
      const bucket = hourly(`api${i}`, 100);
      await store.acquire(bucket, number, 1);
      await store.acquire(bucket, text, 1);
      expect(await store.acquire(bucket, big, 1)).toEqual({ allowed: true, remaining: 97 });
    }
    await store.acquire(api, -0, 1);
    expect(await store.acquire(api, 0n, 1)).toEqual({ allowed: true, remaining: 98 });
  });
});

describe('MemoryStore clocks', () => {
  it('refuses a clock outside the range where its arithmetic is exact (0.2 admitted everything at 1e300)', async () => {
    const api = hourly('api', 1);
    for (const ms of [1e300, Number.MAX_VALUE, 2 ** 53, 9.1e12, -1, NaN]) {
      expect(() => new MemoryStore({ now: () => ms }), String(ms)).toThrow(RangeError);
    }
    let now = 9e12; // the year 2255: an hour's refill still fits below 2^53 µs
    const store = new MemoryStore({ now: () => now });
    expect(await store.acquire(api, 'k', 1)).toEqual({ allowed: true, remaining: 0 });
    expect(await store.acquire(api, 'k', 1)).toMatchObject({ allowed: false });
    // a bucket refilling over 100 years would be full again past 2^53 µs
    const slow = new TokenBucket('slow', 100, new Rate(1, 31_557_600_000));
    await expect(store.acquire(slow, 'k', 1)).rejects.toThrow(/full again beyond 2\^53/);
    now = 1e300;
    await expect(store.acquire(api, 'k', 1)).rejects.toThrow(RangeError);
  });
});
