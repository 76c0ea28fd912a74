// One replica of the example server (examples/app.ts) as its own process,
// with its "api" bucket sized by the test and its store in a Redis or Redis
// Cluster shared with the other replicas. Configured by environment:
//
//   REDIS_URL | REDIS_CLUSTER_NODES=host:port,...   where the buckets live
//   PREFIX              RedisStore key prefix (isolates a test's keys)
//   CAPACITY, RATE_PER_SECOND                        the "api" bucket
//   ON_STORE_ERROR (allow|deny), STORE_TIMEOUT_MS    the plugin's fault options
//   PORT                default 0: any free port
//
// Prints `READY <url>` once it listens. An unhandled rejection or uncaught
// exception is printed with a marker the tests look for.
import { startStandaloneServer } from '@apollo/server/standalone';
import { Cluster, Redis } from 'ioredis';
import { Rate, RedisStore, TokenBucket } from '../../../src/index.js';
import { buckets, createExampleServer, exampleContext } from '../../../examples/app.js';
import { clusterOptions, redisOptions } from './fail-fast.js';

process.on('unhandledRejection', (reason) => {
  console.error(`RELIABILITY-UNHANDLED-REJECTION ${String(reason instanceof Error ? reason.stack : reason)}`);
});
process.on('uncaughtException', (error) => {
  console.error(`RELIABILITY-UNCAUGHT-EXCEPTION ${String(error.stack)}`);
  process.exit(70);
});

const env = process.env;
const number = (name: string, fallback: number): number => {
  const value = Number(env[name] ?? fallback);
  if (!Number.isFinite(value)) throw new Error(`${name} must be a number, got ${env[name]}`);
  return value;
};

const clusterNodes = env['REDIS_CLUSTER_NODES'];
const redisUrl = env['REDIS_URL'];
if (!clusterNodes && !redisUrl) throw new Error('set REDIS_URL or REDIS_CLUSTER_NODES');

const client = clusterNodes
  ? new Cluster(
      clusterNodes.split(',').map((node) => {
        const [host = '', port = ''] = node.split(':');
        return { host, port: Number(port) };
      }),
      clusterOptions,
    )
  : new Redis(redisUrl!, redisOptions);

// Without a listener ioredis prints every reconnect failure as unhandled; count them instead.
let redisErrors = 0;
let lastReport = 0;
client.on('error', (error: Error) => {
  redisErrors += 1;
  if (Date.now() - lastReport > 1_000) {
    lastReport = Date.now();
    console.error(`redis error #${redisErrors}: ${error.message}`);
  }
});

// enableOfflineQueue is off, so wait for the connection before taking traffic.
await new Promise<void>((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error('Redis not ready within 15 s')), 15_000);
  client.once('ready', () => {
    clearTimeout(timer);
    resolve();
  });
});

const api = new TokenBucket('api', number('CAPACITY', 50), Rate.perSecond(number('RATE_PER_SECOND', 100)));
const onStoreError = env['ON_STORE_ERROR'] === 'deny' ? 'deny' : 'allow';
const server = createExampleServer({
  store: new RedisStore(client, env['PREFIX'] ? { prefix: env['PREFIX'] } : {}),
  plugin: {
    buckets: [api, buckets.search, buckets.export, buckets.login, buckets.live],
    onStoreError,
    storeTimeoutMs: number('STORE_TIMEOUT_MS', 1_000),
  },
});
const { url } = await startStandaloneServer(server, { listen: { port: number('PORT', 0), host: '127.0.0.1' }, context: exampleContext });
console.log(`READY ${url}`);

const shutdown = (): void => {
  void server.stop().finally(() => {
    client.disconnect();
    process.exit(0);
  });
};
process.once('SIGTERM', shutdown);
process.once('SIGINT', shutdown);
