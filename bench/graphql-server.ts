/**
 * One Apollo server of the GraphQL benchmark, in its own process:
 *
 *   node --import tsx bench/graphql-server.ts <variant> <port> <redisUrl>
 *
 * `variant` is `none`, `ours`, `ours+usage` or `graphql-rate-limit-directive`, or one of the
 * flood benchmark's `flooded` and `flooded-no-cache`; port 0 picks
 * a free one. Prints `READY <url>` once it listens, stops on SIGTERM/SIGINT,
 * and exits when its stdin closes so a crashed parent leaves nothing behind.
 */
import { ApolloServer } from '@apollo/server';
import type { ApolloServerPlugin, BaseContext } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import { makeExecutableSchema } from '@graphql-tools/schema';
import type { GraphQLSchema } from 'graphql';
import { rateLimitDirective } from 'graphql-rate-limit-directive';
import { Redis } from 'ioredis';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import { Rate, RedisStore, TokenBucket, tokenBucketPlugin } from '../src/index.js';
import {
  FLOOD_PRICE_CAPACITY,
  FLOOD_VARIANTS,
  IDENTITY,
  IDENTITY_HEADER,
  OUR_CAPACITY,
  OUR_REFILL_PER_SECOND,
  RESOLVERS,
  TOKEN_BUCKET_TYPE_DEFS,
  VARIANTS,
  isFloodVariant,
  isVariant,
  peerTypeDefs,
} from './graphql-schema.js';
import type { FloodVariant, Variant } from './graphql-schema.js';

interface BenchContext extends BaseContext {
  user: string;
}

interface Setup {
  schema: GraphQLSchema;
  plugins: ApolloServerPlugin<BenchContext>[];
}

function setUp(variant: Variant | FloodVariant, redis: Redis): Setup {
  switch (variant) {
    case 'flooded':
    case 'flooded-no-cache': {
      const rate = Rate.perSecond(OUR_REFILL_PER_SECOND);
      const plugin = tokenBucketPlugin<BenchContext>({
        store: new RedisStore(redis),
        buckets: [
          new TokenBucket('api', OUR_CAPACITY, rate),
          new TokenBucket('list', OUR_CAPACITY, rate),
          new TokenBucket('price', FLOOD_PRICE_CAPACITY, Rate.perHour(FLOOD_PRICE_CAPACITY)),
        ],
        identify: ({ contextValue }) => contextValue.user,
        denyCache: variant === 'flooded',
      });
      return { schema: makeExecutableSchema({ typeDefs: TOKEN_BUCKET_TYPE_DEFS, resolvers: RESOLVERS }), plugins: [plugin] };
    }
    case 'none':
      return { schema: makeExecutableSchema({ typeDefs: TOKEN_BUCKET_TYPE_DEFS, resolvers: RESOLVERS }), plugins: [] };
    case 'ours':
    case 'ours+usage': {
      const rate = Rate.perSecond(OUR_REFILL_PER_SECOND);
      const buckets = ['api', 'list', 'price'].map((name) => new TokenBucket(name, OUR_CAPACITY, rate));
      const usage = variant === 'ours+usage';
      const plugin = tokenBucketPlugin<BenchContext>({
        store: new RedisStore(redis),
        buckets,
        identify: ({ contextValue }) => contextValue.user,
        refundUnusedCost: usage,
        rateLimitHeaders: usage,
      });
      return { schema: makeExecutableSchema({ typeDefs: TOKEN_BUCKET_TYPE_DEFS, resolvers: RESOLVERS }), plugins: [plugin] };
    }
    case 'graphql-rate-limit-directive': {
      const { rateLimitDirectiveTypeDefs, rateLimitDirectiveTransformer } = rateLimitDirective<BenchContext, ConstructorParameters<typeof RateLimiterRedis>[0]>({
        limiterClass: RateLimiterRedis,
        limiterOptions: { storeClient: redis, useRedisPackage: false },
        // The default key is the field's coordinate alone: one bucket per field for everybody.
        keyGenerator: (_args, _source, _fieldArgs, context, info) => `${context.user}:${info.parentType.name}.${info.fieldName}`,
      });
      const schema = makeExecutableSchema({ typeDefs: peerTypeDefs(rateLimitDirectiveTypeDefs), resolvers: RESOLVERS });
      return { schema: rateLimitDirectiveTransformer(schema), plugins: [] };
    }
  }
}

async function main(): Promise<void> {
  const [variant, portArg, redisUrl] = process.argv.slice(2);
  const port = Number(portArg);
  if (!(isVariant(variant) || isFloodVariant(variant)) || !Number.isInteger(port) || port < 0 || !redisUrl) {
    throw new Error(`usage: bench/graphql-server.ts <${[...VARIANTS, ...FLOOD_VARIANTS].join('|')}> <port> <redisUrl>`);
  }
  const redis = new Redis(redisUrl, { lazyConnect: true });
  redis.on('error', (error: Error) => console.error(`graphql-server ${variant}: redis: ${error.message}`));
  await redis.connect();

  const { schema, plugins } = setUp(variant, redis);
  const server = new ApolloServer<BenchContext>({ schema, plugins });
  const { url } = await startStandaloneServer(server, {
    listen: { port, host: '127.0.0.1' },
    context: async ({ req }) => {
      const header = req.headers[IDENTITY_HEADER];
      return { user: typeof header === 'string' ? header : IDENTITY };
    },
  });

  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    const force = setTimeout(() => process.exit(0), 2000);
    force.unref();
    void server
      .stop()
      .catch(() => undefined)
      .finally(() => {
        redis.disconnect();
        process.exit(0);
      });
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  process.stdin.once('end', stop);
  process.stdin.resume();

  console.log(`READY ${url}`);
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? (error.stack ?? error.message) : error);
  process.exit(1);
});
