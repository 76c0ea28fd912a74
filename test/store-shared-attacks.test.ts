// Hostile review of the shared acquire path (lua/acquire-each.lua) and of
// what every store call reads back: regressions for defects proven against a
// real Redis and a real Redis Cluster.
import { Cluster, Redis } from 'ioredis';
import { Cluster as ValkeyCluster, Redis as ValkeyRedis } from 'iovalkey';
import { createClientPool } from 'redis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { Rate } from '../src/rate.js';
import { termsOf } from '../src/stores/bucket-terms.js';
import { LuaScript } from '../src/stores/lua-script.js';
import { ReceiptBook } from '../src/stores/receipts.js';
import { RedisStore } from '../src/stores/redis-store.js';
import type { RedisStoreClient } from '../src/stores/redis-client.js';
import { TokenBucket } from '../src/token-bucket.js';
import { CLIENT_FAMILIES, familyClient, openClient, sharedTarget } from './support/client-families.js';
import type { OpenedClient } from './support/client-families.js';
import { startRedisServer } from './support/redis-server.js';
import type { RedisServerProcess } from './support/redis-server.js';
import { uniquePrefix } from './support/clients.js';
import { clusterThroughProxies } from './support/fault-proxy.js';
import { replyHoldingProxy, requestHoldingProxy } from './support/holding-proxy.js';
import type { FaultProxy } from './support/fault-proxy.js';
import { SERVERS, startHttpServer, tokensLeft } from './support/http-servers.js';
import { tokenBucketDirectiveTypeDefs } from '../src/index.js';

const hourly = (name: string, capacity: number) => new TokenBucket(name, capacity, Rate.perHour(1));

describe('an ioredis or iovalkey client whose options type numbers as strings (stringNumbers)', () => {
  const url = inject('redisUrl');
  const nodes = inject('redisClusterNodes')!;
  const clients: [string, RedisStoreClient & { disconnect(): void }][] = [
    ['ioredis Redis', new Redis(url, { stringNumbers: true })],
    ['ioredis Cluster', new Cluster(nodes, { redisOptions: { stringNumbers: true } })],
    ['iovalkey Redis', new ValkeyRedis(url, { stringNumbers: true })],
    ['iovalkey Cluster', new ValkeyCluster(nodes.map(({ host, port }) => ({ host, port })), { redisOptions: { stringNumbers: true } })],
  ];
  afterAll(() => {
    for (const [, client] of clients) client.disconnect();
  });

  // 0.3 read the scripts' integer replies as strings on the store's own connection (a duplicate with the
  // client's options): every call failed with "unexpected reply" after Redis had applied it, and reset said false.
  it.each(clients)('%s: every call reads its reply as with the default options', async (_name, client) => {
    const store = new RedisStore(client, { prefix: uniquePrefix('string-numbers') });
    const a = hourly('a', 5);
    const b = hourly('b', 3);
    expect(await store.acquire(a, 'k', 1)).toEqual({ allowed: true, remaining: 4 });
    // one tick: a shared call
    expect(await Promise.all([store.acquire(a, 'k', 2), store.acquire(a, 'k', 3), store.acquireAll([{ bucket: b, key: 'k', cost: 2 }])])).toEqual([
      { allowed: true, remaining: 2 },
      { allowed: false, retryAfterMs: expect.any(Number) as number },
      { allowed: true, remaining: [1] },
    ]);
    expect(await store.acquireAll([{ bucket: a, key: 'k', cost: 1 }, { bucket: b, key: 'k', cost: 1 }])).toEqual({ allowed: true, remaining: [1, 0] });
    expect(await store.checkAll([{ bucket: a, key: 'k', cost: 9 }])).toMatchObject({ allowed: false, denied: [{ index: 0, retryAfterMs: null }], remaining: [1] });
    expect(await store.refundAll([{ bucket: a, key: 'k', cost: 4 }])).toEqual([5]);
    expect(await store.reset(b, 'k')).toBe(true);
    expect(await store.reset(b, 'k')).toBe(false);
    await store.close();
  });
});

describe.each(CLIENT_FAMILIES)('%s', (family) => {
  describe.each(['redis', 'cluster'] as const)('%s: a reset sent while takes are in flight', (kind) => {
    const client = familyClient(family, sharedTarget(kind));

    // 0.3 forgot the reset when the last take in flight was answered, before asking whether that take had been
    // reset since: its receipt stayed (the reset had given its tokens back), a later take by the same store
    // continued the chain from before the reset, and lua/refund.lua, seeing a chain older than the reset's mark,
    // gave nothing back: the bucket ended 3 tokens emptier than had they never been taken.
    it('leaves no receipt of them: a refund of a later take by the same store is exact', async () => {
      const store = new RedisStore(client, { prefix: uniquePrefix(`reset-in-flight-${family}-${kind}`) });
      const bucket = hourly('r', 100);
      // one tick: with an acquire in flight (sent at once), one shared call, sent at the tick's end; the reset goes right after it
      const holder = store.acquire(bucket, 'holder', 0);
      const takes = Promise.all([store.acquire(bucket, 'k', 5), store.acquire(bucket, 'k', 1)]);
      await new Promise((resolve) => process.nextTick(resolve));
      const reset = store.reset(bucket, 'k');
      expect(await takes).toEqual([{ allowed: true, remaining: 95 }, { allowed: true, remaining: 94 }]);
      await holder;
      expect(await reset).toBe(true);
      // a pair named twice: not known to be taken from a full bucket, so it continues whatever chain is kept
      expect(await store.acquireAll([{ bucket, key: 'k', cost: 1 }, { bucket, key: 'k', cost: 2 }])).toEqual({ allowed: true, remaining: [99, 97] });
      await store.refund(bucket, 'k', 3);
      expect(await store.acquire(bucket, 'k', 0)).toEqual({ allowed: true, remaining: 100 });
      await store.close();
    });

    // 0.3 kept every reset sent while an acquire was in flight until none was: under steady load (always
    // one in flight) that was one entry per key ever reset, never freed. What a user would see is the
    // store's memory growing; the test reads what the store remembers of pairs (`maxReceipts` at most).
    it('under steady load, remembers resets within maxReceipts', async () => {
      const store = new RedisStore(client, { prefix: uniquePrefix(`reset-steady-${family}-${kind}`), maxReceipts: 10 });
      const remembered = (): number => (store as unknown as { receipts: ReceiptBook }).receipts.size;
      const bucket = hourly('s', 1000);
      let previous = store.acquire(bucket, 'load', 1);
      for (let i = 0; i < 50; i++) {
        await new Promise((resolve) => process.nextTick(resolve)); // `previous` is sent, its reply not read yet
        const reset = store.reset(bucket, `k${i}`);
        const next = store.acquire(bucket, 'load', 1); // started after the reset: never asked about it
        expect(await previous).toMatchObject({ allowed: true });
        await reset;
        expect(remembered()).toBeLessThanOrEqual(10);
        previous = next;
      }
      expect(await previous).toEqual({ allowed: true, remaining: 1000 - 51 });
      await store.close();
    });
  });
});

describe('a node-redis pool, whose connections may reach Redis in another order than the store sent on them', () => {
  const shared = new URL(inject('redisUrl'));
  const { sha } = new LuaScript('acquire-each.lua', { shared: true });
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

  // 0.3 took send order for Redis's order ("a take sent before a reset ran before it"): on a pool a shared call
  // sent before a reset, held up on its connection, ran after it; the store left it no receipt, and a refund of
  // everything it had taken since the reset gave nothing back: the bucket ended 6 tokens short of full.
  it('takes sent before a reset run before it: a refund of the takes after it is exact', async () => {
    const store = new RedisStore(pool, { prefix: uniquePrefix('pool-reset') });
    const bucket = hourly('r', 100);
    // An acquire that finds nothing in flight is sent at once; the two after it share a call. This loads both scripts.
    await Promise.all([store.acquire(bucket, 'warm', 0), store.acquire(bucket, 'k', 1), store.acquire(bucket, 'k', 1)]);
    proxy.hold();
    const first = store.acquire(bucket, 'warm', 0);
    const takes = Promise.all([store.acquire(bucket, 'k', 5), store.acquire(bucket, 'k', 1)]);
    await first;
    await proxy.held();
    expect(pool.clientsInUse).toBe(1); // the shared call's
    const reset = store.reset(bucket, 'k');
    // A reset sent at once goes on another connection of the pool: it runs first, ahead of the takes held back.
    // The store must not send it before the takes sent before it are answered.
    if (pool.clientsInUse > 1) await reset;
    proxy.release();
    expect(await takes).toEqual([{ allowed: true, remaining: 93 }, { allowed: true, remaining: 92 }]);
    expect(await reset).toBe(true);
    expect(await store.acquire(bucket, 'k', 4)).toEqual({ allowed: true, remaining: 96 });
    await store.refund(bucket, 'k', 4);
    expect(await store.acquire(bucket, 'k', 0)).toEqual({ allowed: true, remaining: 100 });
  });
});

describe.each(CLIENT_FAMILIES)('%s Cluster: an acquireAll across slots, a reset of a later slot’s key sent while an earlier slot’s call is out', (family) => {
  const client = familyClient(family, sharedTarget('cluster'));

  // 0.3 stamped the whole operation with the reset count read when its first slot's call was sent. The
  // slots go one after the other: a reset of `b` sent while `a`'s call was out ran before `b`'s take, yet
  // the store took `b`'s take for one sent before that reset (whose tokens the reset gave back): it kept no
  // receipt of it, and a refund of those 5 tokens gave nothing back.
  it('keeps a receipt of the later slot’s take: its refund is exact', async () => {
    const store = new RedisStore(client, { prefix: uniquePrefix(`across-reset-refund-${family}`) });
    const bucket = hourly('x', 100);
    expect(await store.acquire(bucket, 'a', 0)).toEqual({ allowed: true, remaining: 100 }); // connected, scripts loaded
    const taking = store.acquireAll([
      { bucket, key: 'a', cost: 1 },
      { bucket, key: 'b', cost: 5 },
    ]);
    // `a`'s call is out; `b`'s goes once its reply is in, after this reset
    const reset = store.reset(bucket, 'b');
    expect(await taking).toEqual({ allowed: true, remaining: [99, 95] });
    expect(await reset).toBe(false);
    await store.refund(bucket, 'b', 5);
    expect(await store.acquire(bucket, 'b', 0)).toEqual({ allowed: true, remaining: 100 });
    await store.close();
  });

  // The same stamp made the give-back of a denied operation give nothing for `b`: the denial left its 5 tokens taken.
  it('takes nothing when a later slot denies: the give-back returns the later slot’s take', async () => {
    const store = new RedisStore(client, { prefix: uniquePrefix(`across-reset-deny-${family}`) });
    const bucket = hourly('x', 100);
    expect(await store.acquire(bucket, 'a', 0)).toEqual({ allowed: true, remaining: 100 });
    const taking = store.acquireAll([
      { bucket, key: 'a', cost: 1 },
      { bucket, key: 'b', cost: 5 },
      { bucket, key: 'c', cost: 101 },
    ]);
    const reset = store.reset(bucket, 'b');
    expect(await taking).toMatchObject({ allowed: false, denied: [{ index: 2, retryAfterMs: null }] });
    expect(await reset).toBe(false);
    expect(await store.acquire(bucket, 'a', 0)).toEqual({ allowed: true, remaining: 100 });
    expect(await store.acquire(bucket, 'b', 0)).toEqual({ allowed: true, remaining: 100 });
    await store.close();
  });
});

describe.each(SERVERS)('%s on a Cluster: an operation across slots denied at a later slot gives back what it took at an earlier one', (kind) => {
  const nodes = inject('redisClusterNodes')!;
  let proxies: FaultProxy[];
  let client: Cluster;
  beforeAll(async () => {
    const through = await clusterThroughProxies(nodes);
    proxies = through.proxies;
    client = new Cluster(through.startup, { natMap: through.natMap });
    await client.ping();
  });
  afterAll(async () => {
    client.disconnect();
    await Promise.all(proxies.map((p) => p.close()));
  });
  const held = (): number => proxies.reduce((sum, p) => sum + p.heldBytes, 0);
  const heldAbove = async (bytes: number): Promise<void> => {
    while (held() <= bytes) await new Promise((resolve) => setImmediate(resolve));
  };

  // 0.3 gave those tokens back without telling the limiters watching the store (as a refund or a reset
  // does): a denial the store gave another operation while they were out stayed in the deny cache, which
  // went on denying, for the rest of its wait, what the store admitted.
  it('and the deny cache forgets a denial the store gave while they were out', async () => {
    const perUser = new TokenBucket('per-user', 10, Rate.perHour(10));
    const everyone = new TokenBucket('everyone', 5, Rate.perHour(5));
    const store = new RedisStore(client, { prefix: uniquePrefix(`across-deny-cache-${kind}`) });
    const server = await startHttpServer(kind, {
      typeDefs: `${tokenBucketDirectiveTypeDefs}
type Query {
  six: Int @tokenBucket(name: "per-user", cost: 6)
  five: Int @tokenBucket(name: "per-user", cost: 5)
  shared: Int @tokenBucket(name: "everyone", cost: 2)
}`,
      resolvers: { Query: { six: () => 6, five: () => 5, shared: () => 2 } },
      limits: { store, buckets: [perUser, everyone] },
      identify: (user, bucket) => (bucket.name === 'everyone' ? 'all' : user),
    });
    try {
      expect(await store.acquire(everyone, 'all', 5)).toEqual({ allowed: true, remaining: 0 });
      const ann = { 'x-user': 'ann' };
      for (const p of proxies) p.hold();
      // ann's 6 of per-user are taken (the reply held), then `everyone` denies: they are given back
      const across = server.post({ query: '{ six shared }' }, ann);
      await heldAbove(0);
      const before = held();
      // decided while the 6 are out: 4 left, denied
      const meanwhile = server.post({ query: '{ five }' }, ann);
      await heldAbove(before);
      for (const p of proxies) p.release();
      expect((await across).status).toBe(429);
      expect((await meanwhile).status).toBe(429);
      expect(await tokensLeft(store, perUser, 'ann')).toBe(10);
      const after = await server.post({ query: '{ five }' }, ann);
      expect(after.status).toBe(200);
      expect(after.body.data).toEqual({ five: 5 });
    } finally {
      await server.stop();
      await store.close();
    }
  });
});

describe('a node-redis pool, whose replies may come back in another order than Redis ran their calls', () => {
  const shared = new URL(inject('redisUrl'));
  let proxy: Awaited<ReturnType<typeof replyHoldingProxy>>;
  let pool: ReturnType<typeof createClientPool>;
  beforeAll(async () => {
    proxy = await replyHoldingProxy({ host: shared.hostname, port: Number(shared.port) }, 'hold-its-reply');
    pool = createClientPool({ url: proxy.url }, { minimum: 3 });
    pool.on('error', () => {});
    await pool.connect();
  });
  afterAll(async () => {
    await pool.close().catch(() => undefined);
    await proxy.close();
  });

  // 0.3 noted each take's receipt as its reply came: the later take's first, as if it had drained a bucket
  // nobody had taken from, then the earlier one's, which the receipts could only count as overtaken. A refund of
  // both gave back 5 of their 8 tokens: the bucket ended 3 short of full ("refunds are exact within one process").
  it('a refund of two takes is exact, whichever reply is read first', async () => {
    const store = new RedisStore(pool, { prefix: uniquePrefix('pool-replies') });
    const bucket = hourly('r', 100);
    const marker = hourly('hold-its-reply', 1);
    await store.acquire(bucket, 'warm', 0); // loads lua/acquire.lua (two in one tick would share a call)
    proxy.arm();
    const first = store.acquireAll([
      { bucket, key: 'k', cost: 5 },
      { bucket: marker, key: 'k', cost: 0 },
    ]);
    await proxy.held(); // Redis took the 5
    const second = await store.acquire(bucket, 'k', 3); // on another connection of the pool, after them
    expect(second).toEqual({ allowed: true, remaining: 92 });
    proxy.release();
    expect(await first).toEqual({ allowed: true, remaining: [95, 1] });
    await store.refund(bucket, 'k', 8);
    expect(await store.acquire(bucket, 'k', 0)).toEqual({ allowed: true, remaining: 100 });
  });
});

describe('the receipts of takes whose replies come in any order', () => {
  // A model: one bucket of 50 tokens refilling one a µs, this store's takes and other processes' at known
  // Redis times, the receipts noted in a random order. A refund of everything taken gives back what lies ahead
  // of now (lua/refund.lua): never more than the tokens had they never been taken would leave (no minting), and,
  // with the replies in the order Redis ran them and no other process, exactly that.
  it('never lets a refund give back more than was taken, and is exact in order', () => {
    const capacity = 50;
    const bucket = new TokenBucket('m', capacity, new Rate(1, 0.001));
    const terms = termsOf(bucket);
    let seed = 7;
    const random = (): number => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    for (let run = 0; run < 5000; run++) {
      const others = random() < 0.5;
      let level = capacity;
      let without = capacity; // had this store's takes never been taken
      let t = 1_000_000;
      const ours: { at: number; cost: number; fromFull: boolean }[] = [];
      for (let i = 2 + Math.floor(random() * 5); i > 0; i--) {
        const dt = 1 + Math.floor(random() * 30);
        t += dt;
        level = Math.min(capacity, level + dt);
        without = Math.min(capacity, without + dt);
        const mine = !others || random() < 0.6;
        const cost = 1 + Math.floor(random() * 20);
        if (level < cost) continue;
        if (mine) ours.push({ at: t, cost, fromFull: level === capacity });
        else without -= cost;
        level -= cost;
      }
      const order = ours.map((_, i) => i);
      const shuffled = random() < 0.7;
      if (shuffled) {
        for (let i = order.length - 1; i > 0; i--) {
          const j = Math.floor(random() * (i + 1));
          [order[i], order[j]] = [order[j]!, order[i]!];
        }
      }
      const book = new ReceiptBook(10);
      for (const i of order) book.record('k', terms, ours[i]!.cost, ours[i]!.at, ours[i]!.fromFull);
      const dt = Math.floor(random() * 40);
      t += dt;
      level = Math.min(capacity, level + dt);
      without = Math.min(capacity, without + dt);
      const total = ours.reduce((sum, o) => sum + o.cost, 0);
      if (total === 0) continue;
      const end = book.claim('k', terms, total)!.bound[0]!.end.at;
      const given = Math.min(total, Math.max(0, end - t), capacity - level);
      expect(given).toBeLessThanOrEqual(without - level);
      if (!shuffled && !others) expect(given).toBe(without - level);
    }
  });
});

describe.each(CLIENT_FAMILIES)('%s: a take whose script Redis no longer has (SCRIPT FLUSH, a restart, a failover)', (family) => {
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

  /** Every script called once on the store's connection, so that the next calls go by hash. */
  const warm = async (store: RedisStore, bucket: TokenBucket): Promise<void> => {
    await store.acquire(bucket, 'warm', 0);
    await store.reset(bucket, 'warm');
  };

  // Its EVALSHA comes back NOSCRIPT and the store sends it again by EVAL, a round trip later: a reset sent
  // between the two, its own script cached, ran before the take. 0.3 counted the take as sent before that
  // reset (when its EVALSHA went out): it kept no receipt, and a refund of its 5 tokens gave nothing back.
  it('keeps a receipt of it when a reset sent meanwhile ran before it', async () => {
    const store = new RedisStore(opened.client, { prefix: uniquePrefix(`noscript-${family}`) });
    const bucket = hourly('n', 100);
    await warm(store, bucket); // (a script's first call on a connection goes by source)
    await admin.script('FLUSH');
    expect(await store.reset(bucket, 'other')).toBe(false); // reset.lua cached again, acquire.lua not
    const take = store.acquire(bucket, 'k', 5);
    await new Promise((resolve) => setImmediate(resolve)); // its EVALSHA is out (node-redis writes at the loop's turn)
    const reset = store.reset(bucket, 'k');
    expect(await take).toEqual({ allowed: true, remaining: 95 });
    expect(await reset).toBe(false); // it ran first: nothing had been taken
    await store.refund(bucket, 'k', 5);
    expect(await store.acquire(bucket, 'k', 0)).toEqual({ allowed: true, remaining: 100 });
    await store.close();
  });

  // The other way round. 0.3 sent a reset by hash: answered NOSCRIPT and sent again by EVAL, it ran after a
  // take sent meanwhile and gave its tokens back. Resets now always go by source, so a reset runs where it
  // was sent, before the take sent after it, even with reset.lua not cached; a later refund is exact.
  it('runs a reset where it was sent while its script is not cached: a take sent after it counts after it, and a later refund is exact', async () => {
    const store = new RedisStore(opened.client, { prefix: uniquePrefix(`noscript-reset-${family}`) });
    const bucket = hourly('n', 100);
    await warm(store, bucket);
    await admin.script('FLUSH');
    expect(await store.acquire(bucket, 'other', 0)).toEqual({ allowed: true, remaining: 100 }); // acquire.lua cached again, reset.lua not
    const reset = store.reset(bucket, 'k');
    const take = store.acquire(bucket, 'k', 5); // sent at once (no acquire in flight), after the reset
    expect(await reset).toBe(false); // it ran first: nothing had been taken
    expect(await take).toEqual({ allowed: true, remaining: 95 });
    // a pair named twice: not known to be taken from a full bucket, so it continues the take's chain
    expect(await store.acquireAll([{ bucket, key: 'k', cost: 1 }, { bucket, key: 'k', cost: 2 }])).toEqual({ allowed: true, remaining: [94, 92] });
    await store.refund(bucket, 'k', 3);
    expect(await store.acquire(bucket, 'k', 0)).toEqual({ allowed: true, remaining: 95 });
    await store.close();
  });
});
