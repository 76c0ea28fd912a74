// What a bucket's key may hold, read the one way on every path (lua/state.lua):
// the two forms the store writes, `A` and `A+num/den` in plain digits, are
// states; anything else is not, however Lua's `tonumber` would read it. On
// every path — an acquire alone, several requests, a check, a shared call, a
// refund — a string that is not a state is an error naming the key and
// nothing is written; `reset` deletes it (the documented recovery), and
// leaves a mark so that no take made before is given back.
import { Cluster, Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { Rate } from '../src/rate.js';
import { RedisStore } from '../src/stores/redis-store.js';
import { TokenBucket } from '../src/token-bucket.js';
import { CLIENT_FAMILIES, familyClient, sharedTarget } from './support/client-families.js';
import { uniquePrefix } from './support/clients.js';

/**
 * Strings Lua's `tonumber` reads as numbers (or the fraction pattern of 0.3
 * read), which the store never writes. `T` stands for a time a second ahead
 * in plain digits, so that a lenient reading would see a state.
 */
const LENIENT = [
  '-5',
  '0x10',
  ' 7',
  '7 ',
  '\t7',
  '7\n',
  '1e3',
  '+7',
  '007',
  '0',
  '12.5',
  'nan',
  'inf',
  '-inf',
  '1e30',
  '0x1p4',
  ' T',
  'T ',
  '+T',
  'T.0',
  'T.5',
  '0T',
  'T+1/0',
  'T+3/2',
  'T+2/2',
  'T+0/3',
  'T+01/3',
  'T+1/03',
  'T+1/3 ',
  ' T+1/3',
  '-T+1/3',
  'T+-1/3',
  'T + 1/3',
  'T+1/3/3',
  'not a bucket',
  '',
];

const bucket = new TokenBucket('s', 10, Rate.perHour(10));
const other = new TokenBucket('o', 10, Rate.perHour(10));
const holder = new TokenBucket('holder', 10, Rate.perHour(1));

const readers: (Redis | Cluster)[] = [];
afterAll(() => {
  for (const r of readers) r.disconnect();
});

type Outcome = { ok: true; value: unknown } | { ok: false; message: string };
const settle = (p: Promise<unknown>): Promise<Outcome> =>
  p.then(
    (value) => ({ ok: true, value }),
    (error: unknown) => ({ ok: false, message: error instanceof Error ? error.message : String(error) }),
  );

describe.each(CLIENT_FAMILIES)('%s', (family) => {
  describe.each(['redis', 'cluster'] as const)('%s', (kind) => {
    const client = familyClient(family, sharedTarget(kind));
    const reader = kind === 'redis' ? new Redis(inject('redisUrl')) : new Cluster(inject('redisClusterNodes')!);
    readers.push(reader);

    /** The lenient string with `T` replaced by a time a second ahead of Redis's clock. */
    async function valueOf(lenient: string): Promise<string> {
      const [seconds, micros] = await reader.time();
      return lenient.replace('T', String(Number(seconds) * 1_000_000 + Number(micros) + 1_000_000));
    }

    /** Every path but the refund and the reset, on one key holding `value`: each must fail naming the key. */
    async function everyAcquirePath(store: RedisStore, id: string, value: string): Promise<Record<string, Outcome>> {
      const key = store.keyFor(bucket, id);
      const outcomes: Record<string, Outcome> = {};
      const put = () => reader.set(key, value);
      await put();
      outcomes['acquire alone'] = await settle(store.acquire(bucket, id, 10));
      await put();
      outcomes['several requests'] = await settle(store.acquireAll([{ bucket: other, key: id, cost: 1 }, { bucket, key: id, cost: 10 }]));
      await put();
      outcomes['a request twice'] = await settle(store.acquireAll([{ bucket, key: id, cost: 5 }, { bucket, key: id, cost: 5 }]));
      await put();
      outcomes['a measured request'] = await settle(store.acquireAll([{ bucket: other, key: id, cost: 1 }, { bucket, key: id, cost: 10, measure: true }]));
      await put();
      outcomes['a check'] = await settle(store.checkAll([{ bucket, key: id, cost: 10 }]));
      await put();
      // in flight with another acquire: shared with a second operation of the identity (one node, one slot)
      const held = store.acquire(holder, 'holder', 0);
      const [shared] = await Promise.all([settle(store.acquire(bucket, id, 10)), settle(store.acquire(other, id, 1))]);
      await held;
      outcomes['a shared call'] = shared;
      return outcomes;
    }

    it.each(LENIENT)('%j is not a state: every path fails naming the key, and writes nothing', async (lenient) => {
      const store = new RedisStore(client, { prefix: uniquePrefix(`states-${family}-${kind}`) });
      const value = await valueOf(lenient);
      const key = store.keyFor(bucket, 'k');
      const outcomes = await everyAcquirePath(store, 'k', value);
      for (const [path, outcome] of Object.entries(outcomes)) {
        expect({ path, outcome }).toEqual({ path, outcome: { ok: false, message: expect.stringContaining(`key ${key} does not hold a token bucket state`) as unknown } });
      }
      expect(await reader.get(key)).toBe(value);
      // the other bucket of the failed operations took nothing (two shared-call operations took 1 between them)
      expect(await store.acquire(other, 'k', 0)).toEqual({ allowed: true, remaining: 9 });
      await store.close();
    });

    it.each(LENIENT)('%j is not a state: a refund fails naming the key, and writes nothing', async (lenient) => {
      const store = new RedisStore(client, { prefix: uniquePrefix(`states-refund-${family}-${kind}`) });
      const key = store.keyFor(bucket, 'k');
      expect(await store.acquire(bucket, 'k', 10)).toEqual({ allowed: true, remaining: 0 });
      const value = await valueOf(lenient);
      await reader.set(key, value);
      const refund = await settle(store.refund(bucket, 'k', 10));
      expect(refund).toEqual({ ok: false, message: expect.stringContaining(`key ${key} does not hold a token bucket state`) as unknown });
      expect(await reader.get(key)).toBe(value);
    });

    it.each(LENIENT)('%j is not a state: reset deletes it, and what was taken before is never given back', async (lenient) => {
      const store = new RedisStore(client, { prefix: uniquePrefix(`states-reset-${family}-${kind}`) });
      const another = new RedisStore(client, { prefix: store.prefix });
      const key = store.keyFor(bucket, 'k');
      expect(await another.acquire(bucket, 'k', 4)).toEqual({ allowed: true, remaining: 6 });
      await reader.set(key, await valueOf(lenient));
      expect(await store.reset(bucket, 'k')).toBe(true);
      expect(await reader.exists(key)).toBe(0);
      expect(await store.acquire(bucket, 'k', 10)).toEqual({ allowed: true, remaining: 0 });
      // the take made before the reset came back with it: a refund of it gives nothing
      await another.refund(bucket, 'k', 4);
      expect(await store.acquire(bucket, 'k', 0)).toEqual({ allowed: true, remaining: 0 });
      await Promise.all([store.close(), another.close()]);
    });

    it('a key of another type is an error naming the key on reset too, and is kept', async () => {
      const store = new RedisStore(client, { prefix: uniquePrefix(`states-type-${family}-${kind}`) });
      const key = store.keyFor(bucket, 'k');
      await reader.hset(key, 'f', 'v');
      await expect(store.reset(bucket, 'k')).rejects.toThrow(`key ${key} does not hold a token bucket state`);
      expect(await reader.hgetall(key)).toEqual({ f: 'v' });
      await store.close();
    });

    it('the two forms the store writes are states: a time ahead, with and without a fraction of a µs', async () => {
      const store = new RedisStore(client, { prefix: uniquePrefix(`states-forms-${family}-${kind}`) });
      const [seconds, micros] = await reader.time();
      // a token every 360 s: 5 tokens short for 1,800 s (and a third of a µs more)
      const at = Number(seconds) * 1_000_000 + Number(micros) + 1_800_000_000;
      for (const value of [String(at), `${at}+1/3`]) {
        await reader.set(store.keyFor(bucket, 'k'), value);
        expect(await store.acquire(bucket, 'k', 0), value).toEqual({ allowed: true, remaining: 5 });
      }
      await store.close();
    });
  });
});
