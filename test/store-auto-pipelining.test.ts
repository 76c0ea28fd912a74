// A Cluster client with enableAutoPipelining holds each command for a later
// turn (setImmediate), and the store's own connection had the client's
// options. Calls shared per master go on the master's own connection, which
// holds nothing: a reset issued before two acquires was held and ran after
// them, and took back the 4 tokens they had taken (the bucket full again after
// reset, acquire 3, acquire 1). The store's connection never auto-pipelines:
// Redis runs its calls in the order it makes them.
import { Cluster as IoredisCluster } from 'ioredis';
import { Cluster as ValkeyCluster } from 'iovalkey';
import { describe, expect, inject, it } from 'vitest';
import { Rate } from '../src/rate.js';
import { RedisStore } from '../src/stores/redis-store.js';
import { TokenBucket } from '../src/token-bucket.js';
import { uniquePrefix } from './support/clients.js';

const nodes = inject('redisClusterNodes')!.map(({ host, port }) => ({ host, port }));
const bucket = new TokenBucket('pipelined', 10, Rate.perHour(1));

const clusters = {
  ioredis: () => new IoredisCluster(nodes, { enableAutoPipelining: true }),
  iovalkey: () => new ValkeyCluster(nodes, { enableAutoPipelining: true }),
} as const;

describe.each(Object.keys(clusters) as (keyof typeof clusters)[])('%s Cluster with enableAutoPipelining', (family) => {
  it('a reset issued before acquires that share a call runs before them', async () => {
    const client = clusters[family]();
    const store = new RedisStore(client, { prefix: uniquePrefix(`auto-pipelining-${family}`) });
    try {
      // connected, and every script loaded on k's master
      expect(await store.acquire(bucket, 'k', 1)).toEqual({ allowed: true, remaining: 9 });
      expect(await store.reset(bucket, 'k')).toBe(true);
      // one call out, so that the two acquires after the reset share a call on k's master
      const out = store.acquire(bucket, 'other', 0);
      const reset = store.reset(bucket, 'k');
      const takes = Promise.all([store.acquire(bucket, 'k', 3), store.acquire(bucket, 'k', 1)]);
      expect(await out).toEqual({ allowed: true, remaining: 10 });
      expect(await reset).toBe(false);
      expect(await takes).toEqual([
        { allowed: true, remaining: 7 },
        { allowed: true, remaining: 6 },
      ]);
      expect(await store.acquire(bucket, 'k', 0)).toEqual({ allowed: true, remaining: 6 });
    } finally {
      await store.close();
      client.disconnect();
    }
  });
});
