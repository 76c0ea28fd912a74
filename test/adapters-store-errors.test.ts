// `onStoreError` over graphql-ws and GraphQL Yoga, against a Redis of our own
// that we crash (SIGKILL) and freeze (SIGSTOP): 'allow' serves and logs
// through the adapter's logger, 'deny' answers RATE_LIMITER_UNAVAILABLE (503
// over HTTP); answers come within the store timeout; nothing is left
// unhandled.
import { EventEmitter, on } from 'node:events';
import { makeExecutableSchema } from '@graphql-tools/schema';
import { createYoga } from 'graphql-yoga';
import type { YogaInitialContext } from 'graphql-yoga';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { useTokenBucket } from '../src/envelop/index.js';
import { tokenBucketSubscriptions } from '../src/graphql-ws/index.js';
import { Rate, RedisStore, TokenBucket, tokenBucketDirectiveTypeDefs } from '../src/index.js';
import { disposeClients, postJson, run, serveApolloWithSockets, serveHandler, socketClient, start } from './support/adapters.js';
import { redisClient, uniquePrefix } from './support/clients.js';
import { captureLogger, waitFor, watchUnhandledRejections } from './support/graphql.js';
import type { CapturedLogger, ResponseBody } from './support/graphql.js';
import { startRedisServer } from './support/redis-server.js';
import type { RedisServerProcess } from './support/redis-server.js';

const STORE_TIMEOUT_MS = 200;
/** Slack for the transport and a busy machine on top of the store timeout. */
const TOLERANCE_MS = 600;

const typeDefs = `${tokenBucketDirectiveTypeDefs}
type Query { hello: String @tokenBucket(name: "live", cost: 1) }
type Subscription { news: String! @tokenBucket(name: "live", cost: 1) }
`;
const live = new TokenBucket('live', 100, Rate.perMinute(100));

let redisServer: RedisServerProcess;
let redis: Redis;
let unhandled: ReturnType<typeof watchUnhandledRejections>;
const stops: (() => Promise<void>)[] = [];

beforeAll(async () => {
  redisServer = await startRedisServer();
});
afterAll(async () => {
  await redisServer?.stop();
});

beforeEach(async () => {
  unhandled = watchUnhandledRejections();
  await redisServer.restart();
  // Fail fast while disconnected instead of queueing.
  redis = redisClient(redisServer.url, { enableOfflineQueue: false, maxRetriesPerRequest: 1 });
  redis.on('error', () => {}); // connection errors are expected here; the limiter reports what matters
  await waitFor('the client to connect', 10_000, () => redis.status === 'ready');
});

afterEach(async () => {
  await disposeClients();
  await Promise.all(stops.splice(0).map((stop) => stop()));
  redis.disconnect();
  if (redisServer) await redisServer.resume().catch(() => undefined);
  unhandled.stop();
  expect(unhandled.rejections).toEqual([]);
});

function schemaWith(news: EventEmitter, subscribed: { count: number }) {
  return makeExecutableSchema({
    typeDefs,
    resolvers: {
      Query: { hello: () => 'hi' },
      Subscription: {
        news: {
          subscribe: () => {
            subscribed.count += 1;
            return on(news, 'news');
          },
          resolve: ([headline]: [string]) => headline,
        },
      },
    },
  });
}

let users = 0;
const freshUser = (): string => `store-errors-${++users}`;

async function sockets(onStoreError: 'allow' | 'deny', chargeEachEvent = false) {
  const news = new EventEmitter();
  const subscribed = { count: 0 };
  const schema = schemaWith(news, subscribed);
  const logger = captureLogger();
  const server = await serveApolloWithSockets({
    schema,
    sockets: tokenBucketSubscriptions({
      schema,
      store: new RedisStore(redis, { prefix: uniquePrefix('ws-store-errors') }),
      buckets: [live],
      identify: (ctx) => String(ctx.connectionParams?.['user']),
      onStoreError,
      storeTimeoutMs: STORE_TIMEOUT_MS,
      chargeEachEvent,
      logger,
    }),
    logger: captureLogger(),
  });
  stops.push(server.stop);
  return { server, news, subscribed, logger };
}

async function yoga(onStoreError: 'allow' | 'deny') {
  const logger = captureLogger();
  const server = await serveHandler(
    createYoga({
      schema: schemaWith(new EventEmitter(), { count: 0 }),
      logging: { debug: () => {}, info: () => {}, warn: (...args: unknown[]) => logger.warn(args.join(' ')), error: (...args: unknown[]) => logger.error(args.join(' ')) },
      plugins: [
        useTokenBucket<YogaInitialContext>({
          store: new RedisStore(redis, { prefix: uniquePrefix('yoga-store-errors') }),
          buckets: [live],
          identify: ({ request }) => request.headers.get('x-user-id') ?? 'anonymous',
          onStoreError,
          storeTimeoutMs: STORE_TIMEOUT_MS,
        }),
      ],
    }),
  );
  stops.push(server.stop);
  return { url: server.url, logger };
}

function expectWarned(logger: CapturedLogger, action: 'allowing' | 'denying'): void {
  expect(logger.warnings.some((w) => w.includes(`graphql-token-bucket: store failed, ${action} the operation`))).toBe(true);
}

describe.each([
  ['crashed', () => redisServer.kill()],
  ['frozen', () => redisServer.pause()],
])('a Redis that %s, under graphql-ws', (_how, fail) => {
  it("'deny' refuses a subscription with RATE_LIMITER_UNAVAILABLE within the timeout; its resolver never runs", async () => {
    const { server, subscribed, logger } = await sockets('deny');
    await fail();
    const started = performance.now();
    const outcome = await run(socketClient(server.wsUrl, { user: freshUser() }), { query: 'subscription { news }' });
    expect(performance.now() - started).toBeLessThan(STORE_TIMEOUT_MS + TOLERANCE_MS);
    expect(outcome).toEqual({ results: [], errors: [{ message: expect.any(String), extensions: { code: 'RATE_LIMITER_UNAVAILABLE' } }], completed: false });
    expect(subscribed.count).toBe(0);
    expectWarned(logger, 'denying');
  });

  it("'allow' runs the subscription and logs through the given logger", async () => {
    const { server, news, subscribed, logger } = await sockets('allow');
    await fail();
    const running = start(socketClient(server.wsUrl, { user: freshUser() }), { query: 'subscription { news }' });
    await waitFor('the subscription to listen', 5_000, () => news.listenerCount('news') === 1);
    news.emit('news', 'still here');
    await waitFor('the event', 5_000, () => running.results.length === 1);
    expect(running.results).toEqual([{ data: { news: 'still here' } }]);
    expect(subscribed.count).toBe(1);
    expectWarned(logger, 'allowing');
    running.cancel();
  });

  it("with chargeEachEvent, 'deny' ends a running subscription with RATE_LIMITER_UNAVAILABLE at its next event", async () => {
    const { server, news } = await sockets('deny', true);
    const running = start(socketClient(server.wsUrl, { user: freshUser() }), { query: 'subscription { news }' });
    await waitFor('the subscription to listen', 5_000, () => news.listenerCount('news') === 1);
    news.emit('news', 'paid');
    await waitFor('the first event', 5_000, () => running.results.length === 1);
    await fail();
    news.emit('news', 'unpaid');
    const outcome = await running.outcome;
    expect(outcome.results.map((r) => r.data)).toEqual([{ news: 'paid' }]);
    expect(outcome.errors).toEqual([{ message: expect.any(String), extensions: { code: 'RATE_LIMITER_UNAVAILABLE' } }]);
    await waitFor('the listener to go', 5_000, () => news.listenerCount('news') === 0);
  });
});

describe.each([
  ['crashed', () => redisServer.kill()],
  ['frozen', () => redisServer.pause()],
])('a Redis that %s, under GraphQL Yoga', (_how, fail) => {
  it("'deny' answers 503 RATE_LIMITER_UNAVAILABLE within the timeout, 'allow' serves and logs through Yoga's logger", async () => {
    const [deny, allow] = await Promise.all([yoga('deny'), yoga('allow')]);
    await fail();
    const user = { 'x-user-id': freshUser() };
    const started = performance.now();
    const [refused, served] = await Promise.all([
      postJson<ResponseBody>(deny.url, { query: '{ hello }' }, user),
      postJson<ResponseBody>(allow.url, { query: '{ hello }' }, user),
    ]);
    expect(performance.now() - started).toBeLessThan(STORE_TIMEOUT_MS + TOLERANCE_MS);
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBeNull();
    expect(refused.body).toEqual({ errors: [{ message: expect.any(String), extensions: { code: 'RATE_LIMITER_UNAVAILABLE' } }] });
    expect(served.status).toBe(200);
    expect(served.body).toEqual({ data: { hello: 'hi' } });
    expectWarned(allow.logger, 'allowing');
    expectWarned(deny.logger, 'denying');
  });
});
