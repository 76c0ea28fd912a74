// SPEC §4: a refund is one store call per operation, and an operation with
// nothing to refund makes none; a GraphQL-Cost: validate answer is one call
// that writes nothing. Counted by the Redis server itself (INFO
// commandstats), on a server of our own.
import { ApolloServer } from '@apollo/server';
import type { BaseContext } from '@apollo/server';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Rate, RedisStore, TokenBucket, tokenBucketDirectiveTypeDefs, tokenBucketPlugin } from '../src/index.js';
import { uniquePrefix } from './support/clients.js';
import { captureLogger, serveHttp } from './support/graphql.js';
import type { HttpEndpoint } from './support/graphql.js';
import { ownRedis } from './support/own-redis.js';

interface Context extends BaseContext {
  user: string;
}

const typeDefs = `${tokenBucketDirectiveTypeDefs}
type Query {
  items(first: Int!): [Item!]! @tokenBucket(name: "api")
}
type Item { id: ID! price: Int @tokenBucket(name: "price", cost: 1) }
`;
const buckets = [new TokenBucket('api', 100_000, Rate.perSecond(1000)), new TokenBucket('price', 100_000, Rate.perSecond(1000))];
const STOCK = Array.from({ length: 5 }, (_, i) => ({ id: String(i), price: i }));
const N = 12;

// A server of our own: INFO commandstats counts every client's calls.
const own = ownRedis();
let http: HttpEndpoint;
let apollo: ApolloServer<Context>;

beforeAll(async () => {
  apollo = new ApolloServer<Context>({
    typeDefs,
    resolvers: { Query: { items: (_: unknown, { first }: { first: number }) => STOCK.slice(0, first) } },
    logger: captureLogger(),
    plugins: [
      tokenBucketPlugin<Context>({
        store: new RedisStore(own.client, { prefix: uniquePrefix('refund-calls') }),
        buckets,
        identify: ({ contextValue }) => contextValue.user,
        refundUnusedCost: true,
        rateLimitHeaders: true,
      }),
    ],
  });
  http = await serveHttp(apollo, ({ req }) => Promise.resolve({ user: String(req.headers['x-user'] ?? 'nobody') }));
});

afterAll(async () => {
  await apollo?.stop();
});

let users = 0;
const post = (query: string, headers: Record<string, string> = {}) => http.post({ query }, { 'x-user': `calls-${++users}`, ...headers });

describe('store calls with refundUnusedCost, counted by Redis', () => {
  beforeEach(async () => {
    // The first calls after a start load the scripts (EVALSHA, NOSCRIPT, EVAL); count the steady state.
    expect((await post('{ items(first: 10) { id price } }')).status).toBe(200);
    expect((await post('{ items(first: 1) { id } }', { 'GraphQL-Cost': 'validate' })).status).toBe(200);
    await own.resetStats();
  });

  it(`makes one script call for each of ${N} operations that used their whole estimate`, async () => {
    for (let i = 0; i < N; i++) {
      const answer = await post('{ items(first: 5) { id price } }');
      expect(answer.status).toBe(200);
      expect(answer.headers.get('ratelimit')).toMatch(/^"api";r=\d+;t=\d+, "price";r=\d+;t=\d+$/);
    }
    expect(await own.roundTrips()).toBe(N);
  });

  it(`makes two for each of ${N} operations that had something to give back, whatever the buckets`, async () => {
    for (let i = 0; i < N; i++) expect((await post('{ items(first: 50) { id price } }')).status).toBe(200);
    expect(await own.roundTrips()).toBe(2 * N);
  });

  it('answers GraphQL-Cost: validate with one script call that only reads', async () => {
    for (let i = 0; i < N; i++) expect((await post('{ items(first: 50) { id price } }', { 'GraphQL-Cost': 'validate' })).status).toBe(200);
    expect(await own.roundTrips()).toBe(N);
    // Inside the script: the clock and the buckets' values, nothing written.
    const commands = Object.keys(await own.commandCalls()).sort();
    expect(commands.filter((name) => !['evalsha', 'eval', 'time', 'get', 'mget'].includes(name))).toEqual([]);
  });
});
