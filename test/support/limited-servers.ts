// One schema served over real HTTP by Apollo Server (tokenBucketPlugin) or
// GraphQL Yoga (useTokenBucket), limited with the same options, the identity
// read from the `x-user-id` header: for tests of behaviour every adapter
// shares.
import { ApolloServer } from '@apollo/server';
import type { BaseContext } from '@apollo/server';
import { makeExecutableSchema } from '@graphql-tools/schema';
import type { GraphQLSchema } from 'graphql';
import { createYoga } from 'graphql-yoga';
import type { YogaInitialContext } from 'graphql-yoga';
import { useTokenBucket } from '../../src/envelop/index.js';
import { tokenBucketPlugin } from '../../src/index.js';
import type { Identity, LimiterOptions, TokenBucket } from '../../src/index.js';
import { postJson, serveHandler } from './adapters.js';
import type { JsonAnswer } from './adapters.js';
import { captureLogger, serveHttp } from './graphql.js';
import type { CapturedLogger, ResponseBody } from './graphql.js';

export const TRANSPORTS = ['Apollo Server', 'GraphQL Yoga'] as const;
export type Transport = (typeof TRANSPORTS)[number];

/** The limiter's options, with `identify` given the `x-user-id` header instead of a server's context. */
export type HeaderLimiterOptions = Omit<LimiterOptions<unknown>, 'identify'> & {
  identify?: (user: string, bucket: TokenBucket) => Identity | Promise<Identity>;
};

export interface LimitedServer {
  post(payload: unknown, user?: string): Promise<JsonAnswer<ResponseBody>>;
  /** Warnings and errors the server's logger received. */
  logger: CapturedLogger;
  stop(): Promise<void>;
}

interface UserContext extends BaseContext {
  user: string;
}

/** Serves `typeDefs` with `resolvers`, or a schema built already (`resolvers` then ignored: the schema has its own). */
export async function serveLimited(
  transport: Transport,
  typeDefs: string | GraphQLSchema,
  resolvers: NonNullable<Parameters<typeof makeExecutableSchema>[0]['resolvers']>,
  options: HeaderLimiterOptions,
): Promise<LimitedServer> {
  const logger = captureLogger();
  const identify = options.identify ?? ((user: string) => user);
  const schema = typeof typeDefs === 'string' ? makeExecutableSchema({ typeDefs, resolvers }) : typeDefs;
  if (transport === 'Apollo Server') {
    const server = new ApolloServer<UserContext>({
      schema,
      logger,
      includeStacktraceInErrorResponses: false,
      plugins: [tokenBucketPlugin<UserContext>({ ...options, identify: ({ contextValue }, bucket) => identify(contextValue.user, bucket) })],
    });
    const http = await serveHttp(server, async ({ req }) => ({ user: String(req.headers['x-user-id'] ?? 'anonymous') }));
    return {
      post: (payload, user = 'anonymous') => postJson(http.url, payload, { 'x-user-id': user }),
      logger,
      stop: () => server.stop(),
    };
  }
  const yoga = createYoga({
    schema,
    logging: false,
    plugins: [
      useTokenBucket<YogaInitialContext>({
        ...options,
        logger,
        identify: ({ request }, bucket) => identify(request.headers.get('x-user-id') ?? 'anonymous', bucket),
      }),
    ],
  });
  const served = await serveHandler(yoga);
  return {
    post: (payload, user = 'anonymous') => postJson(served.url, payload, { 'x-user-id': user }),
    logger,
    stop: served.stop,
  };
}
