// A client of each library RedisStore accepts, to run one store suite over
// all of them: ioredis, node-redis 6 and 5 and iovalkey, single Redis and
// Cluster. Options favour failing fast, as in clients.ts.
import { Cluster as ValkeyCluster, Redis as ValkeyRedis } from 'iovalkey';
import { createClient, createCluster } from 'redis';
import { createClient as createClient5, createCluster as createCluster5 } from 'redis-v5';
import { afterAll, beforeAll, inject } from 'vitest';
import type { RedisStoreClient } from '../../src/stores/redis-client.js';
import { RedisStore } from '../../src/stores/redis-store.js';
import type { RedisStoreOptions } from '../../src/stores/redis-store.js';
import type { ClusterNodeAddress } from './clients.js';
import { clusterClient, redisClient } from './clients.js';

/** `node-redis` is node-redis 6 (the `redis` package), `node-redis-5` node-redis 5 (`redis-v5`). */
export const CLIENT_FAMILIES = ['ioredis', 'node-redis', 'node-redis-5', 'iovalkey'] as const;
export type ClientFamily = (typeof CLIENT_FAMILIES)[number];

export type Target = { kind: 'redis'; url: string } | { kind: 'cluster'; nodes: readonly ClusterNodeAddress[] | null };

const socket = { connectTimeout: 2_000, reconnectStrategy: (retries: number) => Math.min(retries * 50, 500) };

/** A node-redis 6 client, not yet connected; reconnects quickly after a restart. */
export function nodeRedisClient(url: string) {
  const client = createClient({ url, socket });
  // A client without an error listener throws on every reconnect.
  client.on('error', () => {});
  return client;
}

const rootNodes = (nodes: readonly ClusterNodeAddress[]) => nodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` }));

/** A node-redis 6 cluster, not yet connected. */
export function nodeRedisCluster(nodes: readonly ClusterNodeAddress[]) {
  const cluster = createCluster({ rootNodes: rootNodes(nodes), defaults: { socket } });
  cluster.on('error', () => {});
  return cluster;
}

/** A node-redis 5 client or cluster, not yet connected. */
function nodeRedis5(target: Target): OpenedClient {
  const client = target.kind === 'redis' ? createClient5({ url: target.url, socket }) : createCluster5({ rootNodes: rootNodes(clusterNodes(target.nodes)), defaults: { socket } });
  client.on('error', () => {});
  return { client, connect: () => client.connect(), close: () => client.close() };
}

/** Whether `family` is a node-redis (of either version). */
export const isNodeRedis = (family: ClientFamily): boolean => family === 'node-redis' || family === 'node-redis-5';

function clusterNodes(nodes: readonly ClusterNodeAddress[] | null): readonly ClusterNodeAddress[] {
  // clusterClient throws with instructions when no cluster was provided.
  if (nodes === null || nodes.length === 0) clusterClient(nodes);
  return nodes!;
}

export interface OpenedClient {
  readonly client: RedisStoreClient;
  /** Resolves once the client is ready (node-redis needs `connect()`; ioredis and iovalkey connect by themselves). */
  connect(): Promise<unknown>;
  close(): Promise<unknown>;
}

/** A client of `family` to `target`, not yet connected. */
export function openClient(family: ClientFamily, target: Target): OpenedClient {
  if (family === 'ioredis') {
    const client = target.kind === 'redis' ? redisClient(target.url) : clusterClient(target.nodes);
    return { client, connect: async () => undefined, close: () => client.quit() };
  }
  if (family === 'iovalkey') {
    const client =
      target.kind === 'redis'
        ? new ValkeyRedis(target.url, { connectTimeout: 2_000, maxRetriesPerRequest: 2, retryStrategy: (times) => Math.min(times * 50, 500) })
        : new ValkeyCluster(
            clusterNodes(target.nodes).map(({ host, port }) => ({ host, port })),
            { slotsRefreshTimeout: 2_000, redisOptions: { connectTimeout: 2_000, maxRetriesPerRequest: 2 } },
          );
    return { client, connect: async () => undefined, close: () => client.quit() };
  }
  if (family === 'node-redis-5') return nodeRedis5(target);
  const client = target.kind === 'redis' ? nodeRedisClient(target.url) : nodeRedisCluster(clusterNodes(target.nodes));
  return { client, connect: () => client.connect(), close: () => client.close() };
}

/**
 * A client of `family` to `target`, connected before the enclosing suite's
 * tests and closed after them: call it while a describe block is collected.
 */
export function familyClient(family: ClientFamily, target: Target): RedisStoreClient {
  const opened = openClient(family, target);
  beforeAll(opened.connect);
  afterAll(async () => {
    await opened.close().catch(() => undefined);
  });
  return opened.client;
}

/** The shared Redis or Cluster of the global setup, as a `Target`. */
export function sharedTarget(kind: 'redis' | 'cluster'): Target {
  return kind === 'redis' ? { kind, url: inject('redisUrl') } : { kind, nodes: inject('redisClusterNodes') };
}

/** A store on a client of `family` to the shared Redis or Cluster; call it while a describe block is collected. */
export function familyStore(family: ClientFamily, kind: 'redis' | 'cluster', options: RedisStoreOptions = {}): RedisStore {
  return new RedisStore(familyClient(family, sharedTarget(kind)), options);
}
