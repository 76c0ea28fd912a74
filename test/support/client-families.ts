// A client of each library RedisStore accepts, to run one store suite over
// all of them: ioredis, node-redis v5 and iovalkey, single Redis and Cluster.
// Options favour failing fast, as in clients.ts.
import { Cluster as ValkeyCluster, Redis as ValkeyRedis } from 'iovalkey';
import { createClient, createCluster } from 'redis';
import { afterAll, beforeAll, inject } from 'vitest';
import type { RedisStoreClient } from '../../src/stores/redis-client.js';
import { RedisStore } from '../../src/stores/redis-store.js';
import type { RedisStoreOptions } from '../../src/stores/redis-store.js';
import type { ClusterNodeAddress } from './clients.js';
import { clusterClient, redisClient } from './clients.js';

export const CLIENT_FAMILIES = ['ioredis', 'node-redis', 'iovalkey'] as const;
export type ClientFamily = (typeof CLIENT_FAMILIES)[number];

export type Target = { kind: 'redis'; url: string } | { kind: 'cluster'; nodes: readonly ClusterNodeAddress[] | null };

/** A node-redis client, not yet connected; reconnects quickly after a restart. */
export function nodeRedisClient(url: string) {
  const client = createClient({ url, socket: { connectTimeout: 2_000, reconnectStrategy: (retries) => Math.min(retries * 50, 500) } });
  // A client without an error listener throws on every reconnect.
  client.on('error', () => {});
  return client;
}

/** A node-redis cluster, not yet connected. */
export function nodeRedisCluster(nodes: readonly ClusterNodeAddress[]) {
  const cluster = createCluster({
    rootNodes: nodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` })),
    defaults: { socket: { connectTimeout: 2_000, reconnectStrategy: (retries) => Math.min(retries * 50, 500) } },
  });
  cluster.on('error', () => {});
  return cluster;
}

function clusterNodes(nodes: readonly ClusterNodeAddress[] | null): readonly ClusterNodeAddress[] {
  // clusterClient throws with instructions when no cluster was provided.
  if (nodes === null || nodes.length === 0) clusterClient(nodes);
  return nodes!;
}

/**
 * A client of `family` to `target`, connected before the enclosing suite's
 * tests and closed after them: call it while a describe block is collected.
 */
export function familyClient(family: ClientFamily, target: Target): RedisStoreClient {
  let client: RedisStoreClient;
  let connect: () => Promise<unknown> = async () => undefined;
  let close: () => Promise<unknown>;
  if (family === 'ioredis') {
    const ioredis = target.kind === 'redis' ? redisClient(target.url) : clusterClient(target.nodes);
    client = ioredis;
    close = () => ioredis.quit();
  } else if (family === 'iovalkey') {
    const valkey =
      target.kind === 'redis'
        ? new ValkeyRedis(target.url, { connectTimeout: 2_000, maxRetriesPerRequest: 2, retryStrategy: (times) => Math.min(times * 50, 500) })
        : new ValkeyCluster(
            clusterNodes(target.nodes).map(({ host, port }) => ({ host, port })),
            { slotsRefreshTimeout: 2_000, redisOptions: { connectTimeout: 2_000, maxRetriesPerRequest: 2 } },
          );
    client = valkey;
    close = () => valkey.quit();
  } else {
    const node = target.kind === 'redis' ? nodeRedisClient(target.url) : nodeRedisCluster(clusterNodes(target.nodes));
    client = node;
    connect = () => node.connect();
    close = () => node.close();
  }
  beforeAll(connect);
  afterAll(async () => {
    await close().catch(() => undefined);
  });
  return client;
}

/** The shared Redis or Cluster of the global setup, as a `Target`. */
export function sharedTarget(kind: 'redis' | 'cluster'): Target {
  return kind === 'redis' ? { kind, url: inject('redisUrl') } : { kind, nodes: inject('redisClusterNodes') };
}

/** A store on a client of `family` to the shared Redis or Cluster; call it while a describe block is collected. */
export function familyStore(family: ClientFamily, kind: 'redis' | 'cluster', options: RedisStoreOptions = {}): RedisStore {
  return new RedisStore(familyClient(family, sharedTarget(kind)), options);
}
