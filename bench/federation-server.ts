/**
 * One Apollo Gateway of the federation benchmark, in its own process, with
 * its three subgraphs (the test suite's) in the same process:
 *
 *   node --import tsx bench/federation-server.ts <none|ours> <redisUrl>
 *
 * Prints `READY <url>` once it listens; exits when its stdin closes, so a
 * crashed parent leaves nothing behind.
 */
import { ApolloGateway } from '@apollo/gateway';
import { ApolloServer } from '@apollo/server';
import type { ApolloServerPlugin } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import { Redis } from 'ioredis';
import { Rate, RedisStore, TokenBucket, tokenBucketPlugin } from '../src/index.js';
import { startSubgraphs } from '../test/support/federation.js';

const [variant = 'none', redisUrl = 'redis://127.0.0.1:6379'] = process.argv.slice(2);
if (variant !== 'none' && variant !== 'ours') throw new Error(`unknown variant ${variant}`);

const subgraphs = await startSubgraphs();
const redis = variant === 'ours' ? new Redis(redisUrl) : undefined;
const plugins: ApolloServerPlugin[] = redis
  ? [
      tokenBucketPlugin({
        store: new RedisStore(redis, { prefix: 'bench:federation:' }),
        // Never short: the benchmark measures the price of pricing and charging, not denials.
        buckets: [new TokenBucket('api', 1_000_000_000, Rate.perSecond(10_000_000))],
        identify: ({ request }) => request.http?.headers.get('x-user-id') ?? 'anonymous',
      }),
    ]
  : [];
const server = new ApolloServer({ gateway: new ApolloGateway({ supergraphSdl: subgraphs.compose() }), plugins });
const { url } = await startStandaloneServer(server, { listen: { port: 0, host: '127.0.0.1' } });

const stop = async (): Promise<void> => {
  await server.stop();
  await subgraphs.stop();
  redis?.disconnect();
  process.exit(0);
};
process.stdin.on('close', () => void stop());
process.stdin.resume();
process.on('SIGTERM', () => void stop());
console.log(`READY ${url}`);
