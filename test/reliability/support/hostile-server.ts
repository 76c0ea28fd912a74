// The hostile-operations server, as its own process: the hostile schema with
// the plugin (reportCost on, store in Redis), HTTP batching on, and a second
// plugin that reports what each operation actually resolved:
//
//   extensions.resolved = { api, search, fields }
//     api     the values fields produced (list items, not nulls), each weighed as
//             the model weighs its field: an object 1, a scalar 0 unless @cost says
//     search  tokens of "search" the resolved fields were worth (2 per Query.search, 1 per Mutation.touch)
//     fields  every field resolved, scalars included
//
// Env: REDIS_URL, PREFIX, PORT (default 0). Prints `READY <url>`.
import { ApolloServer } from '@apollo/server';
import type { ApolloServerPlugin, BaseContext } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import { getNamedType, isCompositeType } from 'graphql';
import type { GraphQLResolveInfo } from 'graphql';
import { Redis } from 'ioredis';
import { Rate, RedisStore, TokenBucket, tokenBucketPlugin } from '../../../src/index.js';
import { redisOptions } from './fail-fast.js';
import { API_CAPACITY, HOSTILE_DEFAULT_LIST_SIZE, HOSTILE_WEIGHTS, SEARCH_CAPACITY, hostileSchema } from './hostile-schema.js';

process.on('unhandledRejection', (reason) => {
  console.error(`RELIABILITY-UNHANDLED-REJECTION ${String(reason instanceof Error ? reason.stack : reason)}`);
});
process.on('uncaughtException', (error) => {
  console.error(`RELIABILITY-UNCAUGHT-EXCEPTION ${String(error.stack)}`);
  process.exit(70);
});

interface Context extends BaseContext {
  identity: string;
}

const counting: ApolloServerPlugin<Context> = {
  async requestDidStart() {
    const resolved = { api: 0, search: 0, fields: 0 };
    return {
      async executionDidStart() {
        return {
          willResolveField({ info }) {
            resolved.fields += 1;
            if (info.parentType.name === 'Query' && info.fieldName === 'search') resolved.search += 2;
            if (info.parentType.name === 'Mutation' && info.fieldName === 'touch') resolved.search += 1;
            return (error, result) => {
              if (error === null) resolved.api += weightOf(info) * produced(result);
            };
          },
        };
      },
      async willSendResponse({ response }) {
        if (response.body.kind === 'single') {
          response.body.singleResult.extensions = { ...response.body.singleResult.extensions, resolved };
        }
      },
    };
  },
};

function weightOf(info: GraphQLResolveInfo): number {
  return HOSTILE_WEIGHTS[`${info.parentType.name}.${info.fieldName}`] ?? (isCompositeType(getNamedType(info.returnType)) ? 1 : 0);
}

/** Values a resolver produced: the items of its (nested) lists that are not null, or 1 for a value that is not. */
function produced(value: unknown): number {
  if (Array.isArray(value)) return value.reduce((n: number, item) => n + produced(item), 0);
  return value === null || value === undefined ? 0 : 1;
}

const redis = new Redis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379', redisOptions);
redis.on('error', (error: Error) => console.error(`redis: ${error.message}`));
await new Promise<void>((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error('Redis not ready within 15 s')), 15_000);
  redis.once('ready', () => {
    clearTimeout(timer);
    resolve();
  });
});

const server = new ApolloServer<Context>({
  schema: hostileSchema(),
  allowBatchedHttpRequests: true,
  includeStacktraceInErrorResponses: false,
  plugins: [
    tokenBucketPlugin<Context>({
      store: new RedisStore(redis, { prefix: process.env['PREFIX'] ?? 'hostile:' }),
      buckets: [new TokenBucket('api', API_CAPACITY, Rate.perSecond(API_CAPACITY)), new TokenBucket('search', SEARCH_CAPACITY, Rate.perSecond(SEARCH_CAPACITY))],
      identify: ({ contextValue }) => contextValue.identity,
      defaultListSize: HOSTILE_DEFAULT_LIST_SIZE,
      onStoreError: 'deny',
      reportCost: true,
    }),
    counting,
  ],
});
const { url } = await startStandaloneServer(server, {
  listen: { port: Number(process.env['PORT'] ?? 0), host: '127.0.0.1' },
  context: async ({ req }) => ({ identity: String(req.headers['x-identity'] ?? 'anonymous') }),
});
console.log(`READY ${url}`);

const shutdown = (): void => {
  void server.stop().finally(() => {
    redis.disconnect();
    process.exit(0);
  });
};
process.once('SIGTERM', shutdown);
process.once('SIGINT', shutdown);
