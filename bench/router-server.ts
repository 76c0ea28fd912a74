/**
 * One coprocessor of the router benchmark, in its own process (one core):
 *
 *   node --import tsx bench/router-server.ts <echo|coprocessor|reported> <redisUrl>
 *
 * `echo` is the peer: a Node HTTP handler that reads the same payload,
 * parses it and answers it back with `control: "continue"`, limiting
 * nothing. `coprocessor` is `routerCoprocessor` on a RedisStore;
 * `reported` the same with `reportCost` and `refundUnusedCost`, so each
 * admitted operation also carries a signed charge to the response stage.
 * Prints `READY <url>`; exits when its stdin closes.
 */
import { createServer } from 'node:http';
import type { RequestListener } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { Rate, RedisStore, TokenBucket } from '../src/index.js';
import { routerCoprocessor } from '../src/router/index.js';

const [variant = 'echo', redisUrl = 'redis://127.0.0.1:6379'] = process.argv.slice(2);
if (variant !== 'echo' && variant !== 'coprocessor' && variant !== 'reported') throw new Error(`unknown variant ${variant}`);

/** What any coprocessor must do at least: read the body, parse it, answer it back. */
const echo: RequestListener = (request, response) => {
  const chunks: Buffer[] = [];
  request.on('data', (chunk: Buffer) => chunks.push(chunk));
  request.on('end', () => {
    const payload = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
    delete payload['sdl'];
    const json = JSON.stringify({ ...payload, control: 'continue' });
    response.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json) });
    response.end(json);
  });
};

const redis = variant === 'echo' ? undefined : new Redis(redisUrl);
const handler: RequestListener = redis
  ? routerCoprocessor({
      store: new RedisStore(redis, { prefix: 'bench:router:' }),
      // Never short: the benchmark measures the price of pricing and charging, not denials.
      buckets: [new TokenBucket('api', 1_000_000_000, Rate.perSecond(10_000_000))],
      identify: (request) => request.headers['x-user-id']?.[0] ?? 'anonymous',
      ...(variant === 'reported' ? { reportCost: true, refundUnusedCost: true, contextSecret: 'bench-secret-0123456789-0123456789-abc' } : {}),
      logger: { warn: (m) => console.warn(m), error: (m) => console.error(m) },
    })
  : echo;

const server = createServer(handler);
server.keepAliveTimeout = 60_000;
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const stop = (): void => {
  server.close();
  redis?.disconnect();
  process.exit(0);
};
process.stdin.on('close', stop);
process.stdin.resume();
process.on('SIGTERM', stop);
console.log(`READY http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
