// SPEC §3 "When the store fails or times out": against a Redis of our own that
// we crash (SIGKILL) and freeze (SIGSTOP). 'allow' serves and logs, 'deny'
// answers 503 RATE_LIMITER_UNAVAILABLE; every answer comes within the
// timeout; nothing is left unhandled; limiting resumes with Redis.
import { ApolloServer } from '@apollo/server';
import type { BaseContext } from '@apollo/server';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { MemoryStore, Rate, RedisStore, TokenBucket, tokenBucketDirectiveTypeDefs, tokenBucketPlugin } from '../src/index.js';
import type { AcquireRequest, BatchAdmission, BucketStore } from '../src/index.js';
import { redisClient, uniquePrefix } from './support/clients.js';
import { RecordingStore, captureLogger, serveHttp, waitFor, watchUnhandledRejections } from './support/graphql.js';
import type { CapturedLogger, HttpAnswer, HttpEndpoint, ResponseBody } from './support/graphql.js';
import { startRedisServer } from './support/redis-server.js';
import type { RedisServerProcess } from './support/redis-server.js';

const STORE_TIMEOUT_MS = 200;
/** Slack for HTTP, Apollo and a busy machine on top of the store timeout. */
const TOLERANCE_MS = 400;

interface Context extends BaseContext {
  user: string;
}

const typeDefs = `${tokenBucketDirectiveTypeDefs}
type Query {
  tight: Int @tokenBucket(name: "tight", cost: 1)
  hello: String
}
`;
const tight = new TokenBucket('tight', 2, Rate.perHour(2));
const TIGHT = { query: '{ tight }' };

const context = ({ req }: { req: { headers: Record<string, string | string[] | undefined> } }): Promise<Context> =>
  Promise.resolve({ user: String(req.headers['x-user-id'] ?? 'anonymous') });

interface Endpoint {
  http: HttpEndpoint;
  logger: CapturedLogger;
}

const stops: (() => Promise<void>)[] = [];

async function serve(store: BucketStore, onStoreError: 'allow' | 'deny'): Promise<Endpoint> {
  const logger = captureLogger();
  const server = new ApolloServer<Context>({
    typeDefs,
    resolvers: { Query: { tight: () => 1, hello: () => 'hi' } },
    logger,
    includeStacktraceInErrorResponses: false,
    plugins: [
      tokenBucketPlugin<Context>({
        store,
        buckets: [tight],
        identify: ({ contextValue }) => contextValue.user,
        onStoreError,
        storeTimeoutMs: STORE_TIMEOUT_MS,
        reportCost: true,
      }),
    ],
  });
  const http = await serveHttp(server, context);
  stops.push(() => server.stop());
  return { http, logger };
}

let users = 0;
function freshUser(): Record<string, string> {
  users += 1;
  return { 'x-user-id': `store-errors-${users}` };
}

function expectServed(answer: HttpAnswer<ResponseBody>): void {
  expect(answer.status).toBe(200);
  expect(answer.body.errors).toBeUndefined();
  expect(answer.body.data).toEqual({ tight: 1 });
}

function expectUnavailable(answer: HttpAnswer<ResponseBody>): void {
  expect(answer.status).toBe(503);
  expect(answer.body).toEqual({
    errors: [{ message: expect.any(String), extensions: { code: 'RATE_LIMITER_UNAVAILABLE' } }],
  });
}

/** Spends a fresh user's 2 tokens and checks the third operation is denied: the store is in charge again. */
async function expectLimiting(endpoint: Endpoint): Promise<void> {
  const user = freshUser();
  const first = await endpoint.http.post(TIGHT, user);
  expectServed(first);
  expect(first.body.extensions).toEqual({ rateLimit: { tight: { cost: 1, remaining: 1, capacity: 2 } } });
  expectServed(await endpoint.http.post(TIGHT, user));
  const denied = await endpoint.http.post(TIGHT, user);
  expect(denied.status).toBe(429);
  expect(denied.body.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', bucket: 'tight', cost: 1 });
}

const probe = new TokenBucket('probe', 1e9, Rate.perSecond(1e9));

/**
 * Waits until the store answers from Redis again: the client and the store's
 * own connection each reconnect on their own schedule after a restart, and a
 * request served before the store's has would be served unlimited ('allow').
 */
async function waitForStoreAnswers(recording: RecordingStore): Promise<void> {
  await waitFor('the store to answer again', 10_000, async () => {
    await recording.inner.acquire(probe, 'probe', 1);
    return true;
  });
}

describe('a Redis that fails', () => {
  let redisServer: RedisServerProcess;
  let redis: Redis;
  let store: RecordingStore;
  let allow: Endpoint;
  let deny: Endpoint;
  let unhandled: ReturnType<typeof watchUnhandledRejections>;

  beforeAll(async () => {
    redisServer = await startRedisServer();
  });

  afterAll(async () => {
    await redisServer?.stop();
  });

  beforeEach(async () => {
    unhandled = watchUnhandledRejections();
    if (!(await isAnswering(redisServer))) await redisServer.restart();
    // Fail fast while disconnected instead of queueing; one retry per command.
    redis = redisClient(redisServer.url, { enableOfflineQueue: false, maxRetriesPerRequest: 1 });
    redis.on('error', () => {}); // connection errors are expected here; the plugin reports what matters
    await waitFor('the client to connect', 10_000, () => redis.status === 'ready');
    store = new RecordingStore(new RedisStore(redis, { prefix: uniquePrefix('plugin-store-errors') }));
    [allow, deny] = await Promise.all([serve(store, 'allow'), serve(store, 'deny')]);
    await expectLimiting(allow);
  });

  afterEach(async () => {
    await Promise.all(stops.splice(0).map((stop) => stop()));
    redis.disconnect();
    unhandled.stop();
  });

  it('that crashed: allow serves and logs, deny answers 503, both at once; limiting resumes after a restart', async () => {
    await redisServer.kill();
    const warningsBefore = deny.logger.warnings.length;
    for (let i = 0; i < 5; i++) {
      const user = freshUser();
      const [served, refused] = await Promise.all([allow.http.post(TIGHT, user), deny.http.post(TIGHT, user)]);
      expectServed(served);
      expectUnavailable(refused);
      expect(served.ms).toBeLessThan(STORE_TIMEOUT_MS + TOLERANCE_MS);
      expect(refused.ms).toBeLessThan(STORE_TIMEOUT_MS + TOLERANCE_MS);
    }
    expect(allow.logger.warnings.length).toBeGreaterThan(0);
    expect(allow.logger.warnings.every((w) => /store/i.test(w))).toBe(true);
    expect(deny.logger.warnings.length).toBeGreaterThan(warningsBefore);

    await redisServer.restart();
    await waitForStoreAnswers(store);
    await expectLimiting(allow);
    await expectLimiting(deny);
    await waitFor('every store call to settle', 5_000, () => store.pending === 0);
    expect(unhandled.rejections).toEqual([]);
  });

  it('that hangs: answers within storeTimeoutMs, allow serving and deny refusing; limiting resumes when it does', async () => {
    await redisServer.pause();
    for (let i = 0; i < 3; i++) {
      const user = freshUser();
      const [served, refused] = await Promise.all([allow.http.post(TIGHT, user), deny.http.post(TIGHT, user)]);
      expectServed(served);
      expectUnavailable(refused);
      for (const answer of [served, refused]) {
        expect(answer.ms).toBeGreaterThanOrEqual(STORE_TIMEOUT_MS - 5);
        expect(answer.ms).toBeLessThan(STORE_TIMEOUT_MS + TOLERANCE_MS);
      }
    }
    expect(allow.logger.warnings.some((w) => w.includes(`${STORE_TIMEOUT_MS} ms`))).toBe(true);
    expect(store.pending).toBe(6); // still waiting on the frozen server, and handled when it answers

    await redisServer.resume();
    await waitFor('the late answers to arrive', 5_000, () => store.pending === 0);
    await expectLimiting(allow);
    await expectLimiting(deny);
    expect(unhandled.rejections).toEqual([]);
  });

  it('that hangs and then crashes: the late failures are handled, and limiting resumes after a restart', async () => {
    await redisServer.pause();
    const user = freshUser();
    expectServed(await allow.http.post(TIGHT, user));
    expectUnavailable(await deny.http.post(TIGHT, user));
    expect(store.pending).toBe(2);

    await redisServer.kill();
    await waitFor('the abandoned store calls to fail', 10_000, () => store.pending === 0);
    expect(store.outcomes.slice(-2)).toEqual(['rejected', 'rejected']);

    await redisServer.restart();
    await waitForStoreAnswers(store);
    await expectLimiting(deny);
    expect(unhandled.rejections).toEqual([]);
  });
});

/** A store of the user's own making that fails the way a network client does. */
class FailingStore implements BucketStore {
  constructor(private readonly failure: () => unknown) {}

  acquire(): never {
    throw new Error('not used by the plugin');
  }

  acquireAll(_requests: readonly AcquireRequest[]): Promise<BatchAdmission> {
    return Promise.reject(this.failure());
  }

  reset(): Promise<boolean> {
    return Promise.resolve(false);
  }
}

describe('a store of another kind that fails', () => {
  afterEach(async () => {
    await Promise.all(stops.splice(0).map((stop) => stop()));
  });

  // `fetch` rejects with `TypeError: fetch failed` when the network is down: an HTTP-based store fails that way.
  it.each([
    ['an Error', () => new Error('connection reset')],
    ['a TypeError, as fetch does', () => new TypeError('fetch failed')],
    ['a value that is not an Error', () => 'socket hang up'],
  ])('that rejects with %s: onStoreError applies', async (_name, failure) => {
    const unhandled = watchUnhandledRejections();
    try {
      const allowing = await serve(new FailingStore(failure), 'allow');
      const denying = await serve(new FailingStore(failure), 'deny');
      expectServed(await allowing.http.post(TIGHT, freshUser()));
      expect(allowing.logger.warnings).toHaveLength(1);
      expectUnavailable(await denying.http.post(TIGHT, freshUser()));
      expect(unhandled.rejections).toEqual([]);
    } finally {
      unhandled.stop();
    }
  });

  it('that never answers: each request is answered after storeTimeoutMs', async () => {
    const never: BucketStore = {
      acquire: () => new Promise(() => {}),
      acquireAll: () => new Promise(() => {}),
      reset: () => Promise.resolve(false),
    };
    const allowing = await serve(never, 'allow');
    const denying = await serve(never, 'deny');
    const [served, refused] = await Promise.all([allowing.http.post(TIGHT, freshUser()), denying.http.post(TIGHT, freshUser())]);
    expectServed(served);
    expectUnavailable(refused);
    for (const answer of [served, refused]) {
      expect(answer.ms).toBeGreaterThanOrEqual(STORE_TIMEOUT_MS - 5);
      expect(answer.ms).toBeLessThan(STORE_TIMEOUT_MS + TOLERANCE_MS);
    }
  });

  it('that throws instead of rejecting: still a store failure, allow serving and deny refusing', async () => {
    const throwing: BucketStore = {
      acquire: () => Promise.resolve({ allowed: true, remaining: 0 }),
      acquireAll: () => {
        throw new Error('connection pool exhausted');
      },
      reset: () => Promise.resolve(false),
    };
    const allowing = await serve(throwing, 'allow');
    const denying = await serve(throwing, 'deny');
    expectServed(await allowing.http.post(TIGHT, freshUser()));
    expect(allowing.logger.warnings.join('\n')).toContain('connection pool exhausted');
    expectUnavailable(await denying.http.post(TIGHT, freshUser()));
  });

  it('does not delay an operation that touches no annotated field', async () => {
    const never: BucketStore = {
      acquire: () => new Promise(() => {}),
      acquireAll: () => new Promise(() => {}),
      reset: () => Promise.resolve(false),
    };
    const denying = await serve(never, 'deny');
    const answer = await denying.http.post({ query: '{ hello }' });
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ data: { hello: 'hi' } });
    expect(answer.ms).toBeLessThan(STORE_TIMEOUT_MS);
  });

  it('with a store that has only acquire and reset (no acquireAll), limits and reports failures', async () => {
    const memory = new MemoryStore();
    const minimal: BucketStore = {
      acquire: (bucket, key, cost) => memory.acquire(bucket, key, cost),
      reset: (bucket, key) => memory.reset(bucket, key),
    };
    await expectLimiting(await serve(minimal, 'deny'));
    const failing: BucketStore = {
      acquire: () => Promise.reject(new Error('store is down')),
      reset: () => Promise.resolve(false),
    };
    expectUnavailable(await (await serve(failing, 'deny')).http.post(TIGHT, freshUser()));
  });

  it('with a store that works, onStoreError: deny limits as usual', async () => {
    await expectLimiting(await serve(new MemoryStore(), 'deny'));
  });
});

/** PING on a fresh connection, with a short deadline. */
async function isAnswering(server: RedisServerProcess): Promise<boolean> {
  const probe = redisClient(server.url, { enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
  probe.on('error', () => {});
  try {
    await waitFor('a probe connection', 1_000, () => probe.status === 'ready');
    return (await probe.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    probe.disconnect();
  }
}
