// After SCRIPT FLUSH, a store's call of a script Redis no longer has is
// answered NOSCRIPT and sent again by source, behind whatever the store sent
// after it. When another process has loaded some script again meanwhile (its
// first call after the flush, by source), a later call of that script runs
// before the one sent again. A reset overtaken so took back what calls made
// after it had taken: reset, then acquire 3 of 10, both issued in order, left
// the bucket full (the acquire answered 2 left, from before the reset). A
// reset now always goes by source, so nothing the store makes after it runs
// before it. On a single Redis and on a Cluster, with every client family.
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Rate } from '../src/rate.js';
import { LuaScript } from '../src/stores/lua-script.js';
import { RedisStore } from '../src/stores/redis-store.js';
import { TokenBucket } from '../src/token-bucket.js';
import { CLIENT_FAMILIES, openClient } from './support/client-families.js';
import type { OpenedClient } from './support/client-families.js';
import { redisClient, uniquePrefix } from './support/clients.js';
import { startRedisCluster, startRedisServer } from './support/redis-server.js';
import type { RedisClusterProcess, RedisServerProcess } from './support/redis-server.js';

const bucket = new TokenBucket('flushed', 10, Rate.perHour(1));
// the acquire script as another process sends it on its first call after the flush
const acquireSource = new LuaScript('acquire.lua').source;

let server: RedisServerProcess;
let cluster: RedisClusterProcess;
let admin: Redis;
let masters: Redis[];
beforeAll(async () => {
  // a server and a Cluster of this file's own: SCRIPT FLUSH would make other files' call counts wrong
  [server, cluster] = await Promise.all([startRedisServer(), startRedisCluster({ masters: 3 })]);
  admin = redisClient(server.url);
  masters = cluster.nodes.map(({ host, port }) => redisClient(`redis://${host}:${port}`));
}, 60_000);
afterAll(async () => {
  for (const redis of [admin, ...masters]) redis.disconnect();
  await Promise.all([server.stop(), cluster.stop()]);
});

/** SCRIPT FLUSH on every server of `kind`, and another process's first call after it: acquire.lua loaded. */
async function flushedThenAcquireLoaded(kind: 'redis' | 'cluster'): Promise<void> {
  for (const redis of kind === 'redis' ? [admin] : masters) {
    await redis.script('FLUSH');
    await redis.script('LOAD', acquireSource);
  }
}

describe.each(CLIENT_FAMILIES.flatMap((family) => (['redis', 'cluster'] as const).map((kind) => [family, kind] as const)))('%s, %s', (family, kind) => {
  let opened: OpenedClient;
  beforeAll(async () => {
    opened = openClient(family, kind === 'redis' ? { kind, url: server.url } : { kind, nodes: cluster.nodes });
    await opened.connect();
  });
  afterAll(() => opened.close().catch(() => undefined));

  it('a reset issued before an acquire runs before it after SCRIPT FLUSH, whatever another process loaded', async () => {
    const store = new RedisStore(opened.client, { prefix: uniquePrefix(`flushed-${family}`) });
    // every script of the store has been sent on the connection to k's server before the flush
    expect(await store.acquire(bucket, 'k', 5)).toEqual({ allowed: true, remaining: 5 });
    expect(await store.reset(bucket, 'k')).toBe(true);
    expect(await store.acquire(bucket, 'k', 5)).toEqual({ allowed: true, remaining: 5 });
    await flushedThenAcquireLoaded(kind);

    const [reset, taken] = await Promise.all([store.reset(bucket, 'k'), store.acquire(bucket, 'k', 3)]);
    expect(reset).toBe(true);
    expect(taken).toEqual({ allowed: true, remaining: 7 });
    expect(await store.checkAll([{ bucket, key: 'k', cost: 0 }])).toMatchObject({ allowed: true, remaining: [7] });
    await store.close();
  });
});
