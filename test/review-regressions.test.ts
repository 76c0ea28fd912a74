// Regressions: each of these failed before its fix.
import { ApolloServer } from '@apollo/server';
import { makeExecutableSchema } from '@graphql-tools/schema';
import { getIntrospectionQuery, parse } from 'graphql';
import type { OperationDefinitionNode } from 'graphql';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import {
  CostModel,
  getRetryAfter,
  MemoryStore,
  Rate,
  RedisStore,
  TokenBucket,
  tokenBucketDirectiveTypeDefs,
  tokenBucketPlugin,
} from '../src/index.js';
import { uniquePrefix } from './support/clients.js';

function operation(source: string): [ReturnType<typeof parse>, OperationDefinitionNode] {
  const document = parse(source);
  return [document, document.definitions.find((d): d is OperationDefinitionNode => d.kind === 'OperationDefinition')!];
}

describe('getRetryAfter', () => {
  it('reads an Apollo Client error for a 429, whose body sits in networkError.result', () => {
    const serverError = Object.assign(new Error('Response not successful: Received status code 429'), {
      name: 'ServerError',
      statusCode: 429,
      result: { errors: [{ message: 'Rate limit', extensions: { code: 'RATE_LIMITED', retryAfter: 2.5 } }] },
    });
    const apolloError = Object.assign(new Error(serverError.message), { name: 'ApolloError', graphQLErrors: [], networkError: serverError });
    expect(getRetryAfter(apolloError)).toBe(2.5);
  });
});

describe('one tokenBucketPlugin shared by two servers', () => {
  it('charges each server by its own schema', async () => {
    const api = new TokenBucket('api', 2, Rate.perMinute(1));
    const limiter = tokenBucketPlugin({ store: new MemoryStore(), buckets: [api], identify: () => 'u' });
    const a = new ApolloServer({
      typeDefs: `${tokenBucketDirectiveTypeDefs} type Query { search: String @tokenBucket(name: "api", cost: 1) }`,
      resolvers: { Query: { search: () => 'x' } },
      plugins: [limiter],
    });
    const b = new ApolloServer({
      typeDefs: `${tokenBucketDirectiveTypeDefs} type Query { stats: String @tokenBucket(name: "api", cost: 1) }`,
      resolvers: { Query: { stats: () => 'y' } },
      plugins: [limiter],
    });
    await a.start();
    await b.start();
    const codes: unknown[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await a.executeOperation({ query: '{ search }' });
      codes.push(r.body.kind === 'single' ? (r.body.singleResult.errors?.[0]?.extensions?.['code'] ?? 'ok') : '?');
    }
    await a.stop();
    await b.stop();
    expect(codes).toEqual(['ok', 'ok', 'RATE_LIMITED']);
  });
});

describe('cost analysis', () => {
  const schema = makeExecutableSchema({
    typeDefs: `${tokenBucketDirectiveTypeDefs}
      directive @cost(weight: String!) on FIELD_DEFINITION
      type Item { a: String @cost(weight: "0.1") b: String @cost(weight: "0.1") c: String @cost(weight: "0.1") }
      type Query @tokenBucket(name: "api") {
        items(first: Int): [Item!]! @cost(weight: "0")
        floats(first: Float): [Item!]! @cost(weight: "0")
      }`,
  });

  it('charges 10 x (0.1 + 0.1 + 0.1) as 3, not 4', () => {
    expect(new CostModel(schema).costOf(...operation('{ items(first: 10) { a b c } }')).get('api')).toBe(3);
  });

  it('treats a Float size that overflows to Infinity as huge, not as absent', () => {
    const cost = new CostModel(schema).costOf(...operation('{ floats(first: 1e400) { a } }')).get('api') ?? 0;
    expect(cost).toBeGreaterThan(Number.MAX_SAFE_INTEGER);
  });

  it('charges introspection to a type-level directive on Query, unless told not to', () => {
    const introspection = operation(getIntrospectionQuery());
    expect(new CostModel(schema).costOf(...introspection).get('api')).toBeGreaterThan(1000);
    expect(new CostModel(schema).costOf(...operation('{ __type(name: "Item") { name } }')).get('api')).toBe(1);
    expect(new CostModel(schema, { chargeIntrospection: false }).costOf(...introspection).size).toBe(0);
  });
});

describe('very fast rates (under 0.5 µs per token)', () => {
  const fast = new TokenBucket('fast', 10, new Rate(10_000_000, 1000));
  const zero = new TokenBucket('zero', 0, new Rate(10_000_000, 1000));
  const redis = new Redis(inject('redisUrl'));
  afterAll(() => redis.quit());

  it('never reports more remaining than the capacity, in memory or in Redis', async () => {
    for (const store of [new MemoryStore({ now: () => 1_000_000 }), new RedisStore(redis, { prefix: uniquePrefix('fast') })]) {
      const first = await store.acquire(fast, 'k', 1);
      expect(first.allowed && first.remaining).toBeLessThanOrEqual(9);
      expect(await store.acquire(zero, 'k', 0)).toEqual({ allowed: true, remaining: 0 });
    }
  });

  it('never admits more than the capacity at one instant, at present-day clock values too', async () => {
    // At epoch microseconds (about 2^50.7) a double keeps quarter-microsecond
    // steps: a tenth of a microsecond per token must not round to nothing.
    const admittedAt = async (now: number): Promise<number> => {
      const store = new MemoryStore({ now: () => now });
      let admitted = 0;
      for (let i = 0; i < 30; i++) if ((await store.acquire(fast, 'k', 1)).allowed) admitted++;
      return admitted;
    };
    expect(await admittedAt(1_000_000)).toBe(10);
    // Rounded up to a quarter microsecond, a token costs more than its tenth: fewer, never more.
    const today = await admittedAt(Date.now());
    expect(today).toBeGreaterThanOrEqual(1);
    expect(today).toBeLessThanOrEqual(10);
  });
});
