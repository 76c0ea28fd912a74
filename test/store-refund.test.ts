// store.refund / store.refundAll: a bucket given tokens back is never fuller
// than had they not been taken, never above capacity, and one take is never
// given back twice.
import type { Cluster, Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it, vi } from 'vitest';
import { Rate } from '../src/rate.js';
import type { BucketKey } from '../src/stores/bucket-store.js';
import { MemoryStore } from '../src/stores/memory-store.js';
import { LuaScript } from '../src/stores/lua-script.js';
import { RedisStore } from '../src/stores/redis-store.js';
import { TokenBucket } from '../src/token-bucket.js';
import { CLIENT_FAMILIES, familyClient, sharedTarget } from './support/client-families.js';
import type { ClientFamily } from './support/client-families.js';
import { clusterClient, redisClient, uniquePrefix } from './support/clients.js';
import { redisNow, waitOnRedis } from './support/redis-clock.js';

const clients: (Redis | Cluster)[] = [];
afterAll(async () => {
  await Promise.all(clients.map((c) => c.quit().catch(() => undefined)));
});

interface Subject {
  store: MemoryStore | RedisStore;
  /** Another store on the same buckets, as another process would have (MemoryStore has none). */
  other?: RedisStore;
  wait(ms: number): Promise<void>;
  /** The store's clock, ms. */
  clock(): Promise<number>;
}

function memorySubject(): Subject {
  let now = Date.now();
  return { store: new MemoryStore({ now: () => now }), wait: async (ms) => void (now += ms), clock: async () => now };
}

/** The store on a client of `family`; the other store, and the clock, on ioredis. */
function redisSubject(kind: 'Redis' | 'Redis Cluster', family: ClientFamily): Subject {
  const client = kind === 'Redis' ? redisClient(inject('redisUrl')) : clusterClient(inject('redisClusterNodes'));
  clients.push(client);
  const prefix = uniquePrefix(`refund ${kind} ${family}`);
  const own = family === 'ioredis' ? client : familyClient(family, sharedTarget(kind === 'Redis' ? 'redis' : 'cluster'));
  return { store: new RedisStore(own, { prefix }), other: new RedisStore(client, { prefix }), wait: (ms) => waitOnRedis(client, ms), clock: () => redisNow(client) };
}

const subjects: [string, () => Subject][] = [
  ['MemoryStore', memorySubject],
  ...CLIENT_FAMILIES.flatMap((family): [string, () => Subject][] => [
    [`RedisStore on Redis (${family})`, () => redisSubject('Redis', family)],
    [`RedisStore on Redis Cluster (${family})`, () => redisSubject('Redis Cluster', family)],
  ]),
];

describe.each(subjects)('%s', (_name, makeSubject) => {
  const { store, other, wait, clock } = makeSubject();
  const slow = (name: string, capacity = 10) => new TokenBucket(name, capacity, Rate.perHour(1));

  async function holds(bucket: TokenBucket, key: BucketKey): Promise<number> {
    const answer = await store.acquire(bucket, key, 0);
    return answer.allowed ? answer.remaining : -1;
  }

  it('gives back what it took, so the tokens can be used again', async () => {
    const bucket = slow('again');
    expect(await store.acquire(bucket, 'k', 7)).toEqual({ allowed: true, remaining: 3 });
    await store.refund(bucket, 'k', 7);
    expect(await store.acquire(bucket, 'k', 10)).toEqual({ allowed: true, remaining: 0 });
  });

  it('gives back part of what it took', async () => {
    const bucket = slow('part');
    await store.acquire(bucket, 'k', 7);
    expect(await store.refundAll([{ bucket, key: 'k', cost: 4 }])).toEqual([7]);
    expect(await holds(bucket, 'k')).toBe(7);
  });

  it('never gives back more than it took, nor fills a bucket beyond its capacity', async () => {
    const bucket = slow('capped');
    await store.acquire(bucket, 'k', 3);
    expect(await store.refundAll([{ bucket, key: 'k', cost: 100 }])).toEqual([10]);
    await store.acquire(bucket, 'k', 3);
    await store.refund(bucket, 'k', 2);
    await store.refund(bucket, 'k', 2); // only 1 of the 3 was still owed
    expect(await holds(bucket, 'k')).toBe(10);
  });

  it('gives back nothing it did not take', async () => {
    const bucket = slow('not-taken');
    if (other) {
      await other.acquire(bucket, 'someone', 5);
      await store.refund(bucket, 'someone', 5);
      expect(await holds(bucket, 'someone')).toBe(5);
    }
    await store.refund(bucket, 'nobody', 5);
    expect(await holds(bucket, 'nobody')).toBe(10);
    expect(await store.refundAll([{ bucket, key: 'nobody', cost: 0 }])).toEqual([10]);
  });

  it('gives nothing back once the tokens have refilled (the refill already returned them)', async () => {
    const bucket = new TokenBucket('refilled', 10, Rate.perSecond(100)); // 10 ms a token
    await store.acquire(bucket, 'k', 5);
    await wait(60); // full again
    const before = await clock();
    await (other ?? store).acquire(bucket, 'k', 5);
    await store.refund(bucket, 'k', 5);
    const held = await holds(bucket, 'k');
    const elapsed = (await clock()) - before;
    // another process's take is not given back: the bucket holds what it left and what refilled since
    // (a token each 10 ms); on MemoryStore the second take is the store's own
    expect(held).toBeLessThanOrEqual(other ? Math.min(10, 5 + Math.ceil(elapsed / 10)) : 10);
    if (!other) {
      await store.refund(bucket, 'k', 5);
      expect(await holds(bucket, 'k')).toBe(10);
    }
  });

  it('gives a take back once, however it is split', async () => {
    const bucket = new TokenBucket('split', 10, Rate.perSecond(10)); // 100 ms a token
    await store.acquire(bucket, 'k', 10);
    await wait(500); // 5 refilled, 5 still owed
    if (other) await other.acquire(bucket, 'k', 5); // empty again
    else expect(await holds(bucket, 'k')).toBe(5);
    await store.refund(bucket, 'k', 3);
    await store.refund(bucket, 'k', 3);
    await store.refund(bucket, 'k', 3);
    // had the 10 not been taken the bucket would have been full at 500 ms: 5 after the other take, else 10
    const left = await holds(bucket, 'k');
    if (other) {
      expect(left).toBeGreaterThanOrEqual(4);
      expect(left).toBeLessThanOrEqual(5 + 1); // + what refilled while the test ran
    } else {
      expect(left).toBe(10);
    }
  });

  it('keeps two operations of one identity apart: each is given back at most its own', async () => {
    const bucket = slow('two-ops', 20);
    await store.acquire(bucket, 'k', 6); // operation A
    await store.acquire(bucket, 'k', 4); // operation B
    await store.refund(bucket, 'k', 4); // B's estimate was 4 too many
    await store.refund(bucket, 'k', 6); // A's
    await store.refund(bucket, 'k', 6); // nothing more was taken
    expect(await holds(bucket, 'k')).toBe(20);
  });

  it('gives two operations of one identity back in the order they took, each its own', async () => {
    const bucket = slow('in-order', 20);
    await store.acquire(bucket, 'k', 6); // operation A
    await store.acquire(bucket, 'k', 4); // operation B
    await store.refund(bucket, 'k', 6); // A's
    expect(await holds(bucket, 'k')).toBe(16);
    await store.refund(bucket, 'k', 4); // B's
    expect(await holds(bucket, 'k')).toBe(20);
  });

  it('gives two takes back in one refund', async () => {
    const bucket = slow('both', 20);
    await store.acquire(bucket, 'k', 5);
    await store.acquire(bucket, 'k', 5);
    expect(await store.refundAll([{ bucket, key: 'k', cost: 10 }])).toEqual([20]);
  });

  it('gives back the refunds of many operations in flight at once, beyond the takes it keeps apart', async () => {
    const bucket = slow('many', 1000);
    const ops = Array.from({ length: 60 }, (_, i) => 1 + (i % 7));
    for (const cost of ops) await store.acquire(bucket, 'k', cost);
    const taken = ops.reduce((a, b) => a + b, 0);
    expect(await holds(bucket, 'k')).toBe(1000 - taken);
    // each gives back all but one of its tokens, latest first, all at once
    await Promise.all(ops.reverse().map((cost) => store.refund(bucket, 'k', cost - 1)));
    // had those never been taken: 1000 - 60 (what refilled meanwhile, under a millionth of a token, is not given twice)
    const left = await holds(bucket, 'k');
    expect(left).toBeLessThanOrEqual(940);
    expect(left).toBeGreaterThanOrEqual(939);
  });

  it('never fills a bucket whose capacity was lowered beyond what it would hold had the tokens not been taken', async () => {
    // 36 s a token; the lowered definition holds 10. Drained by 90 before this take, the bucket
    // would be empty under it had the 10 not been taken: giving them back must leave it empty.
    const before = new TokenBucket('lowered', 100, Rate.perHour(100));
    const after = new TokenBucket('lowered', 10, Rate.perHour(100));
    await (other ?? store).acquire(before, 'k', 90);
    await store.acquire(before, 'k', 10);
    expect(await store.refundAll([{ bucket: after, key: 'k', cost: 10 }])).toEqual([0]);
    expect(await holds(after, 'k')).toBe(0);
  });

  it('gives nothing back for a bucket redefined at another rate (a plan changed between take and refund)', async () => {
    // 36 s a token when taken, 6 min a token when given back: 10 tokens of the new rate
    // are the whole bucket's deficit under the old one.
    const pro = new TokenBucket('plan', 100, Rate.perHour(100));
    const free = new TokenBucket('plan', 100, Rate.perHour(10));
    await (other ?? store).acquire(pro, 'k', 90);
    await store.acquire(pro, 'k', 10);
    await store.refund(free, 'k', 10);
    // had the 10 not been taken, the pro bucket would hold 10
    expect(await holds(pro, 'k')).toBeLessThanOrEqual(10);
    // given back at the rate they were taken at, they are
    await store.refund(pro, 'k', 10);
    expect(await holds(pro, 'k')).toBe(10);
  });

  it('gives several buckets back in one refundAll, merging a pair named twice', async () => {
    const a = slow('all-a');
    const b = slow('all-b');
    await store.acquireAll([
      { bucket: a, key: 'k', cost: 6 },
      { bucket: b, key: 'k', cost: 6 },
    ]);
    expect(
      await store.refundAll([
        { bucket: a, key: 'k', cost: 2 },
        { bucket: b, key: 'k', cost: 5 },
        { bucket: a, key: 'k', cost: 2 },
      ]),
    ).toEqual([8, 9, 8]);
    expect(await store.refundAll([])).toEqual([]);
  });

  it('refuses a refund that is not a non-negative safe integer, giving nothing back', async () => {
    const bucket = slow('bad-refund');
    await store.acquire(bucket, 'k', 5);
    for (const tokens of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53]) {
      await expect(store.refund(bucket, 'k', tokens)).rejects.toThrow(RangeError);
      await expect(store.refundAll([{ bucket, key: 'k', cost: tokens }])).rejects.toThrow(RangeError);
    }
    expect(await holds(bucket, 'k')).toBe(5);
  });

  it('gives back huge buckets exactly (capacity × period beyond 2^53)', async () => {
    const huge = new TokenBucket('huge', 2 ** 52, new Rate(7_777_777, 1000));
    await store.acquire(huge, 'k', 2 ** 51);
    await store.refund(huge, 'k', 2 ** 50);
    const left = await holds(huge, 'k');
    // 2^51 + 2^50 held, plus the refill of the few ms the test took (7.8 tokens a µs)
    expect(left).toBeGreaterThanOrEqual(2 ** 51 + 2 ** 50);
    expect(left).toBeLessThanOrEqual(2 ** 51 + 2 ** 50 + 8_000_000_000);
  });
});

// Other processes' refunds move this store's takes forward in the bucket's
// deficit, so refill reaches them sooner than the time right after the take
// tells; and a refund in flight has not yet told the store what it gave.
describe.each(['Redis', 'Redis Cluster'] as const)('RedisStore on %s, refunds among other processes', (kind) => {
  const client = kind === 'Redis' ? redisClient(inject('redisUrl')) : clusterClient(inject('redisClusterNodes'));
  clients.push(client);
  const prefix = uniquePrefix(`refund races ${kind}`);
  const ours = new RedisStore(client, { prefix });
  const theirs = new RedisStore(client, { prefix });
  // 10 tokens, one every 100 ms
  const bucket = (name: string) => new TokenBucket(name, 10, Rate.perSecond(10));

  async function holds(b: TokenBucket, key: string): Promise<number> {
    const answer = await ours.acquire(b, key, 0);
    return answer.allowed ? answer.remaining : -1;
  }

  it('gives back nothing that has refilled since another process gave back a take ahead of it', async () => {
    const b = bucket('ahead');
    await theirs.acquire(b, 'k', 5);
    await ours.acquire(b, 'k', 5); // empty; ours are behind theirs
    await theirs.refund(b, 'k', 5); // ours move forward: refilled in 500 ms from now
    await waitOnRedis(client, 650); // full again
    expect(await theirs.acquire(b, 'k', 10)).toEqual({ allowed: true, remaining: 0 });
    await ours.refund(b, 'k', 5);
    // had ours not been taken, the bucket would hold 0 now (plus what refilled while the test ran)
    expect(await holds(b, 'k')).toBeLessThanOrEqual(1);
  });

  it('gives a take back once when two refunds of it are in flight at once', async () => {
    const b = bucket('concurrent');
    await ours.acquire(b, 'k', 10);
    await waitOnRedis(client, 600); // 6 refilled (or more, on a slow machine), at most 4 still owed
    const left = await theirs.acquire(b, 'k', 6);
    if (!left.allowed) throw new Error('6 tokens refilled in 600 ms: expected them taken');
    const before = await redisNow(client);
    await Promise.all([ours.refund(b, 'k', 5), ours.refund(b, 'k', 5)]);
    const held = await holds(b, 'k');
    const elapsed = (await redisNow(client)) - before;
    // had ours not been taken, the bucket would hold what theirs left and 4 more, and what refilled since (a token
    // each 100 ms); the two refunds together give back at most the 4 still owed, not 8
    expect(held).toBeLessThanOrEqual(Math.min(10, left.remaining + 4 + Math.ceil(elapsed / 100)));
  });

  it('gives back nothing taken before its own reset, whoever takes since', async () => {
    const b = new TokenBucket('reset', 10, Rate.perHour(1));
    await ours.acquire(b, 'k', 10);
    expect(await ours.reset(b, 'k')).toBe(true);
    await theirs.acquire(b, 'k', 10);
    await ours.refund(b, 'k', 10);
    expect(await holds(b, 'k')).toBe(0);
  });
});

describe('RedisStore.refundAll', () => {
  it('makes one script call per hash slot', async () => {
    const client = clusterClient(inject('redisClusterNodes'));
    clients.push(client);
    const store = new RedisStore(client, { prefix: uniquePrefix('refund calls') });
    const a = new TokenBucket('a', 10, Rate.perHour(1));
    const b = new TokenBucket('b', 10, Rate.perHour(1));
    await store.acquireAll([
      { bucket: a, key: 'alice', cost: 5 },
      { bucket: b, key: 'alice', cost: 5 },
      { bucket: a, key: 'bob', cost: 5 },
    ]);
    const calls = vi.spyOn(LuaScript.prototype, 'run');
    expect(
      await store.refundAll([
        { bucket: a, key: 'alice', cost: 5 },
        { bucket: b, key: 'alice', cost: 5 },
        { bucket: a, key: 'bob', cost: 5 },
      ]),
    ).toEqual([10, 10, 10]);
    expect(calls).toHaveBeenCalledTimes(2);
    calls.mockRestore();
  });

  it('remembers at most maxReceipts pairs; 0 turns refunds off', async () => {
    const client = redisClient(inject('redisUrl'));
    clients.push(client);
    const bucket = new TokenBucket('receipts', 10, Rate.perHour(1));
    const off = new RedisStore(client, { prefix: uniquePrefix('receipts off'), maxReceipts: 0 });
    await off.acquire(bucket, 'k', 5);
    expect(await off.refundAll([{ bucket, key: 'k', cost: 5 }])).toEqual([5]);
    const two = new RedisStore(client, { prefix: uniquePrefix('receipts two'), maxReceipts: 2 });
    for (const key of ['a', 'b', 'c']) await two.acquire(bucket, key, 5);
    expect(await two.refundAll(['a', 'b', 'c'].map((key) => ({ bucket, key, cost: 5 })))).toEqual([5, 10, 10]);
    const one = new RedisStore(client, { prefix: uniquePrefix('receipts one'), maxReceipts: 1 });
    for (const key of ['a', 'b']) await one.acquire(bucket, key, 5);
    expect(await one.refundAll(['a', 'b'].map((key) => ({ bucket, key, cost: 5 })))).toEqual([5, 10]);
    expect(() => new RedisStore(client, { maxReceipts: -1 })).toThrow(RangeError);
    expect(() => new MemoryStore({ maxReceipts: 1.5 })).toThrow(RangeError);
  });
});
