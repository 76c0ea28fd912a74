import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { ApolloServer } from '@apollo/server';
import type { ApolloServerPlugin, BaseContext } from '@apollo/server';
import { ApolloServerPluginDrainHttpServer } from '@apollo/server/plugin/drainHttpServer';
import { expressMiddleware } from '@as-integrations/express5';
import { makeExecutableSchema } from '@graphql-tools/schema';
import express from 'express';
import type { Context } from 'graphql-ws';
import { useServer } from 'graphql-ws/use/ws';
import type { Extra } from 'graphql-ws/use/ws';
import type { Redis } from 'ioredis';
import { WebSocketServer } from 'ws';
import { tokenBucketSubscriptions } from '../src/graphql-ws/index.js';
import type { TokenBucketSubscriptionsOptions } from '../src/graphql-ws/index.js';
import {
  MemoryStore,
  Rate,
  RedisStore,
  TokenBucket,
  tokenBucketDirectiveTypeDefs,
  tokenBucketPlugin,
} from '../src/index.js';
import type { BucketStore, LimiterOptions, TokenBucketPluginOptions } from '../src/index.js';

type Logger = ApolloServer<BaseContext>['logger'];

export interface ExampleContext extends BaseContext {
  /** The client's address: login attempts are limited per address. */
  ip: string;
  /** `x-user-id` header (or connection parameter over WebSocket): everything else is limited per user (or per address without one). */
  user: string | undefined;
}

export const buckets = {
  api: new TokenBucket('api', 1000, Rate.perMinute(1000)),
  search: new TokenBucket('search', 20, new Rate(1, 3000)),
  export: new TokenBucket('export', 500, Rate.perMinute(500)),
  login: new TokenBucket('login', 5, Rate.perMinute(5)),
  live: new TokenBucket('live', 10, Rate.perMinute(10)),
};

export const typeDefs = `${tokenBucketDirectiveTypeDefs}\n${readFileSync(new URL('../schema/example.graphql', import.meta.url), 'utf8')}`;

const books = Array.from({ length: 50 }, (_, i) => ({ id: String(i + 1), title: `Book ${i + 1}`, author: { name: `Author ${(i % 7) + 1}` } }));

/** `from`, `from - 1`, … 0, one number every `everyMs`; both clamped so no client can make it run away. */
async function* countdown(from: number, everyMs: number): AsyncGenerator<{ countdown: number }> {
  const wait = Math.max(10, Math.min(everyMs, 60_000));
  for (let n = Math.max(0, Math.min(from, 100)); n >= 0; n--) {
    yield { countdown: n };
    if (n > 0) await sleep(wait);
  }
}

const resolvers = {
  Query: {
    search: (_: unknown, { term, first }: { term: string; first: number }) =>
      books.filter((b) => b.title.toLowerCase().includes(term.toLowerCase())).slice(0, Math.max(0, first)),
    export: (_: unknown, { rows }: { rows: number }) =>
      Array.from({ length: Math.max(0, Math.min(rows, 10_000)) }, (_, i) => ({ id: String(i), cells: [`r${i}c1`, `r${i}c2`] })),
    books: (_: unknown, { first }: { first: number }) => books.slice(0, Math.max(0, first)),
    book: (_: unknown, { id }: { id: string }) => books.find((b) => b.id === id) ?? null,
  },
  Author: {
    books: (author: { name: string }, { first }: { first: number }) => books.filter((b) => b.author.name === author.name).slice(0, Math.max(0, first)),
  },
  Mutation: {
    login: (_: unknown, { password }: { email: string; password: string }) =>
      password === 'hunter2' ? { ok: true, token: 'example-token' } : { ok: false, token: null },
  },
  Subscription: {
    countdown: { subscribe: (_: unknown, { from, everyMs }: { from: number; everyMs: number }) => countdown(from, everyMs) },
  },
};

/** The example's schema, shared by Apollo Server (HTTP) and graphql-ws (WebSocket). */
export const schema = makeExecutableSchema({ typeDefs, resolvers });

/** Whose tokens: the `login` bucket per client address, every other bucket per user (or address). */
function identity(context: ExampleContext, bucket: TokenBucket): string {
  return bucket === buckets.login ? context.ip : (context.user ?? context.ip);
}

export interface ExampleOptions {
  store?: BucketStore;
  /** Overrides of the limiter's options, for Apollo Server's plugin and graphql-ws alike. */
  plugin?: Partial<TokenBucketPluginOptions<ExampleContext>>;
  /** More Apollo Server plugins. */
  plugins?: ApolloServerPlugin<ExampleContext>[];
  /** Apollo Server's logger; default its own. */
  logger?: Logger;
}

/** The limiter's options shared by both transports. */
function limits(options: ExampleOptions): Omit<LimiterOptions<unknown>, 'identify'> {
  // identify is per transport: each takes its own context.
  const overrides = { ...options.plugin };
  delete overrides.identify;
  return {
    store: options.store ?? new MemoryStore(),
    buckets: Object.values(buckets),
    reportCost: true,
    // Charge what the response used: a search returning 2 books pays for 2.
    refundUnusedCost: true,
    // RateLimit-Policy and RateLimit on every charged HTTP response.
    rateLimitHeaders: true,
    // Apollo Sandbox introspects this server (about 15,000 tokens of `api`
    // with the default list size); production servers turn introspection off.
    chargeIntrospection: false,
    ...overrides,
  };
}

/** The example's Apollo server, with `MemoryStore` unless a store is given. */
export function createExampleServer(options: ExampleOptions = {}): ApolloServer<ExampleContext> {
  return new ApolloServer<ExampleContext>({
    schema,
    ...(options.logger ? { logger: options.logger } : {}),
    allowBatchedHttpRequests: true,
    includeStacktraceInErrorResponses: false,
    plugins: [
      tokenBucketPlugin<ExampleContext>({
        ...limits(options),
        identify: options.plugin?.identify ?? (({ contextValue }, bucket) => identity(contextValue, bucket)),
      }),
      ...(options.plugins ?? []),
    ],
  });
}

export function exampleContext({ req }: { req: IncomingMessage }): Promise<ExampleContext> {
  const user = req.headers['x-user-id'];
  return Promise.resolve({ ip: req.socket.remoteAddress ?? 'unknown', user: typeof user === 'string' && user !== '' ? user : undefined });
}

/** The same context for a WebSocket connection: `x-user-id` from the connection parameters. */
export function exampleSocketContext(ctx: Context<Record<string, unknown> | undefined, Extra>): ExampleContext {
  const user = ctx.connectionParams?.['x-user-id'];
  return { ip: ctx.extra.request.socket.remoteAddress ?? 'unknown', user: typeof user === 'string' && user !== '' ? user : undefined };
}

/** graphql-ws's hooks that limit operations sent over WebSocket, with the same buckets and store as HTTP. */
export function exampleSubscriptions(
  options: ExampleOptions & Pick<TokenBucketSubscriptionsOptions<Record<string, unknown> | undefined, Extra>, 'chargeEachEvent'> = {},
): ReturnType<typeof tokenBucketSubscriptions<Record<string, unknown> | undefined, Extra>> {
  return tokenBucketSubscriptions<Record<string, unknown> | undefined, Extra>({
    ...limits(options),
    schema,
    identify: (ctx, bucket) => identity(exampleSocketContext(ctx), bucket),
    ...(options.chargeEachEvent === undefined ? {} : { chargeEachEvent: options.chargeEachEvent }),
  });
}

export interface RunningExample {
  /** `http://host:port/`: GraphQL over HTTP. */
  url: string;
  /** `ws://host:port/`: GraphQL over WebSocket (graphql-ws), on the same port. */
  wsUrl: string;
  server: ApolloServer<ExampleContext>;
  stop(): Promise<void>;
}

/**
 * The example served as Apollo's documentation sets it up: Apollo Server on
 * express for HTTP, and graphql-ws on the same port for subscriptions (and
 * any operation a client sends over the socket), both limited.
 */
export async function startExampleServer(options: ExampleOptions & { port?: number; host?: string } = {}): Promise<RunningExample> {
  const store = options.store ?? new MemoryStore();
  const app = express();
  const httpServer = createServer(app);
  const wsServer = new WebSocketServer({ server: httpServer, path: '/' });
  const sockets = useServer({ schema, context: exampleSocketContext, ...exampleSubscriptions({ ...options, store }) }, wsServer);

  const server = createExampleServer({
    ...options,
    store,
    plugins: [
      ApolloServerPluginDrainHttpServer({ httpServer }),
      {
        async serverWillStart() {
          return {
            async drainServer() {
              await sockets.dispose();
            },
          };
        },
      },
      ...(options.plugins ?? []),
    ],
  });
  await server.start();

  // Apollo Sandbox calls from its own origin; Retry-After and the RateLimit fields must be readable there too.
  app.use((req, res, next) => {
    res.setHeader('access-control-allow-origin', '*');
    res.setHeader('access-control-expose-headers', 'retry-after, ratelimit-policy, ratelimit');
    if (req.method !== 'OPTIONS') return next();
    res.setHeader('access-control-allow-methods', 'GET, POST, OPTIONS');
    res.setHeader('access-control-allow-headers', req.headers['access-control-request-headers'] ?? 'content-type');
    res.status(204).end();
  });
  app.use('/', express.json({ limit: '1mb' }), expressMiddleware(server, { context: exampleContext }));

  await new Promise<void>((resolve, reject) => {
    httpServer.once('error', reject);
    httpServer.listen(options.port ?? 0, options.host, () => resolve());
  });
  const { port } = httpServer.address() as AddressInfo;
  const host = options.host ?? 'localhost';
  return {
    url: `http://${host}:${port}/`,
    wsUrl: `ws://${host}:${port}/`,
    server,
    stop: () => server.stop(),
  };
}

/** `REDIS_URL` set: a RedisStore shared by every replica; else this process's memory. */
export function storeFromEnvironment(redis: Redis | undefined): BucketStore {
  return redis ? new RedisStore(redis) : new MemoryStore();
}
