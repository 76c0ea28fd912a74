// The store's calls reach Redis in the order it makes them, and none is held for ever: the store's own
// connection (ioredis, iovalkey) with `lazyConnect`, the offline queue off, a connection hung up on or
// closed while it waits to reconnect; a node-redis client, whose writes the store spreads over turns of
// the event loop, with a reset sent again after NOSCRIPT.
import { createServer, Socket } from 'node:net';
import type { Server } from 'node:net';
import { Cluster as ValkeyCluster, Redis as ValkeyRedis } from 'iovalkey';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { Rate } from '../src/rate.js';
import { RedisStore } from '../src/stores/redis-store.js';
import { TokenBucket } from '../src/token-bucket.js';
import { nodeRedisClient } from './support/client-families.js';
import { uniquePrefix } from './support/clients.js';
import type { RedisClusterProcess, RedisServerProcess } from './support/redis-server.js';
import { freePort, startRedisCluster, startRedisServer } from './support/redis-server.js';

const hourly = (name: string, capacity: number) => new TokenBucket(name, capacity, Rate.perHour(1));
const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
});

/**
 * A proxy to Redis that forwards its first `forward` connections and hangs up on the others once they write
 * (gracefully: FIN, no error); `hungUp` counts those the client has closed its side of since.
 */
async function hangUpAfter(forward: number): Promise<{ port: number; accepted: () => number; hungUp: () => number; cut: () => void }> {
  const target = new URL(inject('redisUrl'));
  let accepted = 0;
  let hungUp = 0;
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    accepted += 1;
    sockets.add(client);
    if (accepted <= forward) {
      const up = new Socket();
      sockets.add(up);
      up.connect(Number(target.port), target.hostname);
      client.pipe(up);
      up.pipe(client);
      client.on('error', () => up.destroy());
      up.on('error', () => client.destroy());
      client.on('close', () => up.destroy());
      up.on('close', () => client.destroy());
      return;
    }
    client.on('error', () => undefined);
    client.once('data', () => client.end());
    // the client closed its side too: it has seen the hang-up (and now waits to reconnect)
    client.once('close', () => (hungUp += 1));
  });
  const port = await new Promise<number>((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)));
  cleanups.push(() => {
    for (const s of sockets) s.destroy();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const cut = (): void => {
    forward = 0;
    for (const socket of sockets) socket.destroy();
  };
  return { port, accepted: () => accepted, hungUp: () => hungUp, cut };
}

/** How `promise` ended within `ms` (a bound for a call that should settle at once, or at its own timeout). */
async function settledWithin(promise: Promise<unknown>, ms: number): Promise<string> {
  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([
    promise.then(
      (value) => `resolved ${JSON.stringify(value)}`,
      (error: unknown) => `rejected ${String(error)}`,
    ),
    new Promise<string>((resolve) => (timer = setTimeout(() => resolve(`still pending after ${ms} ms`), ms))),
  ]);
  clearTimeout(timer);
  return outcome;
}

// README ("ioredis options") advises `enableOfflineQueue: false`, and `lazyConnect` is a common companion.
// The store's connection, a duplicate of the client, is lazy too, and with the offline queue off its calls
// wait for it to be ready: it connects when opened (0.3.1 waited for a write that never came: every call hung).
describe.each(['redis', 'cluster', 'iovalkey'] as const)('%s with lazyConnect and the offline queue off', (kind) => {
  it('an acquire on a ready client is answered', async () => {
    const client: Redis | Cluster =
      kind === 'iovalkey'
        ? (new ValkeyRedis(inject('redisUrl'), { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0 }) as unknown as Redis)
        : kind === 'redis'
        ? new Redis(inject('redisUrl'), { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0 })
        : new Cluster(inject('redisClusterNodes')!.map(({ host, port }) => ({ host, port })), {
            lazyConnect: true,
            enableOfflineQueue: false,
            redisOptions: { maxRetriesPerRequest: 0 },
          });
    client.on('error', () => undefined);
    cleanups.push(() => client.disconnect());
    await client.connect();
    expect(client.status).toBe('ready');
    const store = new RedisStore(client, { prefix: uniquePrefix(`lazy-${kind}`) });
    cleanups.push(() => store.close());
    // a round trip takes well under a millisecond; 3 s is generous
    expect(await settledWithin(store.acquire(hourly('a', 5), 'k', 1), 3_000)).toBe('resolved {"allowed":true,"remaining":4}');
  });
});

// With the offline queue off, a call made while the store's connection opens waits for it to be ready. A
// connection hung up on without an error (a proxy with no Redis behind it) fails those calls at once, as a
// disconnected one does (0.3.1 held them until an error or 'end', which may never come).
describe('ioredis with the offline queue off: the store\'s connection hung up on before its first ready', () => {
  it('an acquire waiting for the connection fails at once', async () => {
    // the client's own connection is forwarded; the store's (the next) is hung up on once it writes
    const proxy = await hangUpAfter(1);
    // README's advice, with a reconnect delay long enough that nothing else happens during the test
    const client = new Redis({ host: '127.0.0.1', port: proxy.port, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => 60_000 });
    const errors: unknown[] = [];
    client.on('error', (error) => errors.push(error));
    cleanups.push(() => client.disconnect());
    await new Promise((resolve) => client.once('ready', resolve)); // "wait for 'ready' before serving"
    const store = new RedisStore(client, { prefix: uniquePrefix('hang-close') });
    const outcome = settledWithin(store.acquire(hourly('a', 5), 'k', 1), 3_000);
    // the store's connection was hung up on (after its handshake's first write), and closed: it now waits 60 s
    while (proxy.hungUp() < 1) await new Promise((resolve) => setImmediate(resolve));
    expect(errors).toEqual([]); // hung up on without an error
    expect(await outcome).toMatch(/^rejected /);
    await store.close();
  });
});

// node-redis client: the store holds calls behind a turn's first shared call, in the order asked. A reset
// answered NOSCRIPT (the first a Redis sees, or the first after SCRIPT FLUSH) is sent again by EVAL in its
// place behind the calls still held, and counts itself again there: an acquire asked after it keeps its
// receipt, and its refund is given back (0.3.1's EVAL went ahead of them: the refund gave nothing back).
describe('node-redis client: a reset re-sent after NOSCRIPT while calls are held', () => {
  let server: RedisServerProcess;
  let client: ReturnType<typeof nodeRedisClient>;
  let admin: Redis;
  beforeAll(async () => {
    server = await startRedisServer();
    client = nodeRedisClient(server.url);
    await client.connect();
    admin = new Redis(server.url);
  });
  afterAll(async () => {
    await client.close().catch(() => undefined);
    admin.disconnect();
    await server.stop();
  });

  // `cached`: reset.lua loaded first, so nothing is sent again
  it.each([false, true])('an acquire asked after the reset, held, ran after it: its refund is given back (reset.lua cached: %s)', async (cached) => {
    const prefix = uniquePrefix('noscript-held-reset');
    const store = new RedisStore(client, { prefix });
    const other = new RedisStore(client, { prefix });
    const x = hourly('a', 5);
    const y = hourly('b', 5);
    // acquire.lua and acquire-each.lua cached; reset.lua not (no reset yet on this Redis)
    await store.acquire(x, 'k', 0);
    await Promise.all([store.acquire(x, 'k', 0), store.acquire(x, 'k', 0), store.acquire(x, 'k', 0)]);
    expect(await store.acquire(x, 'k', 2)).toEqual({ allowed: true, remaining: 3 });
    await admin.script('FLUSH');
    await store.acquire(x, 'k', 0);
    await Promise.all([store.acquire(x, 'k', 0), store.acquire(x, 'k', 0)]);
    if (cached) await store.reset(hourly('unused', 1), 'k');
    expect(await admin.script('EXISTS', store['resetLua'].sha)).toEqual([cached ? 1 : 0]);

    const ops: Promise<unknown>[] = [];
    let reset: Promise<boolean> | undefined;
    let taken: Promise<unknown> | undefined;
    // One acquire sent at once, then 3 shared calls of 128 keys: one handed over, two held.
    ops.push(store.acquire(y, 'first', 1));
    for (let i = 0; i < 384; i++) ops.push(store.acquire(y, `a${i}`, 1));
    // After the tick's end (the shared calls are made and held): the reset, held behind them, then 150 more
    // shared calls, the last with the acquire of k (150 turns: the reset's NOSCRIPT answer is back long
    // before they are all handed over; with 30, 1 run in 4 under load handed them over first).
    process.nextTick(() => {
      reset = store.reset(x, 'k');
      for (let i = 0; i < 150 * 128 - 1; i++) ops.push(store.acquire(y, `b${i}`, 1));
      taken = store.acquire(x, 'k', 1);
    });
    await new Promise((resolve) => setImmediate(resolve));
    await Promise.all(ops);
    expect(await reset).toBe(true);
    // Whichever order Redis ran them in, the refund leaves the bucket full: had the acquire run first
    // (remaining 2), the reset gave its token back and the refund gives nothing; run after the reset
    // (remaining 4: observed every run, the EVAL written ahead of the held calls), the refund gives it back.
    const took = await taken;
    await store.refund(x, 'k', 1);
    expect({ took, after: await other.acquire(x, 'k', 0) }).toEqual({ took, after: { allowed: true, remaining: 5 } });
  });
});

// With ioredis's default offline queue, a call made while the store's connection waits to reconnect waits
// in that queue. Closed then, the connection emits no 'end' (ioredis's disconnect() while it waits to
// reconnect only clears its timer) and fails none of it: the store fails such calls itself on close().
describe('ioredis, default offline queue: the store closed while its connection waits to reconnect', () => {
  it('an acquire queued for the connection fails on store.close()', async () => {
    const proxy = await hangUpAfter(Number.MAX_SAFE_INTEGER);
    // reconnect at once the first time (hung up on: closed without an error), then not for a minute
    const client = new Redis({ host: '127.0.0.1', port: proxy.port, maxRetriesPerRequest: 0, retryStrategy: (times) => (times === 1 ? 0 : 60_000) });
    client.on('error', () => undefined);
    cleanups.push(() => client.disconnect());
    await new Promise((resolve) => client.once('ready', resolve));
    const store = new RedisStore(client, { prefix: uniquePrefix('hang-queue') });
    expect(await store.acquire(hourly('a', 5), 'k', 1)).toEqual({ allowed: true, remaining: 4 });
    proxy.cut(); // Redis unreachable: both connections dropped, new ones hung up on
    // both connections reconnected once, were hung up on, and now wait 60 s
    while (proxy.hungUp() < 2) await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
    const acquire = store.acquire(hourly('a', 5), 'k', 1);
    expect(await settledWithin(acquire, 200)).toBe('still pending after 200 ms'); // queued, as ioredis does
    await store.close();
    expect(await settledWithin(acquire, 3_000)).toMatch(/^rejected /);
  });
});

// With the offline queue off, calls made while the store's connection has never been ready fail at once
// once it is hung up on, and later ones while it reconnects fail at once too: none is held.
describe('ioredis with the offline queue off: a thousand calls while the store\'s connection is hung up on', () => {
  it('every call is answered at once, none held while it reconnects', async () => {
    const proxy = await hangUpAfter(1); // the client's connection reaches Redis, the store's never does
    const client = new Redis({
      host: '127.0.0.1',
      port: proxy.port,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      connectTimeout: 500,
      retryStrategy: (times) => Math.min(times * 50, 200), // README's options
    });
    client.on('error', () => undefined);
    cleanups.push(() => client.disconnect());
    await new Promise((resolve) => client.once('ready', resolve)); // "wait for 'ready' before serving"
    const store = new RedisStore(client, { prefix: uniquePrefix('held-before-ready') });
    cleanups.push(() => store.close());
    const calls = Array.from({ length: 1000 }, (_, i) => store.acquire(hourly('a', 5), `k${i}`, 1));
    const outcome = await settledWithin(Promise.allSettled(calls), 3_000);
    expect(outcome).not.toBe('still pending after 3000 ms');
    const settled = await Promise.allSettled(calls);
    expect(settled.every((r) => r.status === 'rejected')).toBe(true);
  });
});

// ioredis's Cluster (iovalkey's alike) is 'ready' once it knows the slots, before its node connections are
// open: each opens on its first command. With the Cluster's offline queue off, ioredis failed a command
// bound for a node whose connection was still opening ("Connection is closed."): of 300 acquires made as
// the store's own connection opened, 129 to 171 failed. They wait for the node's connection now.
describe.each([
  ['ioredis', false],
  ['ioredis', true],
  ['iovalkey', false],
  ['iovalkey', true],
] as const)('%s Cluster with the offline queue off (lazyConnect %s): calls made as the store opens', (family, lazyConnect) => {
  it('300 acquires over the slots and an acquireAll of several slots are all answered, exactly', async () => {
    const nodes = inject('redisClusterNodes')!.map(({ host, port }) => ({ host, port }));
    const options = { lazyConnect, enableOfflineQueue: false, redisOptions: { maxRetriesPerRequest: 0 } };
    const client = family === 'iovalkey' ? (new ValkeyCluster(nodes, options) as unknown as Cluster) : new Cluster(nodes, options);
    client.on('error', () => undefined);
    cleanups.push(() => client.disconnect());
    if (lazyConnect) await client.connect();
    else await new Promise((resolve) => client.once('ready', resolve)); // "wait for 'ready' before serving"
    const store = new RedisStore(client, { prefix: uniquePrefix(`cluster-opening-${family}`) });
    cleanups.push(() => store.close());
    const bucket = hourly('a', 5);
    const costOf = (i: number): number => 1 + (i % 5);
    const keys = Array.from({ length: 300 }, (_, i) => `k${i}`);
    const calls = keys.map((key, i) => store.acquire(bucket, key, costOf(i)));
    const several = store.acquireAll(Array.from({ length: 6 }, (_, j) => ({ bucket, key: `all${j}`, cost: 2 })));
    // a hang guard only: every call is answered in milliseconds
    expect(await settledWithin(Promise.allSettled([...calls, several]), 10_000)).not.toMatch(/^still pending/);
    const answers = await Promise.all(calls.map((call) => call.catch((error: unknown) => String(error))));
    expect(answers).toEqual(keys.map((_, i) => ({ allowed: true, remaining: 5 - costOf(i) })));
    expect(await several).toEqual({ allowed: true, remaining: [3, 3, 3, 3, 3, 3] });
    // the buckets hold exactly what was taken
    expect(await Promise.all(keys.map((key) => store.acquire(bucket, key, 0)))).toEqual(keys.map((_, i) => ({ allowed: true, remaining: 5 - costOf(i) })));
    expect(await Promise.all(Array.from({ length: 6 }, (_, j) => store.acquire(bucket, `all${j}`, 0)))).toEqual(Array(6).fill({ allowed: true, remaining: 3 }));
  });
});

// What the offline queue off is for: with Redis down, a call fails promptly instead of waiting for it.
describe.each(['ioredis', 'iovalkey'] as const)('%s Cluster with the offline queue off, its nodes unreachable', (family) => {
  it('calls fail at once, none is held', async () => {
    const nodes = [{ host: '127.0.0.1', port: await freePort() }, { host: '127.0.0.1', port: await freePort() }]; // nothing listens
    const options = {
      enableOfflineQueue: false,
      clusterRetryStrategy: (times: number) => Math.min(times * 50, 200),
      redisOptions: { connectTimeout: 500, maxRetriesPerRequest: 0 },
    };
    const client = family === 'iovalkey' ? (new ValkeyCluster(nodes, options) as unknown as Cluster) : new Cluster(nodes, options);
    client.on('error', () => undefined);
    cleanups.push(() => client.disconnect());
    const store = new RedisStore(client, { prefix: uniquePrefix(`cluster-unreachable-${family}`) });
    cleanups.push(() => store.close());
    const bucket = hourly('a', 5);
    const first = Array.from({ length: 100 }, (_, i) => store.acquire(bucket, `k${i}`, 1));
    // a hang guard only: each fails on the first connection refused
    expect(await settledWithin(Promise.allSettled(first), 5_000)).not.toMatch(/^still pending/);
    expect((await Promise.allSettled(first)).every((r) => r.status === 'rejected')).toBe(true);
    // and later ones, while it reconnects
    const later = Array.from({ length: 100 }, (_, i) => store.acquire(bucket, `k${i}`, 1));
    expect(await settledWithin(Promise.allSettled(later), 5_000)).not.toMatch(/^still pending/);
    expect((await Promise.allSettled(later)).every((r) => r.status === 'rejected')).toBe(true);
  });
});

// A master restarted (or lost) after the store's calls were answered: ioredis drops a node connection that
// closes and opens a new one on the next call the slot's owner sends there. Calls to a master that is down
// fail at once; once it is back, calls made together are answered (with the Cluster's offline queue off,
// ioredis failed those behind the first while the new connection opened).
describe.each(['ioredis', 'iovalkey'] as const)('%s Cluster with the offline queue off, a master restarted, then every node down', (family) => {
  let cluster: RedisClusterProcess;
  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3 });
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  it('calls to a master down fail at once, calls once it is back are answered, calls with every node down fail at once', async () => {
    const options = {
      enableOfflineQueue: false,
      clusterRetryStrategy: (times: number) => Math.min(times * 50, 200),
      redisOptions: { connectTimeout: 500, maxRetriesPerRequest: 0 },
    };
    const client = family === 'iovalkey' ? (new ValkeyCluster(cluster.nodes, options) as unknown as Cluster) : new Cluster(cluster.nodes, options);
    client.on('error', () => undefined);
    cleanups.push(() => client.disconnect());
    await new Promise((resolve) => client.once('ready', resolve));
    const store = new RedisStore(client, { prefix: uniquePrefix(`cluster-restart-${family}`) });
    cleanups.push(() => store.close());
    const bucket = hourly('a', 5);
    const keys = Array.from({ length: 300 }, (_, i) => `k${i}`);
    const masterOf = async (key: string): Promise<number> => Math.floor((Number(await client.call('CLUSTER', 'KEYSLOT', store.keyFor(bucket, key))) * 3) / 16_384);
    const masters = await Promise.all(keys.map(masterOf));
    const onFirst = keys.filter((_, i) => masters[i] === 0);
    const elsewhere = keys.filter((_, i) => masters[i] !== 0);
    // one at a time: every node's connection is open before the restart
    for (const key of keys) expect(await store.acquire(bucket, key, 1)).toEqual({ allowed: true, remaining: 4 });

    await cluster.servers[0]!.kill();
    const down = onFirst.map((key) => store.acquire(bucket, key, 1));
    const up = elsewhere.map((key) => store.acquire(bucket, key, 1));
    expect(await settledWithin(Promise.allSettled([...down, ...up]), 5_000)).not.toMatch(/^still pending/); // a hang guard
    expect((await Promise.allSettled(down)).every((r) => r.status === 'rejected')).toBe(true);
    expect(await Promise.all(up)).toEqual(Array(elsewhere.length).fill({ allowed: true, remaining: 3 }));

    await cluster.servers[0]!.restart(); // empty: its buckets are full again
    await cluster.waitUntilHealthy();
    const back = onFirst.map((key) => store.acquire(bucket, key, 1));
    expect(await settledWithin(Promise.allSettled(back), 5_000)).not.toMatch(/^still pending/);
    expect(await Promise.all(back.map((call) => call.catch((error: unknown) => String(error))))).toEqual(Array(onFirst.length).fill({ allowed: true, remaining: 4 }));

    for (const server of cluster.servers) await server.kill();
    const none = keys.map((key) => store.acquire(bucket, key, 1));
    expect(await settledWithin(Promise.allSettled(none), 5_000)).not.toMatch(/^still pending/);
    expect((await Promise.allSettled(none)).every((r) => r.status === 'rejected')).toBe(true);
    const later = keys.map((key) => store.acquire(bucket, key, 1));
    expect(await settledWithin(Promise.allSettled(later), 5_000)).not.toMatch(/^still pending/);
    expect((await Promise.allSettled(later)).every((r) => r.status === 'rejected')).toBe(true);
  }, 60_000);
});

// ioredis retries a CLUSTERDOWN (or TRYAGAIN) reply later by itself. A call in that retry when the last
// nodes die finds no node: the store's Cluster, whose offline queue is on so that calls wait for a node
// connection that is opening, would park it there for the outage and run it once Redis was back.
describe.each(['ioredis', 'iovalkey'] as const)('%s Cluster with the offline queue off: calls in the CLUSTERDOWN retry when every node dies', (family) => {
  let cluster: RedisClusterProcess;
  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3, nodeTimeoutMs: 500 });
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  it('fail at once, and none is run once Redis is back', async () => {
    const options = {
      enableOfflineQueue: false,
      clusterRetryStrategy: (times: number) => Math.min(times * 50, 200),
      retryDelayOnClusterDown: 50,
      redisOptions: { connectTimeout: 500, maxRetriesPerRequest: 0 },
    };
    const client = family === 'iovalkey' ? (new ValkeyCluster(cluster.nodes, options) as unknown as Cluster) : new Cluster(cluster.nodes, options);
    client.on('error', () => undefined);
    cleanups.push(() => client.disconnect());
    await new Promise((resolve) => client.once('ready', resolve));
    const store = new RedisStore(client, { prefix: uniquePrefix(`cluster-down-retry-${family}`) });
    cleanups.push(() => store.close());
    const bucket = hourly('a', 5);
    const keys = Array.from({ length: 60 }, (_, i) => `k${i}`);
    for (const key of keys) expect(await store.acquire(bucket, key, 1)).toEqual({ allowed: true, remaining: 4 });

    // a master dies; once the others have marked it failed they answer CLUSTERDOWN, which ioredis retries
    await cluster.servers[0]!.kill();
    const clusterState = async (port: number): Promise<string> => {
      const node = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0 });
      node.on('error', () => undefined);
      try {
        return /cluster_state:(\w+)/.exec(String(await node.call('CLUSTER', 'INFO')))?.[1] ?? '';
      } finally {
        node.disconnect();
      }
    };
    while ((await clusterState(cluster.nodes[1]!.port)) !== 'fail' || (await clusterState(cluster.nodes[2]!.port)) !== 'fail') {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const calls = keys.map((key) => store.acquire(bucket, key, 1));
    const settled = Promise.allSettled(calls);
    // the calls are in ioredis's retry (CLUSTERDOWN from the masters left) when those die too
    await new Promise((resolve) => setTimeout(resolve, 120));
    await Promise.all([cluster.servers[1]!.kill(), cluster.servers[2]!.kill()]);
    expect(await settledWithin(settled, 5_000)).not.toMatch(/^still pending/); // a hang guard
    expect((await settled).map((r) => r.status)).toEqual(Array(keys.length).fill('rejected'));

    // Redis back, empty: a call parked for the outage would now run ahead of these, leaving 3
    await Promise.all(cluster.servers.map((server) => server.restart()));
    await cluster.waitUntilHealthy();
    const after = await Promise.all(keys.map((key) => store.acquire(bucket, key, 1).catch((error: unknown) => String(error))));
    expect(after).toEqual(Array(keys.length).fill({ allowed: true, remaining: 4 }));
  }, 60_000);
});
