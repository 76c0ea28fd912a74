// A reply lost after Redis ran the script, on the other client libraries:
// iovalkey (an ioredis fork: the store runs its scripts on a connection of
// its own, as on ioredis) and node-redis (used directly: it rejects a call
// whose reply was lost rather than sending it again). On each, single Redis
// and Cluster, every store call is applied at most once. Between the store
// and Redis sits the proxy of store-faults.test.ts.
import { Cluster, Redis } from 'ioredis';
import { Cluster as ValkeyCluster, Redis as ValkeyRedis } from 'iovalkey';
import { createClient, createCluster } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Rate } from '../src/rate.js';
import type { RedisStoreClient } from '../src/stores/redis-client.js';
import { RedisStore } from '../src/stores/redis-store.js';
import { TokenBucket } from '../src/token-bucket.js';
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

type Family = 'iovalkey' | 'node-redis';
type Kind = 'Redis' | 'Redis Cluster';

/** A client of `family` through the proxies, connected. */
async function client(family: Family, kind: Kind): Promise<RedisStoreClient> {
  if (family === 'iovalkey') {
    const made = kind === 'Redis' ? new ValkeyRedis(proxy.url) : new ValkeyCluster(startup, { natMap });
    made.on('error', () => undefined);
    closers.push(async () => made.disconnect());
    await new Promise<void>((resolve) => (made.status === 'ready' ? resolve() : made.once('ready', () => resolve())));
    return made;
  }
  const reconnectStrategy = (retries: number) => Math.min(retries * 50, 200);
  const made =
    kind === 'Redis'
      ? createClient({ url: proxy.url, socket: { reconnectStrategy } })
      : createCluster({
          rootNodes: startup.map(({ host, port }) => ({ url: `redis://${host}:${port}` })),
          nodeAddressMap: natMap,
          defaults: { socket: { reconnectStrategy } },
        });
  made.on('error', () => undefined);
  await made.connect();
  closers.push(() => made.close());
  return made;
}

async function lose<T>(kind: Kind, work: () => Promise<T>, applied: () => Promise<boolean>, meanwhile?: () => Promise<unknown>): Promise<T | Error> {
  const through = kind === 'Redis' ? [proxy] : proxies;
  for (const p of through) p.hold();
  const answer = work().catch((error: unknown) => (error instanceof Error ? error : new Error(String(error))));
  const deadline = Date.now() + 10_000;
  while (!(await applied())) {
    if (Date.now() > deadline) throw new Error('the call never reached Redis');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  await meanwhile?.();
  for (const p of through) p.dropHeld();
  return answer;
}

async function storeOn(family: Family, kind: Kind, prefix: string): Promise<RedisStore> {
  const store = new RedisStore(await client(family, kind), { prefix });
  await store.acquire(bucket, 'probe', 0);
  await store.refund(bucket, 'probe', 0);
  await store.reset(bucket, 'probe');
  return store;
}

/** A store call that succeeds after the reconnect: by then the client has sent again whatever it was going to. */
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
function straight(kind: Kind, prefix: string): RedisStore {
  const id = `${kind} ${prefix}`;
  let reader = readers.get(id);
  if (reader === undefined) {
    reader = new RedisStore(kind === 'Redis' ? direct : directCluster, { prefix });
    readers.set(id, reader);
  }
  return reader;
}

async function holds(kind: Kind, prefix: string, key: string): Promise<number> {
  const answer = await straight(kind, prefix).acquire(bucket, key, 0);
  return answer.allowed ? answer.remaining : -1;
}

describe.each([
  ['iovalkey', 'Redis'],
  ['iovalkey', 'Redis Cluster'],
  ['node-redis', 'Redis'],
  ['node-redis', 'Redis Cluster'],
] as [Family, Kind][])('RedisStore on a %s client to %s: a lost reply is applied once', (family, kind) => {
  it('acquire takes its cost once', async () => {
    const prefix = uniquePrefix('lost acquire');
    const store = await storeOn(family, kind, prefix);
    // the reply is lost: the call fails (the proxy sits on the client's path), and is not sent again
    expect(await lose(kind, () => store.acquire(bucket, 'alice', 2), async () => (await holds(kind, prefix, 'alice')) === 8)).toBeInstanceOf(Error);
    await afterReconnect(store);
    expect(await holds(kind, prefix, 'alice')).toBe(8);
  });

  it('an all-or-nothing acquire takes each cost once', async () => {
    const prefix = uniquePrefix('lost acquireAll');
    const store = await storeOn(family, kind, prefix);
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
    expect(answer).toBeInstanceOf(Error);
    await afterReconnect(store);
    expect(await holds(kind, prefix, 'alice')).toBe(7);
  });

  it('a shared call (operations of one tick on one identity) takes each cost once', async () => {
    const prefix = uniquePrefix('lost shared');
    const store = await storeOn(family, kind, prefix);
    await Promise.all([store.acquire(bucket, 'probe', 0), store.acquire(bucket, 'probe', 0)]); // loads the shared script
    const answer = await lose(
      kind,
      () => Promise.all([store.acquire(bucket, 'alice', 2), store.acquireAll([{ bucket, key: 'alice', cost: 3 }]), store.acquire(bucket, 'alice', 1)]),
      async () => (await holds(kind, prefix, 'alice')) === 4,
    );
    expect(answer).toBeInstanceOf(Error);
    await afterReconnect(store);
    expect(await holds(kind, prefix, 'alice')).toBe(4);
  });

  it('refund gives back once', async () => {
    const prefix = uniquePrefix('lost refund');
    const store = await storeOn(family, kind, prefix);
    await store.acquire(bucket, 'alice', 10);
    expect(await lose(kind, () => store.refund(bucket, 'alice', 5), async () => (await holds(kind, prefix, 'alice')) === 5)).toBeInstanceOf(Error);
    await afterReconnect(store);
    expect(await holds(kind, prefix, 'alice')).toBe(5);
    // the store still owes nothing more than the 5 it kept
    await store.refund(bucket, 'alice', 10);
    expect(await holds(kind, prefix, 'alice')).toBe(10);
  });

  it('reset resets once: tokens taken after it stay taken', async () => {
    const prefix = uniquePrefix('lost reset');
    const store = await storeOn(family, kind, prefix);
    await store.acquire(bucket, 'alice', 10);
    let taken: unknown;
    const answer = await lose(
      kind,
      () => store.reset(bucket, 'alice'),
      async () => (await holds(kind, prefix, 'alice')) === 10,
      async () => (taken = await straight(kind, prefix).acquire(bucket, 'alice', 4)),
    );
    expect(answer).toBeInstanceOf(Error);
    expect(taken).toEqual({ allowed: true, remaining: 6 });
    await afterReconnect(store);
    expect(await holds(kind, prefix, 'alice')).toBe(6);
  });
});
