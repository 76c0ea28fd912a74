// SPEC §3 "acquires them all in one store call (one Redis round trip on a
// single Redis)": counted by the Redis server itself, on a server of our own.
import { ApolloServer } from '@apollo/server';
import type { BaseContext } from '@apollo/server';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { Rate, RedisStore, TokenBucket, tokenBucketDirectiveTypeDefs, tokenBucketPlugin } from '../src/index.js';
import type { TokenBucketPluginOptions } from '../src/index.js';
import { uniquePrefix } from './support/clients.js';
import { captureLogger, errorCodes, singleResult } from './support/graphql.js';
import { ownRedis } from './support/own-redis.js';

interface Context extends BaseContext {
  user: string;
  ip: string;
}

const typeDefs = `${tokenBucketDirectiveTypeDefs}
type Query {
  a: Int @tokenBucket(name: "a", cost: 1)
  b: Int @tokenBucket(name: "b", cost: 2)
  list(first: Int = 5): [Entry!]! @tokenBucket(name: "c")
  free: Int
}
type Entry { n: Int! next: Entry }
`;
const buckets = [
  new TokenBucket('a', 1000, Rate.perSecond(1000)),
  new TokenBucket('b', 1000, Rate.perSecond(1000)),
  new TokenBucket('c', 100, Rate.perHour(100)),
];
const THREE_BUCKETS = '{ a b list(first: 1) { n } }';
const N = 12;

// A server of our own: INFO commandstats counts every client's calls.
const own = ownRedis();
const servers: ApolloServer<Context>[] = [];

afterAll(async () => {
  await Promise.all(servers.map((s) => s.stop()));
});

async function server(options: Partial<TokenBucketPluginOptions<Context>> = {}): Promise<ApolloServer<Context>> {
  const apollo = new ApolloServer<Context>({
    typeDefs,
    resolvers: { Query: { a: () => 1, b: () => 2, list: () => [{ n: 1 }], free: () => 0 } },
    logger: captureLogger(),
    plugins: [
      tokenBucketPlugin<Context>({
        store: new RedisStore(own.client, { prefix: uniquePrefix('plugin-calls') }),
        buckets,
        identify: ({ contextValue }) => contextValue.user,
        ...options,
      }),
    ],
  });
  servers.push(apollo);
  await apollo.start();
  return apollo;
}

let users = 0;
async function run(apollo: ApolloServer<Context>, query: string, user = `user-${++users}`) {
  return singleResult(await apollo.executeOperation({ query }, { contextValue: { user, ip: '192.0.2.1' } }));
}

/**
 * `n` script calls of a store made for the test: its first on its connection goes by source (EVAL),
 * every later one by hash (EVALSHA); none is answered NOSCRIPT and sent again.
 */
const calls = (n: number) => ({ evalsha: n - 1, eval: 1 });

describe('store calls per operation, counted by Redis', () => {
  beforeEach(async () => {
    // The first call after a start loads the script (EVALSHA, NOSCRIPT, EVAL); count the steady state.
    const warm = await server();
    expect((await run(warm, THREE_BUCKETS)).errors).toBeUndefined();
    await own.resetStats();
  });

  it(`makes exactly one script call for each of ${N} operations touching 3 buckets`, async () => {
    const apollo = await server();
    for (let i = 0; i < N; i++) {
      const result = await run(apollo, THREE_BUCKETS, i % 2 === 0 ? 'same-user' : `user-${++users}`);
      expect(result.errors).toBeUndefined();
    }
    expect(await own.scriptCalls()).toEqual(calls(N));
  });

  it('makes one script call even when the buckets of an operation are keyed by different identities', async () => {
    const apollo = await server({ identify: ({ contextValue }, bucket) => (bucket.name === 'c' ? contextValue.ip : contextValue.user) });
    for (let i = 0; i < N; i++) expect((await run(apollo, THREE_BUCKETS)).errors).toBeUndefined();
    expect(await own.scriptCalls()).toEqual(calls(N));
  });

  it('with denyCache: false, makes one script call for a denied operation too', async () => {
    const apollo = await server({ denyCache: false });
    // `c` holds 100 and this costs 12 x (Entry 1 + next 1) = 24: four operations pass, the rest are denied.
    for (let i = 0; i < N; i++) {
      const result = await run(apollo, '{ a b list(first: 12) { next { n } } }', 'heavy-user');
      expect(errorCodes(result)).toEqual(i < 4 ? [] : ['RATE_LIMITED']);
    }
    expect(await own.scriptCalls()).toEqual(calls(N));
  });

  it('with the deny cache, makes no script call for a denial this replica already had from the store', async () => {
    const apollo = await server();
    // `c` refills 100 an hour: the 20 tokens the first denial lacks are minutes away.
    for (let i = 0; i < N; i++) {
      const result = await run(apollo, '{ a b list(first: 12) { next { n } } }', 'heavy-user');
      expect(errorCodes(result)).toEqual(i < 4 ? [] : ['RATE_LIMITED']);
    }
    expect(await own.scriptCalls()).toEqual(calls(4 + 1));
  });

  it('makes no call for operations that touch no annotated field, or cost more than a capacity', async () => {
    const apollo = await server();
    for (let i = 0; i < N; i++) expect(await run(apollo, '{ free __typename }')).toEqual({ data: { free: 0, __typename: 'Query' } });
    // c is charged 1000 x (Entry 1 + next 1) = 2000, more than its capacity of 100.
    const never = await run(apollo, '{ a list(first: 1000) { next { n } } }');
    expect(never.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', retryAfter: null, bucket: 'c', cost: 2000 });
    expect(await own.scriptCalls()).toEqual({ evalsha: 0, eval: 0 });
  });
});
