// A reply lost after Redis ran the script: the connection drops with the
// reply on its way, and ioredis (with its defaults on one Redis, and on a
// Cluster with the README's options too) sends the command again once it
// reconnects. Every store call is applied at most once anyway: an acquire
// takes its cost once, a refund gives back once, a reset resets once.
// Between the store and Redis (each Cluster node, through `natMap`) sits a
// proxy that holds the replies and then cuts the connections.
import type { ClusterOptions, RedisOptions } from 'ioredis';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Rate } from '../src/rate.js';
import { RedisStore } from '../src/stores/redis-store.js';
import { TokenBucket } from '../src/token-bucket.js';
import { uniquePrefix } from './support/clients.js';
import type { FaultProxy } from './support/fault-proxy.js';
import { clusterThroughProxies, startFaultProxy } from './support/fault-proxy.js';
import type { RedisClusterProcess, RedisServerProcess } from './support/redis-server.js';
import { startRedisCluster, startRedisServer } from './support/redis-server.js';

/** The README's options for a limiter's client. */
const README_REDIS = {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
  connectTimeout: 500,
  retryStrategy: (times: number) => Math.min(times * 50, 200),
} satisfies RedisOptions;
const README_CLUSTER = {
  enableOfflineQueue: false,
  clusterRetryStrategy: (times) => Math.min(times * 50, 200),
  retryDelayOnFailover: 50,
  retryDelayOnClusterDown: 50,
  retryDelayOnTryAgain: 50,
  slotsRefreshTimeout: 500,
  redisOptions: { connectTimeout: 500, maxRetriesPerRequest: 0 },
} satisfies ClusterOptions;

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
const opened: (Redis | Cluster)[] = [];

beforeAll(async () => {
  [server, cluster] = await Promise.all([startRedisServer(), startRedisCluster({ masters: 3 })]);
  proxy = await startFaultProxy(server);
  ({ proxies, natMap, startup } = await clusterThroughProxies(cluster.nodes.slice(0, 3)));
  direct = new Redis(server.url);
  directCluster = new Cluster(cluster.nodes.slice(0, 3));
  await Promise.all([direct.ping(), directCluster.ping()]);
}, 90_000);

afterAll(async () => {
  for (const client of opened) client.disconnect();
  direct?.disconnect();
  directCluster?.disconnect();
  await Promise.all([proxy?.close(), ...(proxies ?? []).map((p) => p.close())]);
  await Promise.all([server?.stop(), cluster?.stop()]);
});

type Setup = 'defaults' | 'the README options';
type Kind = 'Redis' | 'Redis Cluster';

async function client(kind: Kind, setup: Setup): Promise<Redis | Cluster> {
  const made =
    kind === 'Redis'
      ? setup === 'defaults'
        ? new Redis(proxy.url)
        : new Redis(proxy.url, README_REDIS)
      : new Cluster(startup, setup === 'defaults' ? { natMap } : { ...README_CLUSTER, natMap });
  made.on('error', () => undefined);
  opened.push(made);
  await new Promise<void>((resolve) => (made.status === 'ready' ? resolve() : made.once('ready', () => resolve())));
  return made;
}

/**
 * Holds every reply while `work` runs, until `applied` says Redis has run it;
 * then cuts the connections, its reply lost.
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
  // before ioredis can reconnect and send it again
  await meanwhile?.();
  for (const p of through) p.dropHeld();
  return answer;
}

/** A store on a client through the proxies, its own connection open and its scripts loaded (a held NOSCRIPT would stall the fallback). */
async function storeOn(kind: Kind, setup: Setup, prefix: string): Promise<RedisStore> {
  const store = new RedisStore(await client(kind, setup), { prefix });
  await store.acquire(bucket, 'probe', 0);
  await store.refund(bucket, 'probe', 0);
  await store.reset(bucket, 'probe');
  return store;
}

/**
 * A store call that succeeds after the reconnect: by then ioredis has sent
 * again whatever it was going to (it resends before anything newer).
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
  const reader = straight(kind, prefix);
  const answer = await reader.acquire(bucket, key, 0);
  return answer.allowed ? answer.remaining : -1;
}

it('the proxy makes ioredis send a command again (what the store must withstand)', async () => {
  const redis = await client('Redis', 'defaults');
  const key = `${uniquePrefix('resend')}n`;
  await lose('Redis', () => redis.incr(key), async () => (await direct.get(key)) === '1');
  await redis.ping();
  expect(await direct.get(key)).toBe('2');
});

describe.each([
  ['Redis', 'defaults'],
  ['Redis', 'the README options'],
  ['Redis Cluster', 'defaults'],
  ['Redis Cluster', 'the README options'],
] as [Kind, Setup][])('RedisStore on %s with ioredis %s: a lost reply is applied once', (kind, setup) => {
  it('acquire takes its cost once', async () => {
    const prefix = uniquePrefix('lost acquire');
    const store = await storeOn(kind, setup, prefix);
    await lose(kind, () => store.acquire(bucket, 'alice', 2), async () => (await holds(kind, prefix, 'alice')) === 8);
    await afterReconnect(store);
    expect(await holds(kind, prefix, 'alice')).toBe(8);
  });

  it('an all-or-nothing acquire takes each cost once', async () => {
    const prefix = uniquePrefix('lost acquireAll');
    const store = await storeOn(kind, setup, prefix);
    const other = new TokenBucket('other', 10, Rate.perHour(1));
    await lose(
      kind,
      () =>
        store.acquireAll([
          { bucket, key: 'alice', cost: 3 },
          { bucket: other, key: 'alice', cost: 1 },
        ]),
      async () => (await holds(kind, prefix, 'alice')) === 7,
    );
    await afterReconnect(store);
    expect(await holds(kind, prefix, 'alice')).toBe(7);
  });

  it('refund gives back once', async () => {
    const prefix = uniquePrefix('lost refund');
    const store = await storeOn(kind, setup, prefix);
    await store.acquire(bucket, 'alice', 10);
    await lose(kind, () => store.refund(bucket, 'alice', 5), async () => (await holds(kind, prefix, 'alice')) === 5);
    await afterReconnect(store);
    expect(await holds(kind, prefix, 'alice')).toBe(5);
    // the store still owes nothing more than the 5 it kept
    await store.refund(bucket, 'alice', 10);
    expect(await holds(kind, prefix, 'alice')).toBe(10);
  });

  it('reset resets once: tokens taken after it stay taken', async () => {
    const prefix = uniquePrefix('lost reset');
    const store = await storeOn(kind, setup, prefix);
    await store.acquire(bucket, 'alice', 10);
    let taken: unknown;
    await lose(
      kind,
      () => store.reset(bucket, 'alice'),
      async () => (await holds(kind, prefix, 'alice')) === 10,
      async () => (taken = await straight(kind, prefix).acquire(bucket, 'alice', 4)),
    );
    expect(taken).toEqual({ allowed: true, remaining: 6 });
    await afterReconnect(store);
    expect(await holds(kind, prefix, 'alice')).toBe(6);
  });
});
