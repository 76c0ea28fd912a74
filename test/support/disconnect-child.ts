// A process that uses a RedisStore, loses Redis, and disconnects its client while the client waits to
// reconnect, as a service shutting down during an outage would. It should then exit: nothing of the
// store's may keep it alive (test/store-shutdown.test.ts).
//
//   node --import tsx test/support/disconnect-child.ts <ioredis|iovalkey> <scenario> <target> <key>
//
// scenario `redis`: a store in use when Redis goes away; `late`: a store made (and first used) while the
// client waits to reconnect; `cluster`: a Cluster (target: its nodes as JSON) in its reconnect wait.
// It reaches Redis through proxies of its own, which it closes. Prints what happened, ending with
// `disconnected` once it has shut down (and, on a Cluster, how a call made after that fared).
import { createServer, Socket } from 'node:net';
import type { Server } from 'node:net';
import { Cluster as ValkeyCluster, Redis as ValkeyRedis } from 'iovalkey';
import { Cluster, Redis } from 'ioredis';
import { Rate } from '../../src/rate.js';
import { RedisStore } from '../../src/stores/redis-store.js';
import { TokenBucket } from '../../src/token-bucket.js';

const [family, scenario, target, key] = process.argv.slice(2) as ['ioredis' | 'iovalkey', 'redis' | 'late' | 'cluster', string, string];
const sockets = new Set<Socket>();
const proxies: Server[] = [];
async function proxyTo(host: string, port: number): Promise<number> {
  const proxy = createServer((socket) => {
    const up = new Socket();
    for (const s of [socket, up]) {
      sockets.add(s);
      s.on('error', () => undefined);
    }
    up.connect(port, host);
    socket.pipe(up).pipe(socket);
  });
  proxies.push(proxy);
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  return (proxy.address() as { port: number }).port;
}
function redisGoesAway(): void {
  for (const proxy of proxies) proxy.close();
  for (const socket of sockets) socket.destroy();
}
const bucket = new TokenBucket('shutdown', 5, Rate.perHour(1));
const say = (line: unknown): void => console.log(typeof line === 'string' ? line : JSON.stringify(line));
// the service's own work (a server, say) keeps the process alive until it shuts down
const service = setInterval(() => undefined, 1_000);
function shutDown(client: Redis | Cluster): void {
  clearInterval(service);
  client.disconnect();
  say('disconnected');
}

if (scenario === 'cluster') {
  const nodes = JSON.parse(target) as { host: string; port: number }[];
  const natMap: Record<string, { host: string; port: number }> = {};
  for (const n of nodes) natMap[`${n.host}:${n.port}`] = { host: '127.0.0.1', port: await proxyTo(n.host, n.port) };
  const options = { natMap, clusterRetryStrategy: () => 300, redisOptions: { connectTimeout: 500 } };
  const startup = Object.values(natMap);
  const client = family === 'iovalkey' ? (new ValkeyCluster(startup, options) as unknown as Cluster) : new Cluster(startup, options);
  client.on('error', () => undefined);
  await new Promise((resolve) => client.once('ready', resolve));
  const store = new RedisStore(client);
  say(await store.acquire(bucket, key));
  // every node connection open, the client's and the store's (ioredis opens them on first use), so
  // that losing Redis ends them all
  await Promise.all(client.nodes('master').map((node) => node.ping()));
  for (let i = 0; i < 30; i++) await store.acquire(bucket, `${key}-${i}`);
  client.once('reconnecting', () =>
    setTimeout(() => {
      shutDown(client);
      store.acquire(bucket, key).then(
        (answer) => say({ late: answer }),
        (error: Error) => say(`a later call failed: ${error.message}`),
      );
    }, 50),
  );
} else {
  const upstream = new URL(target);
  const port = await proxyTo(upstream.hostname, Number(upstream.port));
  const options = { host: '127.0.0.1', port, retryStrategy: (): number => (scenario === 'late' ? 1_500 : 50) };
  const client = family === 'iovalkey' ? (new ValkeyRedis(options) as unknown as Redis) : new Redis(options);
  client.on('error', () => undefined);
  if (scenario === 'redis') {
    const store = new RedisStore(client);
    say(await store.acquire(bucket, key));
    client.once('reconnecting', () => shutDown(client));
  } else {
    await client.ping();
    client.once('reconnecting', () => {
      const store = new RedisStore(client);
      store.acquire(bucket, key).then(
        (answer) => say(answer),
        (error: Error) => say(`acquire failed: ${error.message}`),
      );
      setTimeout(() => shutDown(client), 100);
    });
  }
}
redisGoesAway();
