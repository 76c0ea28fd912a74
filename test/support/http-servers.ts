// One schema served over real HTTP by Apollo Server (tokenBucketPlugin) and
// by GraphQL Yoga (useTokenBucket), limited with the same options, for tests
// that must hold on both. The caller's identity is the `x-user` header.
import type { IncomingMessage } from 'node:http';
import { ApolloServer } from '@apollo/server';
import type { BaseContext } from '@apollo/server';
import { makeExecutableSchema } from '@graphql-tools/schema';
import type { IExecutableSchemaDefinition } from '@graphql-tools/schema';
import { createYoga } from 'graphql-yoga';
import type { YogaInitialContext } from 'graphql-yoga';
import { useTokenBucket } from '../../src/envelop/index.js';
import { tokenBucketPlugin } from '../../src/index.js';
import type { BucketStore, Identity, LimiterOptions, TokenBucket } from '../../src/index.js';
import { postJson, serveHandler } from './adapters.js';
import type { JsonAnswer } from './adapters.js';
import { captureLogger, serveHttp } from './graphql.js';
import type { CapturedLogger, ResponseBody } from './graphql.js';

export const SERVERS = ['Apollo Server', 'GraphQL Yoga'] as const;
export type ServerKind = (typeof SERVERS)[number];

/** The header naming whose tokens an operation spends. */
export const USER_HEADER = 'x-user';

export interface HttpServerOptions {
  typeDefs: string;
  resolvers: NonNullable<IExecutableSchemaDefinition['resolvers']>;
  /** The limiter's options, `identify` aside (both key on `x-user`). */
  limits: Omit<LimiterOptions<unknown>, 'identify'>;
  /** Whose tokens, from the `x-user` header: the user itself by default. */
  identify?: (user: string, bucket: TokenBucket) => Identity;
}

export interface RunningHttpServer {
  url: string;
  /** POSTs one operation, or a batch when `payload` is an array. */
  post<TBody = ResponseBody>(payload: unknown, headers?: Record<string, string>): Promise<JsonAnswer<TBody>>;
  logger: CapturedLogger;
  stop(): Promise<void>;
}

interface ApolloContext extends BaseContext {
  user: string;
}

/** Starts `kind` on a free port. */
export async function startHttpServer(kind: ServerKind, options: HttpServerOptions): Promise<RunningHttpServer> {
  const logger = captureLogger();
  const identify = options.identify ?? ((user: string) => user);
  const schema = makeExecutableSchema({ typeDefs: options.typeDefs, resolvers: options.resolvers });
  if (kind === 'Apollo Server') {
    const server = new ApolloServer<ApolloContext>({
      schema,
      logger,
      allowBatchedHttpRequests: true,
      includeStacktraceInErrorResponses: false,
      plugins: [tokenBucketPlugin<ApolloContext>({ ...options.limits, identify: ({ contextValue }, bucket) => identify(contextValue.user, bucket) })],
    });
    const http = await serveHttp(server, ({ req }) => Promise.resolve({ user: userOf(req) }));
    return { url: http.url, post: (payload, headers = {}) => postJson(http.url, payload, headers), logger, stop: () => server.stop() };
  }
  const yoga = createYoga<{ req: IncomingMessage }>({
    schema,
    batching: true,
    logging: { debug: () => {}, info: () => {}, warn: logger.warn, error: logger.error },
    plugins: [
      useTokenBucket<YogaInitialContext>({
        ...options.limits,
        identify: ({ request }, bucket) => identify(request.headers.get(USER_HEADER) ?? 'nobody', bucket),
      }),
    ],
  });
  const server = await serveHandler(yoga);
  return { url: server.url, post: (payload, headers = {}) => postJson(server.url, payload, headers), logger, stop: server.stop };
}

function userOf(req: IncomingMessage): string {
  const user = req.headers[USER_HEADER];
  return typeof user === 'string' ? user : 'nobody';
}

/** The whole tokens a bucket holds now, read with a cost-0 acquire (which takes nothing). */
export async function tokensLeft(store: BucketStore, bucket: Parameters<BucketStore['acquire']>[0], key: string): Promise<number> {
  const admission = await store.acquire(bucket, key, 0);
  if (!admission.allowed) throw new Error('a cost-0 acquire was denied');
  return admission.remaining;
}
