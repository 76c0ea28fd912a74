// A reset is a boundary: nothing taken before it is given back after it, by
// any process. The boundary (lua/reset.lua's mark) must live as long as the
// state it guards, which is kept in µs while Redis keeps expiry in ms: a
// bucket in its last millisecond has a PTTL of 0 while it is still short.
// And what a store remembers of resets stays bounded, whatever is in flight.
import { Cluster, Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { Rate } from '../src/rate.js';
import { RedisStore } from '../src/stores/redis-store.js';
import { TokenBucket } from '../src/token-bucket.js';
import { uniquePrefix } from './support/clients.js';

const readers: (Redis | Cluster)[] = [];
afterAll(() => {
  for (const r of readers) r.disconnect();
});

describe.each(['redis', 'cluster'] as const)('%s', (kind) => {
  const connect = (): Redis | Cluster => {
    const client = kind === 'redis' ? new Redis(inject('redisUrl')) : new Cluster(inject('redisClusterNodes')!);
    readers.push(client);
    return client;
  };
  const reader = connect();

  // Ten million tokens a second: a token is a tenth of a µs, and a take of up to 9,999 tokens is full
  // again within the millisecond. 0.3 wrote the reset's mark only while the key's PTTL was above 0:
  // a reset in the key's last millisecond left none, and a take made before it was given back after it
  // (2,360, 740 and 130 tokens in one run).
  it('a reset in the bucket\'s last millisecond: another process\'s refund of a take made before it gives nothing back (400 tries)', async () => {
    const prefix = uniquePrefix(`last-ms-${kind}`);
    const taker = new RedisStore(connect(), { prefix }); // the process whose take comes back as a refund
    const resetter = new RedisStore(connect(), { prefix }); // the process that resets, then takes again
    const bucket = new TokenBucket('fast', 10_000_000, Rate.perSecond(10_000_000));
    await Promise.all([taker.acquire(bucket, 'warm', 0), resetter.reset(bucket, 'warm'), resetter.acquire(bucket, 'warm', 0)]);
    const given: { cost: number; before: string | null; after: string | null }[] = [];
    for (let i = 0; i < 400; i++) {
      const key = `k${i}`;
      // full again 0.8–1 ms after the take: the reset right after it often lands in the same millisecond,
      // and the refund, three round trips later, before the take has refilled
      const cost = 8_000 + ((i * 37) % 2_000);
      expect(await taker.acquire(bucket, key, cost)).toEqual({ allowed: true, remaining: 10_000_000 - cost });
      // (the bucket may be full again by the time the reset runs: then there is nothing to guard)
      const [, retaken] = await Promise.all([resetter.reset(bucket, key), resetter.acquire(bucket, key, 5_000_000)]);
      expect(retaken).toMatchObject({ allowed: true });
      const id = taker.keyFor(bucket, key);
      const before = await reader.get(id);
      await taker.refund(bucket, key, cost);
      const after = await reader.get(id);
      if (after !== before) given.push({ cost, before, after });
    }
    expect(given).toEqual([]);
    await Promise.all([taker.close(), resetter.close()]);
  });
});
