// What differs between the client libraries RedisStore accepts (ioredis,
// iovalkey, node-redis v5): which objects it takes, how replies are typed,
// and what each library does when Redis restarts or a reply is lost. The
// store suites themselves run on every family (stores.test.ts and others).
import { once } from 'node:events';
import { createConnection, createServer } from 'node:net';
import type { AddressInfo, Server, Socket } from 'node:net';
import type { Redis } from 'ioredis';
import { createClient, createClientPool, createCluster, createSentinel, RESP_TYPES } from 'redis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { Rate } from '../src/rate.js';
import { RedisStore } from '../src/stores/redis-store.js';
import { TokenBucket } from '../src/token-bucket.js';
import { CLIENT_FAMILIES, nodeRedisClient, openClient } from './support/client-families.js';
import { redisClient, uniquePrefix } from './support/clients.js';
import { startRedisServer } from './support/redis-server.js';
import type { RedisServerProcess } from './support/redis-server.js';

const hourly = (name: string, capacity: number) => new TokenBucket(name, capacity, Rate.perHour(1));

describe('RedisStore refuses what is not a client it knows', () => {
  it.each([
    ['null', null],
    ['a URL string', 'redis://localhost:6379'],
    ['an empty object', {}],
    ['an object with an eval only', { eval: () => Promise.resolve(null) }],
  ])('%s: a TypeError naming every client accepted', (_name, client) => {
    expect(() => new RedisStore(client as never)).toThrow(TypeError);
    expect(() => new RedisStore(client as never)).toThrow(
      /ioredis or iovalkey Redis or Cluster, or a node-redis 5 or 6 client \(createClient\) or cluster \(createCluster\)/,
    );
  });

  it('a node-redis legacy-mode client, naming what to pass instead', () => {
    const legacy = nodeRedisClient(inject('redisUrl')).legacy();
    expect(() => new RedisStore(legacy as never)).toThrow(/legacy-mode client \(client.legacy\(\)\) is not supported: pass the client itself/);
  });

  it('a node-redis sentinel', () => {
    const sentinel = createSentinel({ name: 'mymaster', sentinelRootNodes: [{ host: '127.0.0.1', port: 1 }] });
    expect(() => new RedisStore(sentinel as never)).toThrow(/node-redis sentinel \(createSentinel\) is not supported/);
  });

  it('a node-redis client its owner has not connected: each call fails with node-redis\'s own error, and works once connected', async () => {
    const client = nodeRedisClient(inject('redisUrl'));
    const store = new RedisStore(client, { prefix: uniquePrefix('unconnected') });
    const bucket = hourly('unconnected', 2);
    await expect(store.acquire(bucket, 'k')).rejects.toThrow(/The client is closed/);
    await client.connect();
    try {
      expect(await store.acquire(bucket, 'k')).toEqual({ allowed: true, remaining: 1 });
    } finally {
      await client.close();
    }
  });
});

describe('a node-redis cluster its owner has not connected', () => {
  it('fails each call with an error saying so (node-redis itself threw a TypeError from inside), and works once connected', async () => {
    const cluster = createCluster({ rootNodes: inject('redisClusterNodes')!.map(({ host, port }) => ({ url: `redis://${host}:${port}` })) });
    cluster.on('error', () => {});
    const store = new RedisStore(cluster, { prefix: uniquePrefix('unconnected cluster') });
    const bucket = hourly('unconnected', 2);
    await expect(store.acquire(bucket, 'k')).rejects.toThrow('The node-redis cluster is closed: connect it (await cluster.connect())');
    await expect(store.reset(bucket, 'k')).rejects.toThrow('The node-redis cluster is closed');
    await cluster.connect();
    try {
      expect(await store.acquire(bucket, 'k')).toEqual({ allowed: true, remaining: 1 });
    } finally {
      await cluster.close();
    }
    await expect(store.acquire(bucket, 'k')).rejects.toThrow('The node-redis cluster is closed');
  });
});

describe('RedisStore prefixes', () => {
  it('refuses a lone surrogate, which every client sends as U+FFFD (two such prefixes shared their buckets)', () => {
    const client = redisClient(inject('redisUrl'), { lazyConnect: true });
    for (const prefix of ['a\uD800:', 'a\uDFFF:', '\uDC00', 'x\uD83D']) {
      expect(() => new RedisStore(client, { prefix }), JSON.stringify(prefix)).toThrow(/without braces or lone surrogates/);
    }
    expect(new RedisStore(client, { prefix: 'a\uD83D\uDE42:' }).prefix).toBe('a🙂:');
    client.disconnect();
  });
});

describe('node-redis replies read alike whatever the client maps them to', () => {
  const url = inject('redisUrl');
  const mapped = createClient({ url, commandOptions: { typeMapping: { [RESP_TYPES.BLOB_STRING]: Buffer, [RESP_TYPES.NUMBER]: String } } });
  const resp3 = createClient({ url, RESP: 3 });
  const pool = createClientPool({ url });
  for (const client of [mapped, resp3, pool]) client.on('error', () => {});
  beforeAll(async () => {
    await Promise.all([mapped.connect(), resp3.connect(), pool.connect()]);
  });
  afterAll(async () => {
    await Promise.allSettled([mapped.close(), resp3.close(), pool.close()]);
  });

  // Whole tokens near 2^53 come back as strings (full within 99 years: about 2,900 tokens a ms).
  const huge = new TokenBucket('huge', 2 ** 53 - 1, new Rate(2 ** 53 - 1, 99 * 365 * 86_400_000));
  const small = hourly('small', 5);

  async function exercise(store: RedisStore): Promise<void> {
    // a bucket refilling about 2,900 tokens a ms is full again between two calls, less what the call takes
    const near = (whole: number | undefined) => Number.isSafeInteger(whole) && whole! > 2 ** 53 - 64 && whole! <= 2 ** 53 - 2;
    expect(await store.acquire(huge, 'k', 3)).toEqual({ allowed: true, remaining: 2 ** 53 - 4 });
    const both = await store.acquireAll([
      { bucket: small, key: 'k', cost: 2 },
      { bucket: huge, key: 'k', cost: 1 },
    ]);
    expect(both).toEqual({ allowed: true, remaining: [3, expect.any(Number)] });
    expect(near(both.remaining[1])).toBe(true);
    expect(await store.checkAll([{ bucket: small, key: 'k', cost: 9 }])).toMatchObject({
      allowed: false,
      denied: [{ index: 0, retryAfterMs: null }],
      remaining: [3],
    });
    // the refund script answers with full-at times, as strings
    expect(await store.refundAll([{ bucket: small, key: 'k', cost: 2 }])).toEqual([5]);
    expect(await store.acquire(small, 'k', 4)).toEqual({ allowed: true, remaining: 1 });
    expect(await store.acquire(small, 'k', 2)).toMatchObject({ allowed: false, retryAfterMs: expect.any(Number) as number });
    expect(await store.reset(small, 'k')).toBe(true);
    expect(await store.reset(small, 'k')).toBe(false);
  }

  it('on a client whose blob strings and numbers are mapped to Buffer and string', async () => {
    await exercise(new RedisStore(mapped, { prefix: uniquePrefix('mapped') }));
  });

  it('on RESP3', async () => {
    await exercise(new RedisStore(resp3, { prefix: uniquePrefix('resp3') }));
  });

  it('on a client pool (createClientPool)', async () => {
    await exercise(new RedisStore(pool, { prefix: uniquePrefix('pool') }));
  });
});

/** A TCP proxy in front of one Redis that can drop the connection carrying the next reply, instead of delivering it. */
interface ReplyDropper {
  readonly url: string;
  /** The next reply from Redis (after Redis ran the command) closes the client's connection undelivered. */
  dropNextReply(): void;
  /** Disarms `dropNextReply`. */
  keepReplies(): void;
  close(): Promise<void>;
}

async function replyDropper(port: number): Promise<ReplyDropper> {
  let drop = false;
  const sockets = new Set<Socket>();
  const server: Server = createServer((downstream) => {
    const upstream = createConnection({ host: '127.0.0.1', port });
    for (const socket of [downstream, upstream]) {
      sockets.add(socket);
      socket.on('error', () => {});
      socket.on('close', () => {
        sockets.delete(socket);
        downstream.destroy();
        upstream.destroy();
      });
    }
    downstream.on('data', (chunk: Buffer) => upstream.write(chunk));
    upstream.on('data', (chunk: Buffer) => {
      if (drop) {
        drop = false;
        downstream.destroy();
        return;
      }
      downstream.write(chunk);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `redis://127.0.0.1:${(server.address() as AddressInfo).port}`,
    dropNextReply: () => void (drop = true),
    keepReplies: () => void (drop = false),
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** EVALSHA and EVAL calls Redis has run since the last CONFIG RESETSTAT. */
async function scriptCalls(admin: Redis): Promise<{ evalsha: number; eval: number }> {
  const info = await admin.info('commandstats');
  const calls = (name: string) => Number(new RegExp(`^cmdstat_${name}:calls=(\\d+)`, 'm').exec(info)?.[1] ?? 0);
  return { evalsha: calls('evalsha'), eval: calls('eval') };
}

/** Calls `work` until it resolves, for at most `ms`: a client reconnecting may fail the calls it had sent. */
async function untilAnswered<T>(work: () => Promise<T>, ms = 10_000): Promise<T> {
  const deadline = performance.now() + ms;
  for (;;) {
    try {
      return await work();
    } catch (error) {
      if (performance.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}

describe('Faults, per client family, on a Redis of this file’s own', () => {
  let server: RedisServerProcess;
  let admin: Redis;
  beforeAll(async () => {
    server = await startRedisServer();
    admin = redisClient(server.url);
    // it reconnects by itself after the restarts below
    admin.on('error', () => {});
  });
  afterAll(async () => {
    admin?.disconnect();
    await server?.stop();
  });

  it.each(CLIENT_FAMILIES)(
    '%s: after Redis restarts empty, the store reloads its script by itself',
    async (family) => {
      const opened = openClient(family, { kind: 'redis', url: server.url });
      await opened.connect();
      try {
        const store = new RedisStore(opened.client, { prefix: uniquePrefix(`restart ${family}`) });
        const bucket = hourly('restart', 5);
        expect(await store.acquire(bucket, 'k', 2)).toEqual({ allowed: true, remaining: 3 });
        await server.restart();
        // Data and script cache are gone: the next answer is a full bucket's, through EVAL.
        expect(await untilAnswered(() => store.acquire(bucket, 'k', 1))).toEqual({ allowed: true, remaining: 4 });
        expect((await scriptCalls(admin)).eval).toBeGreaterThanOrEqual(1);
        expect(await store.acquire(bucket, 'k', 1)).toEqual({ allowed: true, remaining: 3 });
      } finally {
        await opened.close().catch(() => undefined);
      }
    },
  );

  it('node-redis with the offline queue off (the README options): a call while disconnected fails at once', async () => {
    const client = createClient({ url: server.url, disableOfflineQueue: true, socket: { reconnectStrategy: (retries) => Math.min(retries * 50, 200) } });
    client.on('error', () => {});
    await client.connect();
    try {
      const store = new RedisStore(client, { prefix: uniquePrefix('offline') });
      const bucket = hourly('offline', 3);
      expect(await store.acquire(bucket, 'k')).toEqual({ allowed: true, remaining: 2 });
      const lost = new Promise((resolve) => client.once('reconnecting', resolve));
      await server.kill();
      await lost;
      await expect(store.acquire(bucket, 'k')).rejects.toThrow('The client is offline');
      await server.restart();
      expect(await untilAnswered(() => store.acquire(bucket, 'k'))).toEqual({ allowed: true, remaining: 2 });
    } finally {
      await client.close().catch(() => undefined);
      await server.restart();
    }
  });

  it('node-redis with socketTimeout: a call to a hung Redis fails once the socket has been silent that long', async () => {
    // pingInterval below socketTimeout keeps an idle connection from timing out; node-redis's default
    // reconnectStrategy gives up for good after a socket timeout, the README's does not
    const client = createClient({
      url: server.url,
      pingInterval: 100,
      socket: { socketTimeout: 300, reconnectStrategy: (retries) => Math.min(retries * 50, 200) },
    });
    client.on('error', () => {});
    await client.connect();
    try {
      const store = new RedisStore(client, { prefix: uniquePrefix('hung') });
      const bucket = hourly('hung', 3);
      expect(await store.acquire(bucket, 'k')).toEqual({ allowed: true, remaining: 2 });
      await server.pause();
      try {
        await expect(store.acquire(bucket, 'k')).rejects.toThrow(/Socket timeout/i);
      } finally {
        await server.resume();
      }
      // The hung call was sent: Redis ran it when it woke, and it is not sent again.
      expect(await untilAnswered(() => store.acquire(bucket, 'k', 0))).toEqual({ allowed: true, remaining: 1 });
    } finally {
      await client.close().catch(() => undefined);
    }
  });

  it('node-redis: a reply lost with its connection fails the call, which is never sent again', async () => {
    const proxy = await replyDropper(server.port);
    const client = nodeRedisClient(proxy.url);
    await client.connect();
    try {
      const store = new RedisStore(client, { prefix: uniquePrefix('lost reply') });
      const bucket = hourly('lost', 10);
      expect(await store.acquire(bucket, 'k', 1)).toEqual({ allowed: true, remaining: 9 });
      await admin.config('RESETSTAT');
      proxy.dropNextReply();
      await expect(store.acquire(bucket, 'k', 2)).rejects.toThrow();
      // Once reconnected: Redis ran the lost call once (its 2 tokens are gone), and nothing again.
      expect(await store.acquire(bucket, 'k', 0)).toEqual({ allowed: true, remaining: 7 });
      expect(await scriptCalls(admin)).toEqual({ evalsha: 2, eval: 0 });
    } finally {
      await client.close().catch(() => undefined);
      await proxy.close();
    }
  });
});

describe('node-redis Cluster: a reply lost with its connection', () => {
  it('fails the call, which is never sent again: Redis ran it once', async () => {
    const nodes = inject('redisClusterNodes')!;
    // A proxy in front of every master; the cluster reaches each node through its own.
    const proxies = await Promise.all(nodes.map(({ port }) => replyDropper(port)));
    const through = new Map(nodes.map(({ host, port }, i) => [`${host}:${port}`, { host: '127.0.0.1', port: Number(new URL(proxies[i]!.url).port) }]));
    const cluster = createCluster({ rootNodes: proxies.map(({ url }) => ({ url })), nodeAddressMap: (address) => through.get(address) });
    cluster.on('error', () => {});
    await cluster.connect();
    try {
      const store = new RedisStore(cluster, { prefix: uniquePrefix('cluster lost reply') });
      const bucket = hourly('lost', 10);
      expect(await store.acquire(bucket, 'k', 1)).toEqual({ allowed: true, remaining: 9 });
      for (const proxy of proxies) proxy.dropNextReply();
      await expect(store.acquire(bucket, 'k', 2)).rejects.toThrow();
      for (const proxy of proxies) proxy.keepReplies();
      expect(await untilAnswered(() => store.acquire(bucket, 'k', 0))).toEqual({ allowed: true, remaining: 7 });
    } finally {
      await cluster.close().catch(() => undefined);
      await Promise.all(proxies.map((proxy) => proxy.close()));
    }
  });
});
