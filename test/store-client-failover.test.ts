// A manual failover (CLUSTER FAILOVER on a replica) of the master holding a
// bucket, on a cluster of this file's own, with each client library: the
// store follows the slot to the new master, loads its script there, and
// has lost nothing and taken nothing twice. And a master hung (SIGSTOP)
// in the middle of an operation across slots, on node-redis.
import { Redis } from 'ioredis';
import { createCluster } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Rate } from '../src/rate.js';
import { RedisStore } from '../src/stores/redis-store.js';
import { TokenBucket } from '../src/token-bucket.js';
import { CLIENT_FAMILIES, openClient } from './support/client-families.js';
import { uniquePrefix } from './support/clients.js';
import { startRedisCluster } from './support/redis-server.js';
import type { RedisClusterProcess } from './support/redis-server.js';

let cluster: RedisClusterProcess;
/** A master per client family: each fails over a master of its own. */
const MASTERS = CLIENT_FAMILIES.length;

beforeAll(async () => {
  cluster = await startRedisCluster({ masters: MASTERS, replicasPerMaster: 1 });
}, 60_000);

afterAll(async () => {
  await cluster?.stop();
});

/** Runs `work` on a plain connection to one node. */
async function onNode<T>(node: { host: string; port: number }, work: (redis: Redis) => Promise<T>): Promise<T> {
  const redis = new Redis({ ...node, maxRetriesPerRequest: 0, retryStrategy: () => null });
  redis.on('error', () => {});
  try {
    return await work(redis);
  } finally {
    redis.disconnect();
  }
}

/** The master now serving `key`. */
async function masterOf(key: string): Promise<{ host: string; port: number }> {
  return onNode(cluster.nodes[0]!, async (redis) => {
    const slot = Number(await redis.call('CLUSTER', 'KEYSLOT', key));
    const ranges = (await redis.call('CLUSTER', 'SLOTS')) as [number, number, [string, number, string]][];
    const owner = ranges.find(([from, to]) => from <= slot && slot <= to);
    if (owner === undefined) throw new Error(`no master serves slot ${slot}`);
    return { host: owner[2][0], port: owner[2][1] };
  });
}

/** A replica, in sync, of the master now serving `key`. */
async function replicaOf(key: string): Promise<{ host: string; port: number }> {
  return onNode(cluster.nodes[0]!, async (redis) => {
    const slot = Number(await redis.call('CLUSTER', 'KEYSLOT', key));
    const ranges = (await redis.call('CLUSTER', 'SLOTS')) as [number, number, [string, number, string]][];
    const owner = ranges.find(([from, to]) => from <= slot && slot <= to);
    if (owner === undefined) throw new Error(`no master serves slot ${slot}`);
    const [line] = (await redis.call('CLUSTER', 'REPLICAS', owner[2][2])) as string[];
    const match = /^\S+ (.+):(\d+)@/.exec(line ?? '');
    if (match === null) throw new Error(`no replica for slot ${slot}: ${String(line)}`);
    return { host: match[1]!, port: Number(match[2]) };
  }).then(async (replica) => {
    // A manual failover starts only from a replica in sync with its master.
    const info = await onNode(replica, (redis) => redis.info('replication'));
    if (!info.includes('master_link_status:up')) throw new Error('the replica is not in sync yet');
    return replica;
  });
}

/** Calls `work` until it resolves, for at most `ms`: clients may fail calls while they follow the slot. */
async function untilAnswered<T>(work: () => Promise<T>, ms = 15_000): Promise<T> {
  const deadline = performance.now() + ms;
  for (;;) {
    try {
      return await work();
    } catch (error) {
      if (performance.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }
}

/**
 * An identity whose buckets live on the `index`-th master (the cluster splits
 * the slots evenly, in order): each case fails over a master of its own, since
 * masters refuse a second failover of one master's slots for a while.
 */
async function identityOnMaster(store: RedisStore, bucket: TokenBucket, index: number): Promise<string> {
  return onNode(cluster.nodes[0]!, async (redis) => {
    for (let i = 0; ; i++) {
      const slot = Number(await redis.call('CLUSTER', 'KEYSLOT', store.keyFor(bucket, `user-${i}`)));
      if (Math.floor((slot * MASTERS) / 16_384) === index) return `user-${i}`;
    }
  });
}

describe('RedisStore across a manual Cluster failover', () => {
  it.each(CLIENT_FAMILIES.map((family, index) => [family, index] as const))('%s: follows the slot to the new master, exact', async (family, index) => {
    const opened = openClient(family, { kind: 'cluster', nodes: cluster.nodes });
    await opened.connect();
    try {
      const store = new RedisStore(opened.client, { prefix: uniquePrefix(`failover ${family}`) });
      const bucket = new TokenBucket('failover', 10, Rate.perHour(1));
      const k = await identityOnMaster(store, bucket, index);
      expect(await store.acquire(bucket, k, 3)).toEqual({ allowed: true, remaining: 7 });
      const replica = await untilAnswered(() => replicaOf(store.keyFor(bucket, k)));
      // Without FORCE the replica first catches up with its master: no write is lost.
      await onNode(replica, (redis) => redis.call('CLUSTER', 'FAILOVER'));
      await untilAnswered(async () => {
        const role = await onNode(replica, (redis) => redis.info('replication'));
        if (!role.includes('role:master')) throw new Error('the replica has not taken over yet');
      });
      await cluster.waitUntilHealthy();
      expect(await untilAnswered(() => store.acquire(bucket, k, 1))).toEqual({ allowed: true, remaining: 6 });
      expect(await store.acquire(bucket, k, 6)).toEqual({ allowed: true, remaining: 0 });
    } finally {
      await opened.close().catch(() => undefined);
    }
  });
});

describe('RedisStore on a node-redis Cluster whose master hangs in the middle of an operation', () => {
  it('gives the slots taken back once when a later slot times out (socketTimeout)', async () => {
    const client = createCluster({
      rootNodes: cluster.nodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` })),
      defaults: { pingInterval: 100, socket: { socketTimeout: 300, reconnectStrategy: (retries) => Math.min(retries * 50, 200) } },
    });
    client.on('error', () => {});
    await client.connect();
    try {
      const store = new RedisStore(client, { prefix: uniquePrefix('hung master') });
      const api = new TokenBucket('api', 10, Rate.perHour(1));
      const holds = async (key: string) => {
        const answer = await store.acquire(api, key, 0);
        return answer.allowed ? answer.remaining : -1;
      };
      const [alice, bob, carol] = await Promise.all([0, 1, 2].map((index) => identityOnMaster(store, api, index)));
      await store.acquire(api, alice!, 4); // 6 left
      await store.acquire(api, bob!, 1); // 9 left
      const { port } = await masterOf(store.keyFor(api, carol!));
      const hung = cluster.servers.find((server) => server.port === port)!;
      await hung.pause();
      try {
        await expect(
          store.acquireAll([
            { bucket: api, key: alice!, cost: 3 },
            { bucket: api, key: bob!, cost: 3 },
            { bucket: api, key: carol!, cost: 1 },
          ]),
        ).rejects.toThrow(/Socket timeout/i);
      } finally {
        await hung.resume();
        await cluster.waitUntilHealthy();
      }
      expect(await holds(alice!)).toBe(6);
      expect(await holds(bob!)).toBe(9);
    } finally {
      await client.close().catch(() => undefined);
    }
  });
});
