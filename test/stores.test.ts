import { setTimeout as sleep } from 'node:timers/promises';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { Rate } from '../src/rate.js';
import { MemoryStore } from '../src/stores/memory-store.js';
import { RedisStore } from '../src/stores/redis-store.js';
import { TokenBucket } from '../src/token-bucket.js';
import { CLIENT_FAMILIES, familyClient } from './support/client-families.js';
import type { ClientFamily } from './support/client-families.js';
import { clusterClient, redisClient, uniquePrefix } from './support/clients.js';
import { redisNow } from './support/redis-clock.js';

interface Subject {
  store: RedisStore | MemoryStore;
  /** An ioredis client to the Redis behind a RedisStore, to look at what it stored. */
  redis?: Redis | Cluster;
}

const admins = new Map<'redis' | 'cluster', Redis | Cluster>();
afterAll(async () => {
  await Promise.all([...admins.values()].map((c) => c.quit().catch(() => undefined)));
});

function admin(kind: 'redis' | 'cluster'): Redis | Cluster {
  let client = admins.get(kind);
  if (client === undefined) {
    client = kind === 'redis' ? redisClient(inject('redisUrl')) : clusterClient(inject('redisClusterNodes'));
    admins.set(kind, client);
  }
  return client;
}

/** A RedisStore on a client of `family`; called while its describe block is collected. */
function redisSubject(kind: 'redis' | 'cluster', family: ClientFamily): Subject {
  const client = familyClient(family, kind === 'redis' ? { kind, url: inject('redisUrl') } : { kind, nodes: inject('redisClusterNodes') });
  return { store: new RedisStore(client, { prefix: uniquePrefix(`${kind} ${family}`) }), redis: admin(kind) };
}

const subjects: [string, () => Subject][] = [
  ['MemoryStore', () => ({ store: new MemoryStore() })],
  ...CLIENT_FAMILIES.flatMap((family): [string, () => Subject][] => [
    [`RedisStore on Redis (${family})`, () => redisSubject('redis', family)],
    [`RedisStore on Redis Cluster (${family})`, () => redisSubject('cluster', family)],
  ]),
];

/** Every key of a RedisStore, on every master of a Cluster. */
async function storedKeys(subject: Subject): Promise<string[]> {
  const { redis, store } = subject;
  if (!redis || !(store instanceof RedisStore)) return [];
  const nodes = redis.isCluster ? (redis as Cluster).nodes('master') : [redis as Redis];
  const keys: string[] = [];
  for (const node of nodes) {
    keys.push(...(await node.keys(`${store.prefix}*`)));
  }
  return keys;
}

describe.each(subjects)('%s', (_name, makeSubject) => {
  const subject = makeSubject();
  const { store } = subject;

  it('follows the SPEC example: 20 rapid requests allowed, the 21st told to wait about 3 s', async () => {
    const bucket = new TokenBucket('search', 20, new Rate(1, 3000));
    const answers = [];
    // the store's clock moves no more between the first take and the 21st request than this one does around them
    const start = performance.now();
    for (let i = 0; i < 21; i++) answers.push(await store.acquire(bucket, 'user-1'));
    const span = performance.now() - start;
    expect(answers.slice(0, 20)).toEqual(Array.from({ length: 20 }, (_, i) => ({ allowed: true, remaining: 19 - i })));
    const denied = answers[20]!;
    expect(denied.allowed).toBe(false);
    if (denied.allowed) return;
    expect(denied.retryAfterMs).toBeGreaterThanOrEqual(Math.min(2500, 3000 - Math.ceil(span)));
    expect(denied.retryAfterMs).toBeLessThanOrEqual(3000);
  });

  it('gives a key never seen the whole burst, and keeps keys apart', async () => {
    const bucket = new TokenBucket('burst', 5, Rate.perHour(1));
    expect(await store.acquire(bucket, 'a', 5)).toEqual({ allowed: true, remaining: 0 });
    expect(await store.acquire(bucket, 'b', 5)).toEqual({ allowed: true, remaining: 0 });
    expect((await store.acquire(bucket, 'a')).allowed).toBe(false);
  });

  it('admits only cost-0 requests at capacity 0', async () => {
    const bucket = new TokenBucket('zero', 0, Rate.perSecond(10));
    expect(await store.acquire(bucket, 'k', 0)).toEqual({ allowed: true, remaining: 0 });
    expect(await store.acquire(bucket, 'k', 1)).toEqual({ allowed: false, retryAfterMs: null });
    expect(await store.acquire(bucket, 'k')).toEqual({ allowed: false, retryAfterMs: null });
  });

  it('denies a cost above capacity with retryAfterMs null and takes nothing', async () => {
    const bucket = new TokenBucket('big', 10, Rate.perHour(1));
    expect(await store.acquire(bucket, 'k', 11)).toEqual({ allowed: false, retryAfterMs: null });
    expect(await store.acquire(bucket, 'k', 10)).toEqual({ allowed: true, remaining: 0 });
  });

  it('takes nothing on a denial', async () => {
    const bucket = new TokenBucket('deny', 10, Rate.perHour(1));
    expect(await store.acquire(bucket, 'k', 7)).toEqual({ allowed: true, remaining: 3 });
    expect((await store.acquire(bucket, 'k', 4)).allowed).toBe(false);
    expect(await store.acquire(bucket, 'k', 3)).toEqual({ allowed: true, remaining: 0 });
  });

  it('rejects a cost that is not a non-negative safe integer with a RangeError, writing nothing', async () => {
    const bucket = new TokenBucket('bad-cost', 10, Rate.perHour(1));
    for (const cost of [-1, -0.5, 1.5, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, 2 ** 53, '3']) {
      await expect(store.acquire(bucket, 'k', cost as number)).rejects.toThrow(RangeError);
      await expect(store.acquireAll([{ bucket, key: 'k', cost: 1 }, { bucket, key: 'k', cost: cost as number }])).rejects.toThrow(
        RangeError,
      );
    }
    expect(await storedKeys(subject)).not.toContain((store as RedisStore).keyFor?.(bucket, 'k'));
    expect(await store.acquire(bucket, 'k', 10)).toEqual({ allowed: true, remaining: 0 });
  });

  it('refills continuously, by fractions of a token', async () => {
    const bucket = new TokenBucket('refill', 1, new Rate(1, 200));
    // the store's clock moves no more between two calls than this one does from before the first to after the second
    const start = performance.now();
    expect(await store.acquire(bucket, 'k')).toEqual({ allowed: true, remaining: 0 });
    const first = await store.acquire(bucket, 'k');
    const drained = performance.now() - start;
    if (first.allowed) throw new Error('expected a denial right after draining the bucket');
    expect(first.retryAfterMs).toBeGreaterThanOrEqual(200 - Math.ceil(drained));
    expect(first.retryAfterMs).toBeLessThanOrEqual(200);
    if (first.retryAfterMs! < 120) return; // the machine too slow to see half a token refill

    // Less than a token later the wait has shrunk by about as long as we waited.
    await sleep(40);
    const second = await store.acquire(bucket, 'k');
    const waited = performance.now() - start;
    if (second.allowed) {
      expect(waited).toBeGreaterThanOrEqual(first.retryAfterMs!); // a token refilled meanwhile
      return;
    }
    expect(second.retryAfterMs).toBeLessThanOrEqual(first.retryAfterMs! - 39);
    expect(second.retryAfterMs).toBeGreaterThanOrEqual(first.retryAfterMs! - Math.ceil(waited) - 1);

    await sleep(second.retryAfterMs! + 5);
    expect(await store.acquire(bucket, 'k')).toEqual({ allowed: true, remaining: 0 });
  });

  it('resets a bucket to full, telling whether it had been used', async () => {
    const bucket = new TokenBucket('reset', 3, Rate.perHour(1));
    expect(await store.reset(bucket, 'k')).toBe(false);
    await store.acquire(bucket, 'k', 3);
    expect(await store.reset(bucket, 'k')).toBe(true);
    expect(await store.acquire(bucket, 'k')).toEqual({ allowed: true, remaining: 2 });
    expect(await store.reset(bucket, 'other')).toBe(false);
  });

  it('treats 7, "7" and 7n as one identity', async () => {
    const bucket = new TokenBucket('numeric', 3, Rate.perHour(1));
    await store.acquire(bucket, 7);
    await store.acquire(bucket, '7');
    expect(await store.acquire(bucket, 7n)).toEqual({ allowed: true, remaining: 0 });
  });

  it('keeps hostile keys apart', async () => {
    const bucket = new TokenBucket('hostile', 1, Rate.perHour(1));
    const hostile = ['{', '}', '{}', '{a}b', 'a}{b', ':', '::', '', ' ', '\n', 'a\nb', '\u0000', '🙂', '🙃', '\uD800', '\uD801',
      'x'.repeat(10_000), 'x'.repeat(10_001), `${'y'.repeat(9_999)}z`, '#', '#abc', 'tb:{a}', 'a'.repeat(40), 'a'.repeat(41)];
    for (const key of hostile) {
      expect(await store.acquire(bucket, key), JSON.stringify(key.slice(0, 20))).toEqual({ allowed: true, remaining: 0 });
    }
    for (const key of hostile) {
      expect((await store.acquire(bucket, key)).allowed).toBe(false);
    }
    if (store instanceof RedisStore) {
      const keys = (await storedKeys(subject)).filter((k) => k.endsWith('hostile'));
      expect(keys).toHaveLength(hostile.length);
      for (const key of keys) expect(key.length).toBeLessThanOrEqual(store.prefix.length + 42 + bucket.name.length);
    }
  });

  it('acquires several buckets all or nothing', async () => {
    const a = new TokenBucket('all-a', 5, Rate.perHour(1));
    const b = new TokenBucket('all-b', 2, Rate.perHour(1));
    await store.acquire(b, 'k', 1);
    const denied = await store.acquireAll([{ bucket: a, key: 'k', cost: 3 }, { bucket: b, key: 'k', cost: 2 }]);
    expect(denied).toEqual({
      allowed: false,
      retryAfterMs: expect.any(Number) as number,
      denied: [{ index: 1, retryAfterMs: expect.any(Number) as number }],
      remaining: [5, 1], // what each bucket holds now: nothing was taken
    });
    if (denied.allowed) return;
    // an hour per token: the one missing token is about an hour away
    expect(denied.retryAfterMs).toBeGreaterThan(3_590_000);
    expect(denied.retryAfterMs).toBeLessThanOrEqual(3_600_000);
    // a kept every token
    expect(await store.acquireAll([{ bucket: a, key: 'k', cost: 3 }, { bucket: b, key: 'k', cost: 1 }])).toEqual({
      allowed: true,
      remaining: [2, 0],
    });
    // the same bucket twice in one call counts both
    expect(await store.acquireAll([{ bucket: a, key: 'k', cost: 2 }, { bucket: a, key: 'k', cost: 1 }])).toMatchObject({
      allowed: false,
    });
    expect(await store.acquire(a, 'k', 2)).toEqual({ allowed: true, remaining: 0 });
    // one impossible request makes the whole call impossible
    expect(await store.acquireAll([{ bucket: a, key: 'n', cost: 1 }, { bucket: b, key: 'n', cost: 3 }])).toEqual({
      allowed: false,
      retryAfterMs: null,
      denied: [{ index: 1, retryAfterMs: null }],
      remaining: [5, 2],
    });
  });

  it('acquires buckets of different identities all or nothing', async () => {
    const a = new TokenBucket('ids-a', 5, Rate.perHour(1));
    const b = new TokenBucket('ids-b', 1, Rate.perHour(1));
    await store.acquire(b, 'bob');
    const denied = await store.acquireAll([{ bucket: a, key: 'alice', cost: 5 }, { bucket: b, key: 'bob', cost: 1 }]);
    expect(denied.allowed).toBe(false);
    expect(await store.acquire(a, 'alice', 5)).toEqual({ allowed: true, remaining: 0 });
  });

  it('answers an empty acquireAll without touching anything', async () => {
    expect(await store.acquireAll([])).toEqual({ allowed: true, remaining: [] });
  });
});

describe.each(subjects.slice(1))('%s in Redis', (_name, makeSubject) => {
  const subject = makeSubject();
  const store = subject.store as RedisStore;
  const redis = subject.redis!;

  it('expires a key when its bucket would be full again (SPEC example: about 60 s)', async () => {
    const bucket = new TokenBucket('search', 20, new Rate(1, 3000));
    for (let i = 0; i < 20; i++) await store.acquire(bucket, 'ttl');
    const ttl = await redis.pttl(store.keyFor(bucket, 'ttl'));
    expect(ttl).toBeGreaterThan(59_000);
    expect(ttl).toBeLessThanOrEqual(60_000);
  });

  it('leaves no key once an idle bucket is full again', async () => {
    const bucket = new TokenBucket('idle', 2, new Rate(1, 50));
    await store.acquire(bucket, 'idle', 2);
    const key = store.keyFor(bucket, 'idle');
    const ttl = await redis.pttl(key);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(101); // expiry is rounded up to the millisecond
    await sleep(ttl + 20);
    expect(await redis.exists(key)).toBe(0);
  });

  it('writes no key for a cost-0 request or a denial', async () => {
    const bucket = new TokenBucket('nowrite', 1, Rate.perHour(1));
    await store.acquire(bucket, 'zero', 0);
    await store.acquire(bucket, 'over', 2);
    expect(await redis.exists(store.keyFor(bucket, 'zero'))).toBe(0);
    expect(await redis.exists(store.keyFor(bucket, 'over'))).toBe(0);
  });

  it('reloads its script after SCRIPT FLUSH', async () => {
    const bucket = new TokenBucket('flush', 3, Rate.perHour(1));
    expect(await store.acquire(bucket, 'k')).toEqual({ allowed: true, remaining: 2 });
    const nodes = redis.isCluster ? (redis as Cluster).nodes('master') : [redis as Redis];
    await Promise.all(nodes.map((node) => node.script('FLUSH')));
    expect(await store.acquire(bucket, 'k')).toEqual({ allowed: true, remaining: 1 });
    expect(await store.acquire(bucket, 'k')).toEqual({ allowed: true, remaining: 0 });
  });

  it('keeps every bucket of one identity in one hash slot', async () => {
    const names = ['a', 'search', 'login', 'x'.repeat(64)];
    for (const id of ['user-1', '{weird}', 'z'.repeat(5000)]) {
      const slots = new Set(
        await Promise.all(names.map((n) => redis.call('CLUSTER', 'KEYSLOT', store.keyFor(new TokenBucket(n, 1, Rate.perSecond(1)), id)).catch(() => null))),
      );
      if (redis.isCluster) expect(slots.size).toBe(1);
    }
    const keys = names.map((n) => store.keyFor(new TokenBucket(n, 1, Rate.perSecond(1)), '{weird}'));
    expect(new Set(keys.map((k) => k.slice(0, k.indexOf('}') + 1))).size).toBe(1);
  });

  it('validates its inputs inside the script too: nothing a caller sends mints a token', async () => {
    const key = `${store.prefix}{lua}check`;
    const source = store['acquireLua'].source;
    const refund = store['refundLua'].source;
    await expect(redis.eval(source, 1, key, '1', 10, 1, 1000, -5)).rejects.toThrow(/must be whole numbers .* got 10, 1, 1000, -5/);
    await expect(redis.eval(source, 1, key, '1', 10, 1, 1000, 1.5)).rejects.toThrow(/must be whole numbers/);
    await expect(redis.eval(source, 1, key, '1', 10, 0, 1000, 1)).rejects.toThrow(/must be whole numbers/);
    await expect(redis.eval(source, 1, key, '1', 10, 1, -1000, 1)).rejects.toThrow(/must be whole numbers/);
    await expect(redis.eval(source, 1, key, '1', 10, 1, 1000, 'nan')).rejects.toThrow(/must be whole numbers/);
    await expect(redis.eval(source, 1, key, '2', 10, 1, 1000, 1)).rejects.toThrow(/expected a mode and 4 arguments per key/);
    await expect(redis.eval(source, 1, key, '1', 10)).rejects.toThrow(/expected a mode and 4 arguments per key/);
    await expect(redis.eval(source, 1, key, 10, 1, 1000, -5)).rejects.toThrow(/must be whole numbers .* got 10, 1, 1000, -5/);
    await expect(redis.eval(source, 1, key, 10, 1000, -5)).rejects.toThrow(/must be whole numbers .* got 10, 1, 1000, -5/);
    await expect(redis.eval(refund, 2, key, `${key}!reset`, 10, 1, 1000, -5, '0')).rejects.toThrow(/must be whole numbers/);
    await expect(redis.eval(refund, 2, key, `${key}!reset`, 10, 1, 1000, 5, 'soon')).rejects.toThrow(/each take must be E;S;t/);
    expect(await redis.exists(key)).toBe(0);
    // A bucket of 10 spent down to 2, then a negative cost: still 2.
    const bucket = new TokenBucket('lua', 10, Rate.perHour(1));
    await store.acquire(bucket, 'mint', 8);
    const mint = store.keyFor(bucket, 'mint');
    const before = await redis.get(mint);
    for (const cost of [-1, -8, -1e15]) {
      await expect(redis.eval(source, 1, mint, '1', 10, 1, 360_000_000, cost)).rejects.toThrow(/whole numbers/);
      await expect(redis.eval(source, 1, mint, 'check', 10, 1, 360_000_000, cost)).rejects.toThrow(/whole numbers/);
      await expect(redis.eval(source, 1, mint, 10, 360_000_000, cost)).rejects.toThrow(/whole numbers/);
      await expect(redis.eval(source, 2, mint, `${mint}2`, 10, 1, 360_000_000, cost, 10, 1, 360_000_000, 1)).rejects.toThrow(/whole numbers/);
    }
    expect(await redis.get(mint)).toBe(before);
    expect(await store.acquire(bucket, 'mint', 0)).toEqual({ allowed: true, remaining: 2 });
  });

  it('rejects a prefix with braces', () => {
    expect(() => new RedisStore(store.client, { prefix: 'a{b}' })).toThrow(RangeError);
  });
});

/** A stored bucket state: the µs at which it is full again, `at` + `num`/`den`. */
function fullAt(value: string | null): { at: number; num: number; den: number } {
  const match = /^(\d+)(?:\+(\d+)\/(\d+))?$/.exec(value ?? '');
  if (!match) throw new Error(`not a bucket state: ${String(value)}`);
  return { at: Number(match[1]), num: Number(match[2] ?? 0), den: Number(match[3] ?? 1) };
}

describe.each(subjects.filter(([name]) => name.startsWith('RedisStore')))('%s: what it stores', (_name, makeSubject) => {
  const subject = makeSubject();
  const store = subject.store as RedisStore;
  const redis = subject.redis!;

  it('writes the exact time the bucket is full again, to the third of a µs, whether its key was there or not', async () => {
    // 3 tokens a second: each token is 333,333 1/3 µs of refill
    const bucket = new TokenBucket('thirds', 10, Rate.perSecond(3));
    const key = store.keyFor(bucket, 'k');
    const before = (await redisNow(redis)) * 1000;
    // no key: a full bucket
    expect(await store.acquire(bucket, 'k')).toEqual({ allowed: true, remaining: 9 });
    const after = (await redisNow(redis)) * 1000;
    const first = fullAt(await redis.get(key));
    expect([first.num, first.den]).toEqual([1, 3]);
    expect(first.at).toBeGreaterThanOrEqual(Math.floor(before) + 333_333);
    expect(first.at).toBeLessThanOrEqual(Math.ceil(after) + 333_333);
    // the key is there: each take pushes the full-at time back by exactly its refill
    expect(await store.acquire(bucket, 'k')).toEqual({ allowed: true, remaining: 8 });
    expect(fullAt(await redis.get(key))).toEqual({ at: first.at + 333_333, num: 2, den: 3 });
    expect(await store.acquire(bucket, 'k')).toEqual({ allowed: true, remaining: 7 });
    expect(fullAt(await redis.get(key))).toEqual({ at: first.at + 666_667, num: 0, den: 1 });
    // and the key expires in the millisecond the bucket is full again
    expect(Number(await redis.call('PEXPIRETIME', key))).toBe(Math.floor((first.at + 666_667) / 1000));
  });
});

describe('MemoryStore with an injected clock', () => {
  it('forgets buckets that are full again, so idle keys cost nothing', async () => {
    let now = 1_000;
    const store = new MemoryStore({ now: () => now });
    const bucket = new TokenBucket('mem', 4, new Rate(1, 100));
    for (let i = 0; i < 100; i++) await store.acquire(bucket, `id-${i}`, 2);
    expect(store.size).toBe(100);
    now += 199;
    expect(store.size).toBe(100);
    now += 1;
    expect(store.size).toBe(0);
    expect(await store.acquire(bucket, 'id-1', 4)).toEqual({ allowed: true, remaining: 0 });
    expect(await store.reset(bucket, 'id-1')).toBe(true);
    expect(store.size).toBe(0);
  });

  it('matches the SPEC to the millisecond', async () => {
    let now = 0;
    const store = new MemoryStore({ now: () => now });
    const bucket = new TokenBucket('spec', 20, new Rate(1, 3000));
    for (let i = 0; i < 20; i++) await store.acquire(bucket, 'k');
    expect(await store.acquire(bucket, 'k')).toEqual({ allowed: false, retryAfterMs: 3000 });
    now = 1;
    expect(await store.acquire(bucket, 'k')).toEqual({ allowed: false, retryAfterMs: 2999 });
    now = 3000;
    expect(await store.acquire(bucket, 'k')).toEqual({ allowed: true, remaining: 0 });
  });
});
