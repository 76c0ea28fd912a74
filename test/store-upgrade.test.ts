// A rolling deploy runs 0.3.3 and this version on one Redis: each must read
// what the other writes. The bucket's state (`A` or `A+num/den` µs) and the
// reset's mark (`<key>!reset`, its Redis TIME) keep 0.3.3's format; 0.3.3 is
// run here from its own scripts (test/fixtures/lua-0.3.3), with the
// arguments its store sent.
import { readFileSync } from 'node:fs';
import { Cluster, Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { Rate } from '../src/rate.js';
import { termsOf } from '../src/stores/bucket-terms.js';
import { RedisStore } from '../src/stores/redis-store.js';
import { TokenBucket } from '../src/token-bucket.js';
import { uniquePrefix } from './support/clients.js';

const fixture = (name: string): string => readFileSync(new URL(`./fixtures/lua-0.3.3/${name}`, import.meta.url), 'utf8');
/** A 0.3.3 script with its include expanded, as its LuaScript did. */
const script = (name: string): string => fixture(name).replace(/^([ \t]*)--#include floordiv\.lua[ \t]*$/m, () => fixture('floordiv.lua'));

/** What a 0.3.3 RedisStore sent, for one bucket of one key. */
class Store033 {
  constructor(readonly redis: Redis | Cluster) {}

  /** acquire.lua's common case: {flag, whole tokens, Redis TIME µs or wait}. */
  async acquire(key: string, bucket: TokenBucket, cost: number): Promise<[number, number, number]> {
    const t = termsOf(bucket);
    const args = t.tokens === 1 ? [t.capacity, t.period, cost] : [t.capacity, t.tokens, t.period, cost];
    return (await this.redis.eval(script('acquire.lua'), 1, key, ...args)) as [number, number, number];
  }

  /** reset.lua: 1 when the key existed. */
  async reset(key: string): Promise<number> {
    return (await this.redis.eval(script('reset.lua'), 2, key, `${key}!reset`)) as number;
  }

  /** refund.lua for one take of `tokens` at `takenAt` (its own refill bounds it): the whole tokens left. */
  async refund(key: string, bucket: TokenBucket, tokens: number, takenAt: number): Promise<number> {
    const t = termsOf(bucket);
    const q = Math.floor((tokens * t.period) / t.tokens);
    const bound = `${takenAt + q};${q};${takenAt}`;
    const reply = (await this.redis.eval(script('refund.lua'), 2, key, `${key}!reset`, t.capacity, t.tokens, t.period, tokens, bound)) as number[];
    return reply[0]!;
  }
}

const clients: (Redis | Cluster)[] = [];
afterAll(() => {
  for (const c of clients) c.disconnect();
});

describe.each(['redis', 'cluster'] as const)('%s: 0.3.3 and this version on one Redis', (kind) => {
  const connect = (): Redis | Cluster => {
    const c = kind === 'redis' ? new Redis(inject('redisUrl')) : new Cluster(inject('redisClusterNodes')!);
    clients.push(c);
    return c;
  };
  const old = new Store033(connect());
  const store = new RedisStore(connect(), { prefix: uniquePrefix(`upgrade-${kind}`) });
  afterAll(() => store.close());

  // a whole number of µs per token (3 arguments), and a fraction of one (the `A+num/den` form)
  const whole = new TokenBucket('whole', 10, Rate.perHour(10));
  const fraction = new TokenBucket('fraction', 10, new Rate(3, 3_600_000));

  it.each([whole, fraction])('reads the states 0.3.3 wrote, and 0.3.3 reads the states it writes (%s)', async (bucket) => {
    const key = store.keyFor(bucket, 'k');
    expect((await old.acquire(key, bucket, 3))[0]).toBe(1);
    expect(await store.acquire(bucket, 'k', 2)).toEqual({ allowed: true, remaining: 5 });
    expect(await old.acquire(key, bucket, 4)).toEqual([1, 1, expect.any(Number)]);
    expect(await store.acquire(bucket, 'k', 2)).toEqual({ allowed: false, retryAfterMs: expect.any(Number) as unknown });
    expect(await store.acquire(bucket, 'k', 1)).toEqual({ allowed: true, remaining: 0 });
  });

  it('honours the mark of a reset 0.3.3 made: a take made before it is not given back', async () => {
    const key = store.keyFor(whole, 'marked');
    expect(await store.acquire(whole, 'marked', 4)).toEqual({ allowed: true, remaining: 6 });
    expect(await old.reset(key)).toBe(1);
    expect(await old.acquire(key, whole, 10)).toEqual([1, 0, expect.any(Number)]);
    // this store's receipt of its 4 tokens predates the reset
    await store.refund(whole, 'marked', 4);
    expect(await store.acquire(whole, 'marked', 0)).toEqual({ allowed: true, remaining: 0 });
  });

  it('0.3.3 honours the mark of a reset this version made: its take made before it is not given back', async () => {
    const key = store.keyFor(whole, 'marked-new');
    const [, , takenAt] = await old.acquire(key, whole, 4);
    expect(await store.reset(whole, 'marked-new')).toBe(true);
    expect(await store.acquire(whole, 'marked-new', 10)).toEqual({ allowed: true, remaining: 0 });
    expect(await old.refund(key, whole, 4, takenAt)).toBe(0);
  });
});
