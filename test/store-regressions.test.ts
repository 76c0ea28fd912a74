// Regressions: each of these failed on 0.1, at real magnitudes (clocks at
// today's epoch in µs, fast rates, huge capacities, foreign values).
import type { Cluster, Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { Rate } from '../src/rate.js';
import { MemoryStore } from '../src/stores/memory-store.js';
import { RedisStore } from '../src/stores/redis-store.js';
import { MAX_BATCH_REQUESTS } from '../src/stores/validate.js';
import { TokenBucket } from '../src/token-bucket.js';
import { CLIENT_FAMILIES, familyClient, sharedTarget } from './support/client-families.js';
import type { ClientFamily } from './support/client-families.js';
import { clusterClient, redisClient, uniquePrefix } from './support/clients.js';
import { waitOnRedis } from './support/redis-clock.js';

const clients: (Redis | Cluster)[] = [];
afterAll(async () => {
  await Promise.all(clients.map((c) => c.quit().catch(() => undefined)));
});

function redis(kind: 'Redis' | 'Redis Cluster'): Redis | Cluster {
  const client = kind === 'Redis' ? redisClient(inject('redisUrl')) : clusterClient(inject('redisClusterNodes'));
  clients.push(client);
  return client;
}

interface Subject {
  store: MemoryStore | RedisStore;
  /** Waits `ms`: on MemoryStore's clock, or for real on Redis. */
  wait(ms: number): Promise<void>;
  /** An ioredis client to the store's Redis, to look at what it stored. */
  redis?: Redis | Cluster;
}

/** MemoryStore on a clock at today's epoch (µs ~ 1.8e15), which only moves when told. */
function memorySubject(): Subject {
  let now = Date.now();
  return { store: new MemoryStore({ now: () => now }), wait: async (ms) => void (now += ms) };
}

/** The store on a client of `family`; the clock and the look at its keys on ioredis. */
function redisSubject(kind: 'Redis' | 'Redis Cluster', family: ClientFamily): Subject {
  const client = redis(kind);
  const own = family === 'ioredis' ? client : familyClient(family, sharedTarget(kind === 'Redis' ? 'redis' : 'cluster'));
  return { store: new RedisStore(own, { prefix: uniquePrefix(`regressions ${kind} ${family}`) }), wait: (ms) => waitOnRedis(client, ms), redis: client };
}

const subjects: [string, () => Subject][] = [
  ['MemoryStore', memorySubject],
  ...CLIENT_FAMILIES.flatMap((family): [string, () => Subject][] => [
    [`RedisStore on Redis (${family})`, () => redisSubject('Redis', family)],
    [`RedisStore on Redis Cluster (${family})`, () => redisSubject('Redis Cluster', family)],
  ]),
];

describe.each(subjects)('%s at epoch-scale times', (_name, makeSubject) => {
  const { store, wait, redis: inspector } = makeSubject();

  it('admits a full bucket at 9,000 a second (0.1 denied acquire(100) forever with retryAfterMs 1)', async () => {
    const api = new TokenBucket('api', 100, Rate.perSecond(9000));
    expect(await store.acquire(api, 'k', 100)).toEqual({ allowed: true, remaining: 0 });
  });

  it('admits a full bucket of any capacity at fast rates', async () => {
    for (const n of [4000, 4096, 9000, 65_537, 1_000_000, 7_777_777, 10_000_000]) {
      for (const capacity of [1, 7, 100, 999, 1_000_000]) {
        const bucket = new TokenBucket(`fast-${n}-${capacity}`, capacity, Rate.perSecond(n));
        expect(await store.acquire(bucket, 'k', capacity), `${capacity} at ${n}/s`).toEqual({ allowed: true, remaining: 0 });
      }
    }
  });

  it('leaves 99 of 100 after one token at ten million a second (0.1 left 97)', async () => {
    const fast = new TokenBucket('ten-million', 100, Rate.perSecond(10_000_000));
    expect(await store.acquire(fast, 'k', 1)).toEqual({ allowed: true, remaining: 99 });
  });

  it('admits a bucket of one at five tokens a microsecond (0.1 never did)', async () => {
    const tiny = new TokenBucket('tiny', 1, new Rate(5, 0.001));
    expect(await store.acquire(tiny, 'k')).toEqual({ allowed: true, remaining: 0 });
  });

  it('admits after waiting exactly retryAfterMs at new Rate(9, 0.7) (0.1 denied again)', async () => {
    const odd = new TokenBucket('odd', 10, new Rate(9, 0.7));
    for (let round = 0; round < 5; round++) {
      const key = `k${round}`;
      expect(await store.acquire(odd, key, 10)).toMatchObject({ allowed: true });
      const denied = await store.acquire(odd, key, 10);
      if (denied.allowed) continue; // on Redis, time moves on between the calls
      expect(denied.retryAfterMs).toBeGreaterThan(0);
      await wait(denied.retryAfterMs!);
      expect(await store.acquire(odd, key, 10), `round ${round}`).toMatchObject({ allowed: true });
    }
  });

  it('reports whole tokens at capacities near 2^52 and 2^53, never capacity + 1', async () => {
    for (const capacity of [2 ** 52 + 1, 2 ** 52 + 3, Number.MAX_SAFE_INTEGER - 1, Number.MAX_SAFE_INTEGER]) {
      for (const rate of [Rate.perSecond(10_000_000), new Rate(7_777_777, 1000), new Rate(9_999_991, 997)]) {
        if (BigInt(capacity) * BigInt(rate.periodUs) > BigInt(rate.tokens) * 3_155_760_000_000_000n) continue;
        const bucket = new TokenBucket(`big-${capacity % 1000}-${rate.tokens}`, capacity, rate);
        expect(await store.acquire(bucket, 'k', 0), `${capacity} at ${rate}`).toEqual({ allowed: true, remaining: capacity });
        expect(await store.acquire(bucket, 'k', 1), `${capacity} at ${rate}`).toMatchObject({ allowed: true });
        const left = await store.acquire(bucket, 'k', 0);
        expect(left.allowed && left.remaining).toBeLessThanOrEqual(capacity);
        expect(left.allowed && left.remaining).toBeGreaterThanOrEqual(capacity - 1);
        expect(await store.acquireAll([{ bucket, key: 'k', cost: 1 }, { bucket, key: 'k', cost: capacity }])).toMatchObject({
          allowed: false,
          denied: [{ index: 1, retryAfterMs: null }],
        });
      }
    }
  });

  it('keeps all or nothing at the 100-year bound (0.1 failed mid-script after charging earlier buckets)', async () => {
    // 3,155 tokens, one every 1e9 ms: a full refill takes just under 100 years
    const slow = new TokenBucket('century', 3155, new Rate(1, 1e9));
    const small = new TokenBucket('small', 5, Rate.perHour(1));
    expect(await store.acquireAll([{ bucket: small, key: 'k', cost: 1 }, { bucket: slow, key: 'k', cost: 3155 }])).toEqual({
      allowed: true,
      remaining: [4, 0],
    });
    expect(await store.acquireAll([{ bucket: small, key: 'k', cost: 1 }, { bucket: slow, key: 'k', cost: 1 }])).toMatchObject({
      allowed: false,
      denied: [{ index: 1 }],
      remaining: [4, 0],
    });
    expect(await store.acquire(small, 'k', 0)).toEqual({ allowed: true, remaining: 4 });
    if (store instanceof RedisStore && inspector) {
      for (const bucket of [slow, small]) {
        const key = store.keyFor(bucket, 'k');
        expect(await inspector.get(key)).toMatch(/^\d{16}$/);
        expect(await inspector.pttl(key)).toBeGreaterThan(0);
      }
    }
  });

  it('refuses a batch beyond MAX_BATCH_REQUESTS with a RangeError, sending nothing (0.1 failed in Lua unpack)', async () => {
    const bucket = new TokenBucket('batch', 10_000, Rate.perHour(1));
    const requests = Array.from({ length: 8000 }, (_, i) => ({ bucket, key: `id-${i}`, cost: 1 }));
    await expect(store.acquireAll(requests)).rejects.toThrow(RangeError);
    await expect(store.acquireAll(requests)).rejects.toThrow(/at most 1000 requests/);
    await expect(store.checkAll(requests)).rejects.toThrow(RangeError);
    await expect(store.refundAll(requests)).rejects.toThrow(RangeError);
    expect(await store.acquire(bucket, 'id-0', 0)).toEqual({ allowed: true, remaining: 10_000 });
  });

  it(`takes ${MAX_BATCH_REQUESTS} requests of one identity in one call`, async () => {
    const buckets = Array.from({ length: 10 }, (_, i) => new TokenBucket(`many-${i}`, 1000, Rate.perHour(1)));
    const requests = Array.from({ length: MAX_BATCH_REQUESTS }, (_, i) => ({ bucket: buckets[i % 10]!, key: 'one', cost: 1 }));
    const answer = await store.acquireAll(requests);
    expect(answer.allowed).toBe(true);
    expect(answer.remaining.slice(-10)).toEqual(Array.from({ length: 10 }, () => 900));
  });
});

describe('MemoryStore timers', () => {
  it('refuses a sweep interval a Node timer cannot wait (0.1 swept every millisecond above 2^31 - 1 ms)', () => {
    for (const sweepIntervalMs of [2 ** 31, 1e12, 0, 0.5, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => new MemoryStore({ sweepIntervalMs }), String(sweepIntervalMs)).toThrow(RangeError);
    }
    const longest = new MemoryStore({ sweepIntervalMs: 2 ** 31 - 1 });
    void longest.close();
  });

  it('refuses a clock that returns something other than a time', async () => {
    expect(() => new MemoryStore({ now: () => Number.NaN })).toThrow(/clock returned NaN/);
    let now = Date.now();
    const store = new MemoryStore({ now: () => now });
    now = Number.POSITIVE_INFINITY;
    await expect(store.acquire(new TokenBucket('clock', 1, Rate.perSecond(1)), 'k')).rejects.toThrow(/clock returned Infinity/);
  });
});

const foreignCases = (['Redis', 'Redis Cluster'] as const).flatMap((kind) => CLIENT_FAMILIES.map((family) => [kind, family] as const));

describe.each(foreignCases)('RedisStore on %s (%s) with foreign stored values', (kind, family) => {
  const client = redis(kind);
  const own = family === 'ioredis' ? client : familyClient(family, sharedTarget(kind === 'Redis' ? 'redis' : 'cluster'));
  const store = new RedisStore(own, { prefix: uniquePrefix(`foreign ${kind} ${family}`) });
  const sleep = (ms: number) => waitOnRedis(client, ms);
  // 5 tokens, one every 10 ms: empty to full in 50 ms
  const bucket = new TokenBucket('foreign', 5, Rate.perSecond(100));

  // 5 tokens, one a second: the key a call rewrites outlives a busy machine's pause before it is read
  const slow = new TokenBucket('foreign-slow', 5, Rate.perSecond(1));

  // A time in plain digits (the store's own form) so far ahead that it is beyond any full refill.
  it.each(['99999999999999999999', '1' + '0'.repeat(400)])(
    'reads %s, a time beyond any full refill, as an empty bucket and rewrites it with an expiry, never denying forever (0.1: retryAfterMs 0, no TTL)',
    async (value) => {
      const key = store.keyFor(slow, value);
      await client.set(key, value);
      const denied = await store.acquire(slow, value, 1);
      expect(denied).toEqual({ allowed: false, retryAfterMs: 1000 });
      const [ttl, state] = await Promise.all([client.pttl(key), client.get(key)]);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(5001);
      expect(state).toMatch(/^\d{16}$/);
      // and on the fast bucket, waiting the wait admits
      const fast = store.keyFor(bucket, value);
      await client.set(fast, value);
      expect(await store.acquire(bucket, value, 1)).toEqual({ allowed: false, retryAfterMs: 10 });
      await sleep(10);
      expect(await store.acquire(bucket, value, 1)).toMatchObject({ allowed: true });
    },
  );

  it('reads a time in the past, however far, as a full bucket', async () => {
    for (const value of ['1', '12', '1000000']) {
      const key = store.keyFor(slow, `past${value}`);
      await client.set(key, value);
      expect(await store.acquire(slow, `past${value}`, 5), value).toEqual({ allowed: true, remaining: 0 });
      expect(await client.pttl(key)).toBeGreaterThan(0);
    }
  });

  it('reads a time beyond a full refill from now as empty (a capacity lowered since), then refills', async () => {
    const [seconds] = await client.time();
    const key = store.keyFor(bucket, 'future');
    await client.set(key, String((Number(seconds) + 3600) * 1_000_000));
    expect(await store.acquire(bucket, 'future', 5)).toEqual({ allowed: false, retryAfterMs: 50 });
    await sleep(50);
    expect(await store.acquire(bucket, 'future', 5)).toEqual({ allowed: true, remaining: 0 });
  });

  it('fails with an error naming the key when the value is not a time at all', async () => {
    const key = store.keyFor(bucket, 'word');
    await client.set(key, 'hello');
    await expect(store.acquire(bucket, 'word')).rejects.toThrow(`key ${key} does not hold a token bucket state`);
    await expect(store.checkAll([{ bucket, key: 'word', cost: 1 }])).rejects.toThrow(key);
    expect(await client.get(key)).toBe('hello');
  });
});

describe('RedisStore on Redis Cluster: buckets in several hash slots', () => {
  const client = redis('Redis Cluster');
  const store = new RedisStore(client, { prefix: uniquePrefix('cross slot') });
  const api = new TokenBucket('api', 10, Rate.perHour(1));

  async function holds(key: string): Promise<number> {
    const answer = await store.acquire(api, key, 0);
    return answer.allowed ? answer.remaining : -1;
  }

  it('gives a group back once when a later group is denied and the next one fails (0.1 gave it back twice)', async () => {
    await store.acquire(api, 'alice', 4); // 6 left
    await store.acquire(api, 'bob', 10); // 0 left
    await client.set(store.keyFor(api, 'carol'), 'not a bucket');
    const answer = await store.acquireAll([
      { bucket: api, key: 'alice', cost: 3 },
      { bucket: api, key: 'bob', cost: 2 },
      { bucket: api, key: 'carol', cost: 1 },
    ]);
    expect(answer).toMatchObject({ allowed: false, denied: [{ index: 1 }] });
    expect(await holds('alice')).toBe(6);
  });

  it('gives every group taken back once when a later one fails', async () => {
    await store.acquire(api, 'dave', 4); // 6 left
    await store.acquire(api, 'erin', 1); // 9 left
    await client.set(store.keyFor(api, 'frank'), 'not a bucket');
    await expect(
      store.acquireAll([
        { bucket: api, key: 'dave', cost: 3 },
        { bucket: api, key: 'erin', cost: 3 },
        { bucket: api, key: 'frank', cost: 1 },
      ]),
    ).rejects.toThrow(/does not hold a token bucket state/);
    expect(await holds('dave')).toBe(6);
    expect(await holds('erin')).toBe(9);
  });
});

describe.each(subjects)('%s: a refund', (_name, makeSubject) => {
  const { store, wait } = makeSubject();

  // 0.1's refund.lua subtracted the refunded tokens' time from the bucket's
  // full-at time, which also returns refill that already came back.
  it('gives back only what is still outstanding: taken from a full bucket, refunded 300 ms later at 10/s (0.1 left 8, not 5)', async () => {
    const other = store instanceof RedisStore ? new RedisStore(store.client, { prefix: store.prefix }) : store;
    const bucket = new TokenBucket('refund-accrued', 10, Rate.perSecond(10));
    expect(await store.acquire(bucket, 'k', 5)).toEqual({ allowed: true, remaining: 5 });
    await wait(300); // 8 now
    // another operation takes 5: 3 left; had ours not been taken, it would have found 10 and left 5
    expect(await other.acquire(bucket, 'k', 5)).toMatchObject({ allowed: true });
    // One store object took both (MemoryStore): a refund is counted from its latest take, as if the
    // other operation's 5 had not been taken (8). Another store's take is not this store's to give back.
    expect(await store.refundAll([{ bucket, key: 'k', cost: 5 }])).toEqual([store === other ? 8 : 5]);
  });
});
