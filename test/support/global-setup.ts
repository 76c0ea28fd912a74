// Decides, once per run, which Redis and which Redis Cluster the tests use,
// and hands them to test files through `inject()`.
//
// Standalone Redis, first that works:
//   1. REDIS_URL
//   2. a testcontainers Redis, when a container runtime answers
//   3. redis-server from PATH
//   4. otherwise the run fails at once
// Redis Cluster: REDIS_CLUSTER_NODES (host:port,...) or 3 masters started from
// redis-server; null when neither is possible (cluster tests then fail).
import { existsSync, readFileSync } from 'node:fs';
import { homedir, userInfo } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import type * as Testcontainers from 'testcontainers';
import type { TestProject } from 'vitest/node';
import { findRedisServerBinary, startRedisCluster, startRedisServer } from './redis-server.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** URL of a standalone Redis shared by all test files; isolate keys with `uniquePrefix()`. */
    redisUrl: string;
    /** Seed nodes of a 3-master Redis Cluster, or null when none could be provided. */
    redisClusterNodes: { host: string; port: number }[] | null;
  }
}

const REDIS_IMAGE = 'redis:7.2-alpine';
const RUNTIME_PROBE_TIMEOUT_MS = 3_000;

type Teardown = () => Promise<void>;

interface Standalone {
  url: string;
  description: string;
  teardown: Teardown;
}

interface ClusterChoice {
  nodes: { host: string; port: number }[] | null;
  description: string;
  teardown: Teardown;
}

export default async function setup(project: TestProject): Promise<Teardown> {
  const started = Date.now();
  const [standalone, cluster] = await Promise.allSettled([chooseStandalone(), chooseCluster()]);
  const teardowns: Teardown[] = [];
  if (standalone.status === 'fulfilled') teardowns.push(standalone.value.teardown);
  if (cluster.status === 'fulfilled') teardowns.push(cluster.value.teardown);
  const teardown = async () => {
    await Promise.allSettled(teardowns.map((t) => t()));
  };
  if (standalone.status === 'rejected' || cluster.status === 'rejected') {
    await teardown();
    throw standalone.status === 'rejected' ? standalone.reason : (cluster as PromiseRejectedResult).reason;
  }

  project.provide('redisUrl', standalone.value.url);
  project.provide('redisClusterNodes', cluster.value.nodes);
  console.log(`[redis] ${standalone.value.description}; cluster: ${cluster.value.description} (ready in ${Date.now() - started} ms)`);
  return teardown;
}

// ---------------------------------------------------------------- standalone

async function chooseStandalone(): Promise<Standalone> {
  const fromEnv = process.env['REDIS_URL'];
  if (fromEnv) {
    const version = await redisVersion(fromEnv, `REDIS_URL=${fromEnv}`);
    return { url: fromEnv, description: `Redis ${version} from REDIS_URL (${redact(fromEnv)})`, teardown: async () => {} };
  }

  const container = await tryTestcontainers();
  if (container !== undefined) return container;

  if (findRedisServerBinary() !== null) {
    const server = await startRedisServer();
    const version = await redisVersion(server.url, server.url);
    return {
      url: server.url,
      description: `redis-server ${version} started from ${findRedisServerBinary()} at ${server.url}`,
      teardown: () => server.stop(),
    };
  }

  throw new Error(
    'No Redis for the tests: set REDIS_URL=redis://host:port, or install redis-server ' +
      '(`apt-get install -y redis-server`, `brew install redis`), or start Docker so testcontainers can run Redis.',
  );
}

/** Undefined (quietly) when no container runtime is in sight or it does not answer fast. */
async function tryTestcontainers(): Promise<Standalone | undefined> {
  if (!containerRuntimeMayExist()) return undefined;
  let testcontainers: typeof Testcontainers;
  try {
    testcontainers = await import('testcontainers');
  } catch (error) {
    // testcontainers 12 needs Node >= 22.22 (its undici uses zlib zstd); on older Node it cannot load.
    console.warn(`[redis] not using testcontainers: it does not load on Node ${process.versions.node} (${(error as Error).message})`);
    return undefined;
  }
  try {
    await withTimeout(testcontainers.getContainerRuntimeClient(), RUNTIME_PROBE_TIMEOUT_MS);
  } catch (error) {
    console.warn(`[redis] not using testcontainers: no container runtime answered (${(error as Error).message})`);
    return undefined;
  }
  try {
    const { RedisContainer } = await import('@testcontainers/redis');
    const container = await new RedisContainer(REDIS_IMAGE).start();
    const url = container.getConnectionUrl();
    const version = await redisVersion(url, url);
    return {
      url,
      description: `Redis ${version} in a testcontainers container (${REDIS_IMAGE}) at ${url}`,
      teardown: async () => {
        await container.stop();
      },
    };
  } catch (error) {
    console.warn(`[redis] testcontainers could not start ${REDIS_IMAGE}: ${(error as Error).message}; trying redis-server`);
    return undefined;
  }
}

/** Mirrors where testcontainers looks, without loading it: env, its properties file, the usual sockets. */
function containerRuntimeMayExist(): boolean {
  if (process.env['DOCKER_HOST'] || process.env['TESTCONTAINERS_HOST_OVERRIDE']) return true;
  const properties = join(homedir(), '.testcontainers.properties');
  if (existsSync(properties) && /^\s*(docker\.host|tc\.host)\s*=/m.test(readFileSync(properties, 'utf8'))) return true;
  const xdg = process.env['XDG_RUNTIME_DIR'];
  const sockets = [
    '/var/run/docker.sock',
    join(homedir(), '.docker', 'run', 'docker.sock'),
    join(homedir(), '.docker', 'desktop', 'docker.sock'),
    join('/run', 'user', String(userInfo().uid), 'docker.sock'),
    ...(xdg ? [join(xdg, 'docker.sock')] : []),
  ];
  return sockets.some((socket) => existsSync(socket));
}

// ---------------------------------------------------------------- cluster

async function chooseCluster(): Promise<ClusterChoice> {
  const fromEnv = process.env['REDIS_CLUSTER_NODES'];
  if (fromEnv) {
    const nodes = parseClusterNodes(fromEnv);
    await checkClusterOk(nodes[0]!, fromEnv);
    return { nodes, description: `REDIS_CLUSTER_NODES (${fromEnv})`, teardown: async () => {} };
  }
  if (findRedisServerBinary() === null) {
    console.warn(
      '[redis] no Redis Cluster: redis-server is not installed and REDIS_CLUSTER_NODES is not set; cluster tests will fail. ' +
        'Install redis-server (`apt-get install -y redis-server`) or set REDIS_CLUSTER_NODES=host:port,...',
    );
    return { nodes: null, description: 'none (cluster tests will fail)', teardown: async () => {} };
  }
  const cluster = await startRedisCluster({ masters: 3 });
  return {
    nodes: cluster.nodes,
    description: `3 masters from redis-server at ${cluster.nodes.map((n) => `${n.host}:${n.port}`).join(',')}`,
    teardown: () => cluster.stop(),
  };
}

function parseClusterNodes(text: string): { host: string; port: number }[] {
  const nodes = text
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean)
    .map((item) => {
      const match = /^(.+):(\d{1,5})$/.exec(item);
      if (match === null) throw new Error(`REDIS_CLUSTER_NODES: expected host:port, got ${JSON.stringify(item)}`);
      return { host: match[1]!.replace(/^\[(.*)\]$/, '$1'), port: Number(match[2]) };
    });
  if (nodes.length === 0) throw new Error('REDIS_CLUSTER_NODES is set but lists no host:port');
  return nodes;
}

// ---------------------------------------------------------------- checks

async function redisVersion(url: string, label: string): Promise<string> {
  const client = new Redis(url, { lazyConnect: true, connectTimeout: 5_000, maxRetriesPerRequest: 0, retryStrategy: () => null });
  client.on('error', () => {});
  try {
    await client.connect();
    const info = await client.info('server');
    return /redis_version:([^\r\n]+)/.exec(info)?.[1] ?? 'unknown version';
  } catch (error) {
    throw new Error(`${redact(label)} does not answer: ${(error as Error).message}`, { cause: error });
  } finally {
    client.disconnect();
  }
}

async function checkClusterOk(node: { host: string; port: number }, label: string): Promise<void> {
  const client = new Redis({ ...node, lazyConnect: true, connectTimeout: 5_000, maxRetriesPerRequest: 0, retryStrategy: () => null });
  client.on('error', () => {});
  try {
    await client.connect();
    const info = String(await client.call('CLUSTER', 'INFO'));
    if (!info.includes('cluster_state:ok')) throw new Error(`cluster_state is not ok:\n${info}`);
  } catch (error) {
    throw new Error(`REDIS_CLUSTER_NODES=${label}: ${(error as Error).message}`, { cause: error });
  } finally {
    client.disconnect();
  }
}

function redact(url: string): string {
  return url.replace(/\/\/([^@/]*)@/, '//***@');
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
    timer.unref();
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}
