// An ioredis (iovalkey) Cluster with a keyPrefix writes it before every key it
// sends, and the store's own connection has the client's options: a call alone
// used `app:` + the bucket's key. The acquires of one tick bound for one master
// share a call that names its keys in ARGV (lua/acquire-each.lua), where the
// client puts no prefix: they read and wrote the bucket's key without it, a
// second bucket for the same identity (21 of 20 admitted here, one per acquire
// that went alone; up to twice the capacity under load). The keys in ARGV are
// now written as the client writes keys, and the master is found from the key
// the client writes (a prefix with braces moves every key to its slot).
import { Cluster as IoredisCluster } from 'ioredis';
import { Cluster as ValkeyCluster } from 'iovalkey';
import { describe, expect, inject, it } from 'vitest';
import { Rate } from '../src/rate.js';
import { RedisStore } from '../src/stores/redis-store.js';
import { TokenBucket } from '../src/token-bucket.js';
import { uniquePrefix } from './support/clients.js';

const nodes = inject('redisClusterNodes')!.map(({ host, port }) => ({ host, port }));
const bucket = new TokenBucket('prefixed', 10, Rate.perHour(1));

const clusters = {
  ioredis: (options: object) => new IoredisCluster(nodes, options),
  iovalkey: (options: object) => new ValkeyCluster(nodes, options),
} as const;
const placements = [
  ['the Cluster option', 'app:', (keyPrefix: string) => ({ keyPrefix })],
  ['redisOptions', 'app:', (keyPrefix: string) => ({ redisOptions: { keyPrefix } })],
  ['the Cluster option, with braces', '{app}:', (keyPrefix: string) => ({ keyPrefix })],
] as const;

describe.each(Object.keys(clusters) as (keyof typeof clusters)[])('%s Cluster', (family) => {
  it.each(placements)('with a keyPrefix in %s (%s), every acquire of an identity takes from its one bucket', async (_where, keyPrefix, options) => {
    const client = clusters[family](options(keyPrefix));
    const store = new RedisStore(client, { prefix: uniquePrefix(`key-prefix-${family}`) });
    try {
      expect(await store.acquire(bucket, 'warm', 0)).toEqual({ allowed: true, remaining: 10 }); // connected, script loaded
      // the first goes alone; the other 29, issued while it is out, share calls per master
      const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => store.acquire(bucket, i % 2 === 0 ? 'alice' : 'bob', 1)));
      expect(answers.filter((a) => a.allowed)).toHaveLength(20);
      // what a call alone reads, with the prefix: nothing left of either identity's 10
      for (const identity of ['alice', 'bob']) expect(await store.acquire(bucket, identity, 0)).toEqual({ allowed: true, remaining: 0 });
    } finally {
      await store.close();
      client.disconnect();
    }
  });
});
