// Buckets whose rate reaches 2^52 tokens per period, or whose period reaches
// 2^50 µs: the whole tokens they report are exact (they were rounded down by
// up to nine tokens, so a take of one showed two gone).
import type { Cluster, Redis } from 'ioredis';
import fc from 'fast-check';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { Rate } from '../src/rate.js';
import { MemoryStore } from '../src/stores/memory-store.js';
import { RedisStore } from '../src/stores/redis-store.js';
import { TokenBucket } from '../src/token-bucket.js';
import { clusterClient, redisClient, uniquePrefix } from './support/clients.js';
import { ReferenceBucket } from './support/reference-bucket.js';

const MAX = Number.MAX_SAFE_INTEGER; // 2^53 - 1

const rates: [string, Rate][] = [
  ['2^53 - 1 a second', new Rate(MAX, 1000)],
  ['2^52 + 3 every 7 ms', new Rate(2 ** 52 + 3, 7)],
  ['2^53 - 3 a millisecond', new Rate(MAX - 2, 1)],
  ['2^53 - 1 every 2^50 + 1 µs', new Rate(MAX, (2 ** 50 + 1) / 1000)],
];

const clients: (Redis | Cluster)[] = [];
afterAll(async () => {
  await Promise.all(clients.map((c) => c.quit().catch(() => undefined)));
});

describe.each(rates)('a full bucket of 2^53 - 1 tokens at %s', (_, rate) => {
  const bucket = new TokenBucket('huge', MAX, rate);

  it('MemoryStore: each take and refund moves remaining by exactly its tokens, as the exact model', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(fc.boolean(), fc.integer({ min: 0, max: 2 ** 40 })), { minLength: 1, maxLength: 12 }), async (steps) => {
        const now = 1.7e12;
        const store = new MemoryStore({ now: () => now });
        const model = new ReferenceBucket();
        let taken = 0;
        for (const [take, tokens] of steps) {
          if (take) {
            const got = await store.acquire(bucket, 'k', tokens);
            expect(got).toEqual(model.acquire(bucket, 'k', tokens, now));
            if (got.allowed) taken += tokens;
          } else {
            const back = Math.min(tokens, taken);
            const [left] = await store.refundAll([{ bucket, key: 'k', cost: back }]);
            taken -= back;
            model.setLevel(bucket, 'k', now, model.level(bucket, 'k', now) + BigInt(back) * BigInt(rate.periodUs));
            expect(left).toBe(MAX - taken);
            expect(left).toBe(Number(model.level(bucket, 'k', now) / BigInt(rate.periodUs)));
          }
        }
        await store.close();
      }),
      { numRuns: 200 },
    );
  });

  it.each(['Redis', 'Redis Cluster'] as const)('RedisStore on %s: a take of 1, 3 or 1000 leaves exactly that many fewer', async (kind) => {
    const client = kind === 'Redis' ? redisClient(inject('redisUrl')) : clusterClient(inject('redisClusterNodes'));
    clients.push(client);
    const store = new RedisStore(client, { prefix: uniquePrefix('huge rates') });
    for (const cost of [1, 3, 1000]) {
      expect(await store.acquire(bucket, `k${cost}`, cost)).toEqual({ allowed: true, remaining: MAX - cost });
      const [one, two] = (await store.acquireAll([
        { bucket, key: `a${cost}`, cost },
        { bucket, key: `a${cost}`, cost: 0, measure: true },
      ])).remaining;
      expect([one, two]).toEqual([MAX - cost, MAX - cost]);
      // given back at once: full, as had it never been taken
      await store.acquire(bucket, `r${cost}`, cost);
      expect(await store.refundAll([{ bucket, key: `r${cost}`, cost }])).toEqual([MAX]);
    }
    await store.close();
  });
});
