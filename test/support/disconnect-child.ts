// A process that uses a RedisStore, loses Redis, and disconnects its client while the client waits to
// reconnect, as a service shutting down during an outage would. It should then exit: nothing of the
// store's may keep it alive (test/store-shutdown.test.ts).
//
//   node --import tsx test/support/disconnect-child.ts <ioredis|iovalkey> <redisUrl> <key>
//
// It reaches Redis through a proxy of its own, which it closes after its first acquire. Prints that
// acquire's answer, then `disconnected` once it has shut down.
import { createServer, Socket } from 'node:net';
import { Redis as ValkeyRedis } from 'iovalkey';
import { Redis } from 'ioredis';
import { Rate } from '../../src/rate.js';
import { RedisStore } from '../../src/stores/redis-store.js';
import { TokenBucket } from '../../src/token-bucket.js';

const [family, target, key] = process.argv.slice(2) as ['ioredis' | 'iovalkey', string, string];
const upstream = new URL(target);
const sockets = new Set<Socket>();
const proxy = createServer((socket) => {
  const up = new Socket();
  for (const s of [socket, up]) {
    sockets.add(s);
    s.on('error', () => undefined);
  }
  up.connect(Number(upstream.port), upstream.hostname);
  socket.pipe(up).pipe(socket);
});
await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
const { port } = proxy.address() as { port: number };
const options = { host: '127.0.0.1', port, retryStrategy: (): number => 50 };
const client = family === 'iovalkey' ? (new ValkeyRedis(options) as unknown as Redis) : new Redis(options);
client.on('error', () => undefined);
const store = new RedisStore(client);
console.log(JSON.stringify(await store.acquire(new TokenBucket('shutdown', 5, Rate.perHour(1)), key)));
// the service's own work (a server, say) keeps the process alive until it shuts down
const service = setInterval(() => undefined, 1_000);
client.once('reconnecting', () => {
  clearInterval(service);
  client.disconnect();
  console.log('disconnected');
});
// Redis goes away
proxy.close();
for (const socket of sockets) socket.destroy();
