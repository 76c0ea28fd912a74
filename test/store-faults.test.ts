// A reply lost after Redis ran the script: the connection drops with the
// reply on its way. A client of ioredis's (with its defaults on one Redis,
// and on a Cluster with the README's options too) sends a command again once
// it reconnects, so on ioredis and iovalkey the store runs its scripts on a
// connection of its own that does not; node-redis is used directly: it
// rejects a call whose reply was lost rather than sending it again. On every
// client family, single Redis and Cluster, a store call whose reply is lost
// fails, and was applied once: an acquire takes its cost once, a refund
// gives back once, a reset resets once, a shared call takes each of its
// operations' costs once. Between the store and Redis (each Cluster
// node, through `natMap`) sits a proxy that holds the replies and then cuts
// the connections.
import { Cluster, Redis } from 'ioredis';
import { Cluster as ValkeyCluster, Redis as ValkeyRedis } from 'iovalkey';
import { createClient, createCluster } from 'redis';
import { createClient as createClient5, createCluster as createCluster5 } from 'redis-v5';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Rate } from '../src/rate.js';
import type { RedisStoreClient } from '../src/stores/redis-client.js';
import { RedisStore } from '../src/stores/redis-store.js';
import { TokenBucket } from '../src/token-bucket.js';
// the README's options for a limiter's client
import { clusterOptions as README_CLUSTER, redisOptions as README_REDIS } from './reliability/support/fail-fast.js';
import { uniquePrefix } from './support/clients.js';
import type { FaultProxy } from './support/fault-proxy.js';
import { clusterThroughProxies, startFaultProxy } from './support/fault-proxy.js';
import type { RedisClusterProcess, RedisServerProcess } from './support/redis-server.js';
import { startRedisCluster, startRedisServer } from './support/redis-server.js';

const bucket = new TokenBucket('api', 10, Rate.perHour(1));

let server: RedisServerProcess;
let cluster: RedisClusterProcess;
let proxy: FaultProxy;
let proxies: FaultProxy[];
let natMap: Record<string, { host: string; port: number }>;
let startup: { host: string; port: number }[];
/** Straight to Redis, not through the proxies: what the buckets hold. */
let direct: Redis;
let directCluster: Cluster;
const closers: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  [server, cluster] = await Promise.all([startRedisServer(), startRedisCluster({ masters: 3 })]);
  proxy = await startFaultProxy(server);
  ({ proxies, natMap, startup } = await clusterThroughProxies(cluster.nodes.slice(0, 3)));
  direct = new Redis(server.url);
  directCluster = new Cluster(cluster.nodes.slice(0, 3));
  await Promise.all([direct.ping(), directCluster.ping()]);
}, 90_000);

afterAll(async () => {
  await Promise.all(closers.map((close) => close().catch(() => undefined)));
  direct?.disconnect();
  directCluster?.disconnect();
  await Promise.all([proxy?.close(), ...(proxies ?? []).map((p) => p.close())]);
  await Promise.all([server?.stop(), cluster?.stop()]);
});

type Kind = 'Redis' | 'Redis Cluster';

/** What `ready` needs of an ioredis-style client (ioredis or iovalkey). */
interface Connecting {
  status: string;
  on(event: string, listener: () => void): unknown;
  once(event: string, listener: () => void): unknown;
  disconnect(): void;
}

/** An ioredis-style client, connected; closed after the file. */
async function ready<T extends Connecting>(made: T): Promise<T> {
  made.on('error', () => undefined);
  closers.push(async () => made.disconnect());
  await new Promise<void>((resolve) => (made.status === 'ready' ? resolve() : made.once('ready', () => resolve())));
  return made;
}

async function ioredis(kind: Kind, readme: boolean): Promise<Redis | Cluster> {
  if (kind === 'Redis') return ready(readme ? new Redis(proxy.url, README_REDIS) : new Redis(proxy.url));
  return ready(new Cluster(startup, readme ? { ...README_CLUSTER, natMap } : { natMap }));
}

async function iovalkey(kind: Kind): Promise<RedisStoreClient> {
  return ready(kind === 'Redis' ? new ValkeyRedis(proxy.url) : new ValkeyCluster(startup, { natMap }));
}

async function nodeRedis(kind: Kind, version: 5 | 6 = 6): Promise<RedisStoreClient> {
  const reconnectStrategy = (retries: number) => Math.min(retries * 50, 200);
  const cluster = {
    rootNodes: startup.map(({ host, port }) => ({ url: `redis://${host}:${port}` })),
    nodeAddressMap: natMap,
    defaults: { socket: { reconnectStrategy } },
  };
  const single = { url: proxy.url, socket: { reconnectStrategy } };
  const made =
    version === 5
      ? kind === 'Redis'
        ? createClient5(single)
        : createCluster5(cluster)
      : kind === 'Redis'
        ? createClient(single)
        : createCluster(cluster);
  made.on('error', () => undefined);
  await made.connect();
  closers.push(() => made.close());
  return made;
}

/**
 * Holds every reply while `work` runs, until `applied` says Redis has run it;
 * then cuts the connections, its reply lost. Answers what the call settled
 * with, its error if it failed.
 */
async function lose<T>(kind: Kind, work: () => Promise<T>, applied: () => Promise<boolean>, meanwhile?: () => Promise<unknown>): Promise<T | Error> {
  const through = kind === 'Redis' ? [proxy] : proxies;
  for (const p of through) p.hold();
  const answer = work().catch((error: unknown) => (error instanceof Error ? error : new Error(String(error))));
  const deadline = Date.now() + 10_000;
  while (!(await applied())) {
    if (Date.now() > deadline) throw new Error('the call never reached Redis');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  // before the client can reconnect and send it again
  await meanwhile?.();
  for (const p of through) p.dropHeld();
  return answer;
}

/**
 * A store call that succeeds after the reconnect: by then the client has sent
 * again whatever it was going to (ioredis resends before anything newer).
 */
async function afterReconnect(store: RedisStore): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      await store.acquire(bucket, 'probe', 0);
      return;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}

const readers = new Map<string, RedisStore>();

/** A store straight on Redis, not through the proxies. */
function straight(kind: Kind, prefix: string): RedisStore {
  const id = `${kind} ${prefix}`;
  let reader = readers.get(id);
  if (reader === undefined) {
    reader = new RedisStore(kind === 'Redis' ? direct : directCluster, { prefix });
    readers.set(id, reader);
  }
  return reader;
}

/** Whole tokens the pair's bucket holds, read straight from Redis. */
async function holds(kind: Kind, prefix: string, key: string): Promise<number> {
  const answer = await straight(kind, prefix).acquire(bucket, key, 0);
  return answer.allowed ? answer.remaining : -1;
}

it('the proxy makes ioredis send a command again (what the store must withstand)', async () => {
  const redis = await ioredis('Redis', false);
  const key = `${uniquePrefix('resend')}n`;
  await lose('Redis', () => redis.incr(key), async () => (await direct.get(key)) === '1');
  await redis.ping();
  expect(await direct.get(key)).toBe('2');
});

interface Family {
  /** How the suite names it. */
  name: string;
  kind: Kind;
  /** A client through the proxies, connected. */
  client: () => Promise<RedisStoreClient>;
}

const families: Family[] = [
  { name: 'ioredis defaults', kind: 'Redis', client: () => ioredis('Redis', false) },
  { name: 'ioredis the README options', kind: 'Redis', client: () => ioredis('Redis', true) },
  { name: 'ioredis defaults', kind: 'Redis Cluster', client: () => ioredis('Redis Cluster', false) },
  { name: 'ioredis the README options', kind: 'Redis Cluster', client: () => ioredis('Redis Cluster', true) },
  { name: 'iovalkey', kind: 'Redis', client: () => iovalkey('Redis') },
  { name: 'iovalkey', kind: 'Redis Cluster', client: () => iovalkey('Redis Cluster') },
  { name: 'node-redis', kind: 'Redis', client: () => nodeRedis('Redis') },
  { name: 'node-redis', kind: 'Redis Cluster', client: () => nodeRedis('Redis Cluster') },
  { name: 'node-redis 5', kind: 'Redis', client: () => nodeRedis('Redis', 5) },
  { name: 'node-redis 5', kind: 'Redis Cluster', client: () => nodeRedis('Redis Cluster', 5) },
];

describe.each(families)('RedisStore on $kind with $name: a lost reply is applied once', ({ kind, client }) => {
  /** A store on a client through the proxies, its own connection open and its scripts loaded (a held NOSCRIPT would stall the fallback). */
  async function storeOn(prefix: string): Promise<RedisStore> {
    const store = new RedisStore(await client(), { prefix });
    await store.acquire(bucket, 'probe', 0);
    await store.refund(bucket, 'probe', 0);
    await store.reset(bucket, 'probe');
    return store;
  }

  /** The call failed (the proxy sits on the client's path): its reply was lost, and it was not sent again. */
  function failed(answer: unknown): void {
    expect(answer).toBeInstanceOf(Error);
  }

  it('acquire takes its cost once', async () => {
    const prefix = uniquePrefix('lost acquire');
    const store = await storeOn(prefix);
    failed(await lose(kind, () => store.acquire(bucket, 'alice', 2), async () => (await holds(kind, prefix, 'alice')) === 8));
    await afterReconnect(store);
    expect(await holds(kind, prefix, 'alice')).toBe(8);
  });

  it('an all-or-nothing acquire takes each cost once', async () => {
    const prefix = uniquePrefix('lost acquireAll');
    const store = await storeOn(prefix);
    const other = new TokenBucket('other', 10, Rate.perHour(1));
    const answer = await lose(
      kind,
      () =>
        store.acquireAll([
          { bucket, key: 'alice', cost: 3 },
          { bucket: other, key: 'alice', cost: 1 },
        ]),
      async () => (await holds(kind, prefix, 'alice')) === 7,
    );
    failed(answer);
    await afterReconnect(store);
    expect(await holds(kind, prefix, 'alice')).toBe(7);
  });

  it('a shared call (operations of one tick on one identity) takes each cost once', async () => {
    const prefix = uniquePrefix('lost shared');
    const store = await storeOn(prefix);
    // An acquire that finds nothing in flight is sent at once: the two after it share a call, which loads the shared script.
    await Promise.all([store.acquire(bucket, 'probe', 0), store.acquire(bucket, 'probe', 0), store.acquire(bucket, 'probe', 0)]);
    const answer = await lose(
      kind,
      // the probe goes at once; the three after it share a call
      () =>
        Promise.all([
          store.acquire(bucket, 'probe', 0),
          store.acquire(bucket, 'alice', 2),
          store.acquireAll([{ bucket, key: 'alice', cost: 3 }]),
          store.acquire(bucket, 'alice', 1),
        ]),
      async () => (await holds(kind, prefix, 'alice')) === 4,
    );
    failed(answer);
    await afterReconnect(store);
    expect(await holds(kind, prefix, 'alice')).toBe(4);
  });

  it('refund gives back once', async () => {
    const prefix = uniquePrefix('lost refund');
    const store = await storeOn(prefix);
    await store.acquire(bucket, 'alice', 10);
    failed(await lose(kind, () => store.refund(bucket, 'alice', 5), async () => (await holds(kind, prefix, 'alice')) === 5));
    await afterReconnect(store);
    expect(await holds(kind, prefix, 'alice')).toBe(5);
    // the store still owes nothing more than the 5 it kept
    await store.refund(bucket, 'alice', 10);
    expect(await holds(kind, prefix, 'alice')).toBe(10);
  });

  it('reset resets once: tokens taken after it stay taken', async () => {
    const prefix = uniquePrefix('lost reset');
    const store = await storeOn(prefix);
    await store.acquire(bucket, 'alice', 10);
    let taken: unknown;
    const answer = await lose(
      kind,
      () => store.reset(bucket, 'alice'),
      async () => (await holds(kind, prefix, 'alice')) === 10,
      async () => (taken = await straight(kind, prefix).acquire(bucket, 'alice', 4)),
    );
    failed(answer);
    expect(taken).toEqual({ allowed: true, remaining: 6 });
    await afterReconnect(store);
    expect(await holds(kind, prefix, 'alice')).toBe(6);
  });
});
