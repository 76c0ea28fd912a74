// A denial the deny cache answers waits for every bucket the store would
// have waited for: an operation denied for a bucket whose denial is
// remembered also waits for its other buckets this process saw an admission
// drain. It answered the remembered bucket's wait alone, shorter than the
// store's, and a client that waited it was denied again.
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryStore, Rate, TokenBucket, tokenBucketDirectiveTypeDefs } from '../src/index.js';
import { SERVERS, startHttpServer } from './support/http-servers.js';
import type { RunningHttpServer } from './support/http-servers.js';

const typeDefs = `${tokenBucketDirectiveTypeDefs}
type Query {
  a: Int @tokenBucket(name: "a", cost: 5)
  b: Int @tokenBucket(name: "b", cost: 5)
}
`;
// "a" refills its 5 tokens in 200 ms, "b" in 1 s.
const a = new TokenBucket('a', 5, new Rate(5, 200));
const b = new TokenBucket('b', 5, new Rate(5, 1000));
const resolvers = { Query: { a: () => 1, b: () => 2 } };

const running: RunningHttpServer[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.stop()));
});

describe.each(SERVERS)('the deny cache on %s', (kind) => {
  it('answers the wait the store gives for every short bucket, long enough to be admitted after it', async () => {
    const cached = await startHttpServer(kind, { typeDefs, resolvers, limits: { store: new MemoryStore(), buckets: [a, b] } });
    const uncached = await startHttpServer(kind, { typeDefs, resolvers, limits: { store: new MemoryStore(), buckets: [a, b], denyCache: false } });
    running.push(cached, uncached);
    const answers = [];
    for (const server of [cached, uncached]) {
      const ann = { 'x-user': 'ann' };
      expect((await server.post({ query: '{ a }' }, ann)).status).toBe(200);
      expect((await server.post({ query: '{ a }' }, ann)).status).toBe(429); // "a" short: remembered
      expect((await server.post({ query: '{ b }' }, ann)).status).toBe(200); // "b" drained by an admission
      const both = await server.post({ query: '{ a b }' }, ann);
      expect(both.status).toBe(429);
      answers.push(both);
    }
    const [fromCache, fromStore] = answers.map((answer) => answer!.body.errors?.[0]?.extensions) as [Record<string, unknown>, Record<string, unknown>];
    // The store names "b" with about a second; so does the cache (counted from its own answer, never shorter).
    expect(fromStore).toMatchObject({ code: 'RATE_LIMITED', bucket: 'b', cost: 5 });
    expect(fromCache).toMatchObject({ code: 'RATE_LIMITED', bucket: 'b', cost: 5 });
    const storeWait = fromStore['retryAfter'] as number;
    const cacheWait = fromCache['retryAfter'] as number;
    expect(storeWait).toBeGreaterThan(0.8);
    expect(cacheWait).toBeGreaterThan(storeWait - 0.1); // the uncached server was asked later
    expect(cacheWait).toBeLessThanOrEqual(1);

    await sleep(Math.ceil(cacheWait * 1000));
    const after = await cached.post({ query: '{ a b }' }, { 'x-user': 'ann' });
    expect(after.status).toBe(200);
    expect(after.body.data).toEqual({ a: 1, b: 2 });
  });
});
