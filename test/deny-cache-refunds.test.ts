// The deny cache after a refund: it kept no level for the refunded pair (a
// refund dropped what the latest admission left), so a remembered denial of
// another bucket of the operation named that bucket's wait alone, shorter
// than the store's, and a client that waited it was denied again. Now the
// store's level after the refund replaces it. And identities over 64
// characters were hashed from their UTF-8 bytes, where every lone surrogate
// is U+FFFD: two identities the store keeps apart were one pair.
import { makeExecutableSchema } from '@graphql-tools/schema';
import { parse } from 'graphql';
import type { OperationDefinitionNode } from 'graphql';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { DenyCache } from '../src/core/deny-cache.js';
import { Limiter } from '../src/core/limiter.js';
import { MemoryStore, Rate, RedisStore, TokenBucket, tokenBucketDirectiveTypeDefs } from '../src/index.js';
import type { BucketStore } from '../src/index.js';
import { captureLogger } from './support/graphql.js';
import { redisClient, uniquePrefix } from './support/clients.js';

const typeDefs = `${tokenBucketDirectiveTypeDefs}
type Query {
  a: Int @tokenBucket(name: "a", cost: 10)
  b: Int @tokenBucket(name: "b", cost: 10)
}
`;
// "a" refills a token every 200 ms, "b" every 10 ms.
const a = new TokenBucket('a', 10, new Rate(1, 200));
const b = new TokenBucket('b', 10, new Rate(1, 10));
const schema = makeExecutableSchema({ typeDefs, resolvers: { Query: { a: () => 1, b: () => 2 } } });

const redis = redisClient(inject('redisUrl'));
afterAll(async () => {
  await redis.quit();
});

function operation(query: string) {
  const document = parse(query);
  return { schema, document, operation: document.definitions[0] as OperationDefinitionNode, variables: {}, context: {}, logger: captureLogger() };
}

describe.each([
  ['MemoryStore', (): BucketStore => new MemoryStore()],
  ['RedisStore', (): BucketStore => new RedisStore(redis, { prefix: uniquePrefix('deny cache refunds') })],
] as const)('on %s', (_name, makeStore) => {
  it('a denial after a refund waits for the refunded bucket too: waiting the retryAfter given admits', async () => {
    const store = makeStore();
    const limiter = new Limiter<unknown>({ store, buckets: [a, b], identify: () => 'ann' }, 'test');
    expect((await limiter.decide(operation('{ a }'))).kind).toBe('allowed'); // a: 0 left
    expect((await limiter.decide(operation('{ b }'))).kind).toBe('allowed'); // b: 0 left
    expect((await limiter.decide(operation('{ b }'))).kind).toBe('denied'); // remembered: b needs ~100 ms
    await store.refund!(a, 'ann', 1); // a: 1 token, 9 short (1.8 s)
    const denied = await limiter.decide(operation('{ a b }'));
    if (denied.kind !== 'denied' || denied.retryAfterMs === null) throw new Error(`expected a denial with a wait, got ${JSON.stringify(denied.kind)}`);
    const store$ = await store.checkAll!([
      { bucket: a, key: 'ann', cost: 10 },
      { bucket: b, key: 'ann', cost: 10 },
    ]);
    expect(denied.retryAfterMs).toBeGreaterThanOrEqual(store$.retryAfterMs!);
    await sleep(denied.retryAfterMs);
    expect((await limiter.decide(operation('{ a b }'))).kind).toBe('allowed');
  });
});

describe('deny cache identities', () => {
  it('keeps a long identity with a lone surrogate apart from the one with U+FFFD (the stores do)', () => {
    const cache = new DenyCache();
    const long = 'k'.repeat(70);
    const now = performance.now();
    cache.remember(a, `${long}\uD800`, 10, 60_000, now, now);
    expect(cache.check(a, `${long}\uD800`, 10)).toBeDefined();
    expect(cache.check(a, `${long}\uFFFD`, 10)).toBeUndefined();
    expect(cache.check(a, `${long}\uDC00`, 10)).toBeUndefined();
  });

  it('takes integer identities of one value as one pair, as the stores do', () => {
    const cache = new DenyCache();
    const now = performance.now();
    cache.remember(a, 1e21, 10, 60_000, now, now);
    expect(cache.check(a, 10n ** 21n, 10)).toBeDefined();
    expect(cache.check(a, '1000000000000000000000', 10)).toBeDefined();
  });
});
