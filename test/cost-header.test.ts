// SPEC §4, the GraphQL-Cost request header, through real HTTP on Apollo
// Server and GraphQL Yoga: `report` reports this response's cost, `validate`
// prices and checks the operation without running a resolver or taking a
// token, any other value is a 400, and `costHeader: false` ignores it.
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeEach, describe, expect, inject, it } from 'vitest';
import { MemoryStore, Rate, RedisStore, TokenBucket, tokenBucketDirectiveTypeDefs } from '../src/index.js';
import type { BucketStore, LimiterOptions } from '../src/index.js';
import { SERVERS, startHttpServer, tokensLeft } from './support/http-servers.js';
import type { RunningHttpServer, ServerKind } from './support/http-servers.js';
import type { ResponseBody } from './support/graphql.js';
import { redisClient, uniquePrefix } from './support/clients.js';

const typeDefs = `${tokenBucketDirectiveTypeDefs}
type Query {
  ping: Int @tokenBucket(name: "ping", cost: 2)
  pong: Int @tokenBucket(name: "pong", cost: 3)
  many(first: Int!): [Thing!]!
  free: Int
}
type Thing { id: ID! @tokenBucket(name: "ping", cost: 1) many(first: Int!): [Thing!]! }
`;
// Slow enough that nothing visible refills during a test.
const ping = new TokenBucket('ping', 10, Rate.perHour(10));
const pong = new TokenBucket('pong', 5, new Rate(1, 1000));

let resolved: Record<string, number>;
const resolvers = {
  Query: {
    ping: () => ++resolved['ping']!,
    pong: () => ++resolved['pong']!,
    many: () => [{ id: String(++resolved['many']!) }],
    free: () => ++resolved['free']!,
  },
};

const running: RunningHttpServer[] = [];
beforeEach(() => {
  resolved = { ping: 0, pong: 0, many: 0, free: 0 };
});
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.stop()));
});

const clients: Redis[] = [];
afterAll(async () => {
  await Promise.all(clients.map((c) => c.quit().catch(() => undefined)));
});

let users = 0;
const freshUser = (): string => `cost-header-${++users}`;

describe.each(SERVERS)('the GraphQL-Cost header on %s', (kind: ServerKind) => {
  async function serve(limits: Partial<Omit<LimiterOptions<unknown>, 'identify'>> = {}) {
    const store: BucketStore = limits.store ?? new MemoryStore();
    const server = await startHttpServer(kind, { typeDefs, resolvers, limits: { store, buckets: [ping, pong], ...limits } });
    running.push(server);
    const post = (query: string, user: string, cost?: string) =>
      server.post({ query }, { 'x-user': user, ...(cost === undefined ? {} : { 'GraphQL-Cost': cost }) });
    return { server, store, post };
  }

  it('validate: prices and checks without running a resolver or taking a token', async () => {
    const { store, post } = await serve();
    const user = freshUser();
    expect((await post('{ ping }', user)).status).toBe(200);
    expect(await tokensLeft(store, ping, user)).toBe(8);
    resolved['ping'] = 0;

    const answer = await post('{ ping pong }', user, 'validate');
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({
      extensions: { rateLimit: { ping: { cost: 2, remaining: 8, capacity: 10 }, pong: { cost: 3, remaining: 5, capacity: 5 } } },
    });
    expect(resolved).toEqual({ ping: 0, pong: 0, many: 0, free: 0 });
    expect(await tokensLeft(store, ping, user)).toBe(8);
    expect(await tokensLeft(store, pong, user)).toBe(5);
  });

  it('validate: retryAfter only for a bucket that would deny now, null for one that never can', async () => {
    const { store, post } = await serve();
    const user = freshUser();
    for (let i = 0; i < 5; i++) expect((await post('{ ping }', user)).status).toBe(200);
    resolved['ping'] = 0;

    const short = await post('{ ping pong }', user, 'validate');
    expect(short.status).toBe(200);
    expect(short.body).toEqual({
      extensions: {
        rateLimit: {
          ping: { cost: 2, remaining: 0, capacity: 10, retryAfter: expect.any(Number) },
          pong: { cost: 3, remaining: 5, capacity: 5 },
        },
      },
    });
    // Two tokens at ten an hour: 720 s, less what refilled since the last one was taken.
    const retryAfter = (short.body.extensions?.['rateLimit'] as Record<string, { retryAfter: number }>)['ping']!.retryAfter;
    expect(retryAfter).toBeGreaterThan(715);
    expect(retryAfter).toBeLessThanOrEqual(720);

    const never = await post('{ many(first: 20) { id } }', user, 'validate');
    expect(never.status).toBe(200);
    expect(never.body).toEqual({ extensions: { rateLimit: { ping: { cost: 20, remaining: 0, capacity: 10, retryAfter: null } } } });
    expect(resolved).toEqual({ ping: 0, pong: 0, many: 0, free: 0 });
    expect(await tokensLeft(store, pong, user)).toBe(5);
  });

  it.each([
    ['MemoryStore', () => new MemoryStore()],
    [
      'RedisStore',
      () => {
        const client = redisClient(inject('redisUrl'));
        clients.push(client);
        return new RedisStore(client, { prefix: uniquePrefix('cost-header') });
      },
    ],
  ])('validate: a cost past Number.MAX_SAFE_INTEGER is a bucket that never fits, not a store failure (%s)', async (_, makeStore) => {
    const store: BucketStore = makeStore();
    const { server, post } = await serve({ store });
    const user = freshUser();
    const query = '{ many(first: 2147483647) { many(first: 2147483647) { many(first: 2147483647) { id } } } }';
    const answer = await post(query, user, 'validate');
    expect(answer.status).toBe(200);
    // 2147483647³ ≈ 9.9e27 ids at 1 token each: beyond 2^53, reported as the nearest double; never fits a capacity of 10.
    expect(answer.body).toEqual({
      extensions: { rateLimit: { ping: { cost: 2147483647 ** 3, remaining: 10, capacity: 10, retryAfter: null } } },
    });
    expect(server.logger.warnings).toEqual([]);
    expect(resolved['many']).toBe(0);
    // Without the header, the same operation is the 429 it always was.
    const denied = await post(query, user);
    expect(denied.status).toBe(429);
    expect(denied.body.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', retryAfter: null, bucket: 'ping' });
  });

  it('validate: a measured bucket that is short says it would deny, with no retryAfter', async () => {
    const { post } = await serve({ measure: ['ping'] });
    const user = freshUser();
    for (let i = 0; i < 5; i++) expect((await post('{ ping }', user)).status).toBe(200);
    const answer = await post('{ ping pong }', user, 'validate');
    expect(answer.body).toEqual({
      extensions: { rateLimit: { ping: { cost: 2, remaining: 0, capacity: 10, wouldDeny: true }, pong: { cost: 3, remaining: 5, capacity: 5 } } },
    });
  });

  it("validate: checks a plan's bucket when identify returns one", async () => {
    const gold = new TokenBucket('ping', 1000, Rate.perHour(1000));
    const store = new MemoryStore();
    const server = await startHttpServer(kind, {
      typeDefs,
      resolvers,
      limits: { store, buckets: [ping, pong] },
      identify: (user, bucket) => (bucket.name === 'ping' && user.endsWith('-gold') ? { key: user, bucket: gold } : user),
    });
    running.push(server);
    const user = `${freshUser()}-gold`;
    const answer = await server.post({ query: '{ many(first: 20) { id } }' }, { 'x-user': user, 'GraphQL-Cost': 'validate' });
    // 20 tokens: more than the default bucket's 10, within the plan's 1000.
    expect(answer.body).toEqual({ extensions: { rateLimit: { ping: { cost: 20, remaining: 1000, capacity: 1000 } } } });
    expect(await tokensLeft(store, gold, user)).toBe(1000);
  });

  it('validate: an operation that touches no bucket reports no bucket, and runs nothing', async () => {
    const { post } = await serve();
    const answer = await post('{ free }', freshUser(), 'validate');
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ extensions: { rateLimit: {} } });
    expect(resolved['free']).toBe(0);
  });

  it('validate: each operation of a batch is checked on its own, none runs', async () => {
    const { server, store } = await serve();
    const user = freshUser();
    const answer = await server.post<ResponseBody[]>([{ query: '{ ping }' }, { query: '{ pong }' }], { 'x-user': user, 'GraphQL-Cost': 'validate' });
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual([
      { extensions: { rateLimit: { ping: { cost: 2, remaining: 10, capacity: 10 } } } },
      { extensions: { rateLimit: { pong: { cost: 3, remaining: 5, capacity: 5 } } } },
    ]);
    expect(resolved).toEqual({ ping: 0, pong: 0, many: 0, free: 0 });
    expect(await tokensLeft(store, ping, user)).toBe(10);
  });

  it('validate: a failing store answers RATE_LIMITER_UNAVAILABLE, 503, and runs nothing', async () => {
    const failing: BucketStore = {
      acquire: () => Promise.reject(new Error('connection refused')),
      reset: () => Promise.resolve(false),
    };
    const { post } = await serve({ store: failing });
    const answer = await post('{ ping }', freshUser(), 'validate');
    expect(answer.status).toBe(503);
    expect(answer.body.errors?.map((e) => e.extensions?.['code'])).toEqual(['RATE_LIMITER_UNAVAILABLE']);
    expect(resolved['ping']).toBe(0);
  });

  it.each(['validate', 'VALIDATE', 'Validate', ' validate\t'])('matches %j whole and in any case', async (value) => {
    const { store, post } = await serve();
    const user = freshUser();
    const answer = await post('{ ping }', user, value);
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ extensions: { rateLimit: { ping: { cost: 2, remaining: 10, capacity: 10 } } } });
    expect(await tokensLeft(store, ping, user)).toBe(10);
  });

  it('report: this response carries its cost report, the next one without the header does not', async () => {
    const { post } = await serve();
    const user = freshUser();
    for (const [value, remaining] of [['report', 8], ['REPORT', 6]] as const) {
      const reported = await post('{ ping }', user, value);
      expect(reported.status).toBe(200);
      expect(reported.body).toEqual({ data: { ping: expect.any(Number) }, extensions: { rateLimit: { ping: { cost: 2, remaining, capacity: 10 } } } });
    }
    const plain = await post('{ ping }', user);
    expect(plain.status).toBe(200);
    expect(plain.body.extensions).toBeUndefined();
  });

  it.each([
    ['empty', ''],
    ['another word', 'yes'],
    ['both values (the header sent twice)', 'report, validate'],
    ['a longer word', 'validate-please'],
    ['1,000 characters', 'x'.repeat(1000)],
  ])(
    'answers a value that is %s with a 400 naming the accepted values, running nothing and taking nothing',
    async (_label, value) => {
      const { store, post } = await serve();
      const user = freshUser();
      const answer = await post('{ ping }', user, value);
      expect(answer.status).toBe(400);
      expect(answer.body.data).toBeUndefined();
      expect(answer.body.errors).toHaveLength(1);
      const [error] = answer.body.errors!;
      expect(error!.extensions?.['code']).toBe('BAD_REQUEST');
      expect(error!.message).toContain('"report" or "validate"');
      expect(error!.message.length).toBeLessThan(200);
      expect(resolved['ping']).toBe(0);
      expect(await tokensLeft(store, ping, user)).toBe(10);
    },
  );

  it('answers a bad value with a 400 even for an operation that touches no bucket', async () => {
    const { post } = await serve();
    const answer = await post('{ free }', freshUser(), 'nope');
    expect(answer.status).toBe(400);
    expect(resolved['free']).toBe(0);
  });

  it('costHeader: false ignores the header: validate runs and charges, a bad value is served', async () => {
    const { store, post } = await serve({ costHeader: false });
    const user = freshUser();
    const validate = await post('{ ping }', user, 'validate');
    expect(validate.status).toBe(200);
    expect(validate.body).toEqual({ data: { ping: 1 } });
    expect(await tokensLeft(store, ping, user)).toBe(8);
    const report = await post('{ ping }', user, 'report');
    expect(report.body).toEqual({ data: { ping: 2 } });
    const bad = await post('{ ping }', user, 'nope');
    expect(bad.status).toBe(200);
    expect(bad.body).toEqual({ data: { ping: 3 } });
  });
});

describe('the costHeader option', () => {
  it('must be a boolean', async () => {
    const { tokenBucketPlugin } = await import('../src/index.js');
    expect(() =>
      tokenBucketPlugin({ store: new MemoryStore(), buckets: [ping], identify: () => 'x', costHeader: 'yes' as unknown as boolean }),
    ).toThrow(/option "costHeader" must be a boolean/);
  });
});
