// An acquire that finds none of the store's acquires in flight is sent at once, alone; the acquires
// issued after it in its tick wait for the tick's end and may share a call. Calls reach Redis in the
// order the store made them, also on the first call after the store's connection closed (it opens
// again on that call), after NOSCRIPT, and on a node-redis pool. Real Redis and Redis Cluster.
import { Redis } from 'ioredis';
import { createClientPool } from 'redis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { Rate } from '../src/rate.js';
import { LuaScript } from '../src/stores/lua-script.js';
import { RedisStore } from '../src/stores/redis-store.js';
import { TokenBucket } from '../src/token-bucket.js';
import { CLIENT_FAMILIES, familyClient, isNodeRedis, openClient, sharedTarget } from './support/client-families.js';
import type { OpenedClient } from './support/client-families.js';
import { uniquePrefix } from './support/clients.js';
import { requestHoldingProxy } from './support/holding-proxy.js';
import type { RedisServerProcess } from './support/redis-server.js';
import { startRedisServer } from './support/redis-server.js';

const hourly = (name: string, capacity: number) => new TokenBucket(name, capacity, Rate.perHour(1));

/**
 * Every script cached on the node of `key`'s identity (a NOSCRIPT answer would re-send a call by EVAL a
 * round trip later, and the store then counts it where it is written): acquire, shared acquire, reset.
 */
async function warm(store: RedisStore, bucket: TokenBucket, key: string): Promise<void> {
  await store.acquire(bucket, key, 0);
  await Promise.all([store.acquire(bucket, key, 0), store.acquire(bucket, key, 0), store.acquire(bucket, key, 0)]);
  await store.reset(hourly('unused', 1), key);
}

// ioredis and iovalkey: the store's calls go on a connection of its own, which `close()` closes and a
// later call opens again. 0.3.1 wrote the call that opened it a promise job late, so every call issued
// after it in the same tick reached Redis first: a reset overtook the acquire sent at once (whose receipt
// the store then dropped, as if the reset had given it back), or an acquire overtook the reset before it
// (which then gave its take back).
describe.each(CLIENT_FAMILIES.filter((f) => !isNodeRedis(f)))('%s', (family) => {
  describe.each(['redis', 'cluster'] as const)('%s: the first call after the store\'s connection was closed', (kind) => {
    const client = familyClient(family, sharedTarget(kind));

    // `acquire(3)`, `acquire(1)`, `reset` in one tick after `store.close()`, then `refund(4)`: whichever order
    // Redis ran them in, every token taken since the reset is outstanding, and the refund leaves the bucket full.
    it('an acquire sent at once and a reset later in its tick: the refund of what was taken since is exact', async () => {
      const prefix = uniquePrefix(`idle-reopen-${family}-${kind}`);
      const store = new RedisStore(client, { prefix });
      const other = new RedisStore(client, { prefix });
      const x = hourly('a', 5);
      await warm(store, x, 'k');
      await store.close(); // "A later call opens it again"
      const [first] = await Promise.all([store.acquire(x, 'k', 3), store.acquire(x, 'k', 1), store.reset(x, 'k')]);
      expect(first).toEqual({ allowed: true, remaining: 2 });
      await store.refund(x, 'k', 4);
      expect(await other.acquire(x, 'k', 0)).toEqual({ allowed: true, remaining: 5 });
      await Promise.all([store.close(), other.close()]);
    });

    // As on an open connection: the acquire sent at once runs before the reset issued after it.
    it('an acquire sent at once runs before a reset later in its tick, after a close too', async () => {
      const prefix = uniquePrefix(`idle-reopen-order-${family}-${kind}`);
      const store = new RedisStore(client, { prefix });
      const other = new RedisStore(client, { prefix });
      const x = hourly('a', 5);
      await warm(store, x, 'k');
      await store.close();
      const answers = await Promise.all([store.acquire(x, 'k', 3), store.acquire(x, 'k', 1), store.reset(x, 'k')]);
      expect(answers).toEqual([{ allowed: true, remaining: 2 }, { allowed: true, remaining: 4 }, true]);
      await store.refund(x, 'k', 4);
      expect(await other.acquire(x, 'k', 0)).toEqual({ allowed: true, remaining: 5 });
      await Promise.all([store.close(), other.close()]);
    });

    // `reset(k)` then `acquire(k, 3)` in one tick after `store.close()`: the acquire takes from the reset
    // bucket (0.3.1 ran it first: the reset then gave its 3 tokens back, and the bucket ended full).
    it('a reset and then an acquire in one tick: the acquire takes from the reset bucket', async () => {
      const prefix = uniquePrefix(`idle-reopen-reset-first-${family}-${kind}`);
      const store = new RedisStore(client, { prefix });
      const other = new RedisStore(client, { prefix });
      const x = hourly('a', 5);
      await warm(store, x, 'k');
      expect(await store.acquire(x, 'k', 1)).toEqual({ allowed: true, remaining: 4 });
      await store.close();
      const [reset, take] = await Promise.all([store.reset(x, 'k'), store.acquire(x, 'k', 3)]);
      expect(take).toEqual({ allowed: true, remaining: 2 });
      expect(reset).toBe(true);
      expect(await other.acquire(x, 'k', 0)).toEqual({ allowed: true, remaining: 2 });
      await Promise.all([store.close(), other.close()]);
    });

    // The same with the bucket drained (0.3.1 denied the acquire for about 3 hours, though the reset issued
    // before it left the bucket full).
    it('a reset of a drained bucket and then an acquire in one tick: the acquire is admitted', async () => {
      const prefix = uniquePrefix(`idle-reopen-drained-${family}-${kind}`);
      const store = new RedisStore(client, { prefix });
      const other = new RedisStore(client, { prefix });
      const x = hourly('a', 5);
      await warm(store, x, 'k');
      expect(await store.acquire(x, 'k', 5)).toEqual({ allowed: true, remaining: 0 });
      await store.close();
      const [, take] = await Promise.all([store.reset(x, 'k'), store.acquire(x, 'k', 3)]);
      expect(take).toEqual({ allowed: true, remaining: 2 });
      expect(await other.acquire(x, 'k', 0)).toEqual({ allowed: true, remaining: 2 });
      await Promise.all([store.close(), other.close()]);
    });
  });
});

// After SCRIPT FLUSH (a restart, a failover to a replica) Redis learns each script again from the first
// EVAL that names it: other processes' shared calls may bring lua/acquire-each.lua back before
// lua/acquire.lua. A burst from quiet then has its first acquire (lua/acquire.lua, sent at once) answered
// NOSCRIPT and sent again by EVAL a round trip later, after the shared call of the acquires issued after
// it: Redis runs them in another order than issued. Each is decided exactly in the order Redis ran them,
// and nothing taken is lost.
describe.each(CLIENT_FAMILIES)('%s: a burst from quiet when Redis has lua/acquire-each.lua and not lua/acquire.lua', (family) => {
  let server: RedisServerProcess;
  let opened: OpenedClient;
  let admin: Redis;
  beforeAll(async () => {
    server = await startRedisServer();
    opened = openClient(family, { kind: 'redis', url: server.url });
    await opened.connect();
    admin = new Redis(server.url);
  });
  afterAll(async () => {
    await opened.close().catch(() => undefined);
    admin.disconnect();
    await server.stop();
  });

  it('decides each acquire in the order Redis ran them: the first last; what was taken stays taken, and is refunded exactly', async () => {
    const store = new RedisStore(opened.client, { prefix: uniquePrefix(`idle-noscript-${family}`) });
    const x = hourly('n', 5);
    expect(await store.acquire(x, 'warm', 0)).toEqual({ allowed: true, remaining: 5 }); // connected
    await admin.script('FLUSH');
    await admin.script('LOAD', new LuaScript('acquire-each.lua').source); // as another process's shared call would
    const answers = await Promise.all([store.acquire(x, 'k', 5), store.acquire(x, 'k', 1), store.acquire(x, 'k', 1)]);
    // one hour a token: the 5 need the 2 taken first to refill, 2 hours (less the few ms since)
    expect(answers).toEqual([
      { allowed: false, retryAfterMs: expect.any(Number) as number },
      { allowed: true, remaining: 4 },
      { allowed: true, remaining: 3 },
    ]);
    const wait = (answers[0] as { retryAfterMs: number }).retryAfterMs;
    expect(wait).toBeGreaterThan(2 * 3_600_000 - 1000);
    expect(wait).toBeLessThanOrEqual(2 * 3_600_000);
    expect(await store.acquire(x, 'k', 0)).toEqual({ allowed: true, remaining: 3 });
    await store.refund(x, 'k', 5);
    expect(await store.acquire(x, 'k', 0)).toEqual({ allowed: true, remaining: 5 });
    await store.close();
  });
});

// A node-redis pool: the first acquire of a burst (alone, lua/acquire.lua) held back on its connection while
// the shared call of the rest runs on another, and a reset sent while both are out: the reset waits for
// both, the answers are those of the order Redis ran them in, and a refund is exact.
describe('a node-redis pool: the first of a burst alone on one connection, the shared call on another', () => {
  const shared = new URL(inject('redisUrl'));
  const sha = new LuaScript('acquire.lua').sha;
  let proxy: Awaited<ReturnType<typeof requestHoldingProxy>>;
  let pool: ReturnType<typeof createClientPool>;
  beforeAll(async () => {
    proxy = await requestHoldingProxy({ host: shared.hostname, port: Number(shared.port) }, sha);
    pool = createClientPool({ url: proxy.url }, { minimum: 3 });
    pool.on('error', () => {});
    await pool.connect();
  });
  afterAll(async () => {
    await pool.close().catch(() => undefined);
    await proxy.close();
  });

  it('the shared call overtakes the first; a reset sent meanwhile runs after both; a refund is exact', async () => {
    const store = new RedisStore(pool, { prefix: uniquePrefix('idle-pool') });
    const bucket = hourly('r', 10);
    await Promise.all([store.acquire(bucket, 'w', 0), store.acquire(bucket, 'w', 0), store.acquire(bucket, 'w', 0)]); // scripts loaded
    await store.reset(bucket, 'w');
    proxy.hold();
    const first = store.acquire(bucket, 'k', 3);
    const rest = Promise.all([store.acquire(bucket, 'k', 3), store.acquire(bucket, 'k', 3)]);
    await proxy.held();
    expect(await rest).toEqual([{ allowed: true, remaining: 7 }, { allowed: true, remaining: 4 }]);
    const reset = store.reset(bucket, 'j');
    proxy.release();
    expect(await first).toEqual({ allowed: true, remaining: 1 });
    expect(await reset).toBe(false);
    await store.refund(bucket, 'k', 9);
    expect(await store.acquire(bucket, 'k', 0)).toEqual({ allowed: true, remaining: 10 });
    // and a reset of the key itself in the same tick as a burst: it waits for the first, the rest wait for it
    proxy.hold();
    const taken = store.acquire(bucket, 'k', 2);
    const wiped = store.reset(bucket, 'k');
    const after = Promise.all([store.acquire(bucket, 'k', 1), store.acquire(bucket, 'k', 1)]);
    await proxy.held();
    proxy.release();
    expect(await taken).toEqual({ allowed: true, remaining: 8 });
    expect(await wiped).toBe(true);
    expect(await after).toEqual([{ allowed: true, remaining: 9 }, { allowed: true, remaining: 8 }]);
    await store.refund(bucket, 'k', 10);
    expect(await store.acquire(bucket, 'k', 0)).toEqual({ allowed: true, remaining: 10 });
  });
});
