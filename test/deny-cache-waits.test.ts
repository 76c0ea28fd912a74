// A denial the deny cache answers waits for every bucket the store would
// have waited for: an operation denied for a bucket whose denial is
// remembered also waits for its other buckets this process saw an admission
// drain. It answered the remembered bucket's wait alone, shorter than the
// store's, and a client that waited it was denied again. It lost what an
// admission left when the pair also had a remembered denial of a larger
// cost; and what it said such a bucket held counted a store microsecond's
// refill the store had not seen, one token more than the store says.
import { setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { DenyCache, DENY_CACHE_MAX_ENTRIES } from '../src/core/deny-cache.js';
import { MemoryStore, Rate, TokenBucket, tokenBucketDirectiveTypeDefs } from '../src/index.js';
import { SERVERS, startHttpServer } from './support/http-servers.js';
import type { RunningHttpServer } from './support/http-servers.js';

const typeDefs = `${tokenBucketDirectiveTypeDefs}
type Query {
  a: Int @tokenBucket(name: "a", cost: 5)
  b: Int @tokenBucket(name: "b", cost: 5)
}
`;
// "a" refills its 5 tokens in 500 ms, "b" in 2 s.
const A_PERIOD_MS = 500;
const B_PERIOD_MS = 2000;
const a = new TokenBucket('a', 5, new Rate(5, A_PERIOD_MS));
const b = new TokenBucket('b', 5, new Rate(5, B_PERIOD_MS));
const resolvers = { Query: { a: () => 1, b: () => 2 } };

const running: RunningHttpServer[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.stop()));
});

// The buckets refill on the real clock (the deny cache counts its waits on
// it), so what a test asserts is bounded by the times it saw, never by the
// machine being fast: a bucket emptied after `sentAt` and read before
// `answeredAt` waits at least its period less the time between them.

describe.each(SERVERS)('the deny cache on %s', (kind) => {
  it('answers the wait the store gives for every short bucket, long enough to be admitted after it', async () => {
    const cached = await startHttpServer(kind, { typeDefs, resolvers, limits: { store: new MemoryStore(), buckets: [a, b] } });
    const uncached = await startHttpServer(kind, { typeDefs, resolvers, limits: { store: new MemoryStore(), buckets: [a, b], denyCache: false } });
    running.push(cached, uncached);
    let cacheWait = 0;
    for (const server of [cached, uncached]) {
      const ann = { 'x-user': 'ann' };
      expect((await server.post({ query: '{ a }' }, ann)).status).toBe(200);
      expect((await server.post({ query: '{ a }' }, ann)).status).toBe(429); // "a" short: remembered
      const sentAt = performance.now();
      expect((await server.post({ query: '{ b }' }, ann)).status).toBe(200); // "b" drained by an admission
      const both = await server.post({ query: '{ a b }' }, ann);
      // What the store waits for "b" at least; "a", emptied earlier and refilling faster, always waits less.
      const least = (B_PERIOD_MS - (performance.now() - sentAt)) / 1000;
      if (least <= 0) continue; // a machine so slow "b" refilled in between: nothing to tell
      expect(both.status).toBe(429);
      // The store names "b"; so does the cache, with no shorter a wait than the store's (never above the period).
      const extensions = both.body.errors?.[0]?.extensions ?? {};
      expect(extensions).toMatchObject({ code: 'RATE_LIMITED', bucket: 'b', cost: 5 });
      const wait = extensions['retryAfter'] as number;
      expect(wait).toBeGreaterThanOrEqual(least - 0.001);
      expect(wait).toBeLessThanOrEqual(B_PERIOD_MS / 1000);
      if (server === cached) cacheWait = wait;
    }
    if (cacheWait === 0) return;
    await sleep(Math.ceil(cacheWait * 1000));
    const after = await cached.post({ query: '{ a b }' }, { 'x-user': 'ann' });
    expect(after.status).toBe(200);
    expect(after.body.data).toEqual({ a: 1, b: 2 });
  });
});

describe.each(SERVERS)('the deny cache on %s, after an admission of a smaller cost', (kind) => {
  const typeDefsWithC = `${tokenBucketDirectiveTypeDefs}
type Query {
  a: Int @tokenBucket(name: "a", cost: 5)
  c3: Int @tokenBucket(name: "c", cost: 3)
  c10: Int @tokenBucket(name: "c", cost: 10)
}
`;
  // "c" refills its 10 tokens in 10 s: the 3 it lacks after "c3", in 3 s.
  const C_PERIOD_MS = 10_000;
  const c = new TokenBucket('c', 10, new Rate(10, C_PERIOD_MS));
  const resolversWithC = { Query: { a: () => 1, c3: () => 3, c10: () => 10 } };

  it("waits for a bucket that admission left short of this operation's cost, though not of its own", async () => {
    const server = await startHttpServer(kind, { typeDefs: typeDefsWithC, resolvers: resolversWithC, limits: { store: new MemoryStore(), buckets: [a, c] } });
    running.push(server);
    const ann = { 'x-user': 'ann' };
    const sentAt = performance.now();
    expect((await server.post({ query: '{ c3 }' }, ann)).status).toBe(200); // "c" holds 7: enough for 3, not for 10
    expect((await server.post({ query: '{ a }' }, ann)).status).toBe(200);
    expect((await server.post({ query: '{ a }' }, ann)).status).toBe(429); // "a" remembered (at most 500 ms)
    const both = await server.post({ query: '{ a c10 }' }, ann);
    // As the store would: "c" lacks 3 tokens, 3 s from when "c3" took them, less what has passed since.
    const least = ((C_PERIOD_MS * 3) / 10 - (performance.now() - sentAt)) / 1000;
    if (least <= 0) return; // a machine so slow "c" refilled in between: nothing to tell
    expect(both.status).toBe(429);
    const extensions = both.body.errors?.[0]?.extensions ?? {};
    const wait = extensions['retryAfter'] as number;
    expect(wait).toBeGreaterThanOrEqual(least - 0.001);
    // "a" waits at most its period: beyond it, "c" is the one waited for.
    if (least > A_PERIOD_MS / 1000) expect(extensions).toMatchObject({ code: 'RATE_LIMITED', bucket: 'c', cost: 10 });
    await sleep(Math.ceil(wait * 1000));
    expect((await server.post({ query: '{ a c10 }' }, ann)).status).toBe(200);
  });
});

describe('the deny cache, after an admission below a remembered denial', () => {
  // "c" remembers a denial of 10; an admission of 3 then drains it. An operation asking 3 of "c" and
  // denied for "a" waits for "c" too: the remembered denial of 10 says nothing of 3, the admission does.
  const cTypeDefs = `${tokenBucketDirectiveTypeDefs}
type Query {
  a: Int @tokenBucket(name: "a", cost: 5)
  c3: Int @tokenBucket(name: "c", cost: 3)
  c10: Int @tokenBucket(name: "c", cost: 10)
}
`;
  // "a" refills its 5 tokens in 500 ms, "c" 10 in 5 s.
  const FAST_A_PERIOD_MS = 500;
  const C_PERIOD_MS = 5000;
  const fastA = new TokenBucket('a', 5, new Rate(5, FAST_A_PERIOD_MS));
  const c = new TokenBucket('c', 10, new Rate(10, C_PERIOD_MS));
  const cResolvers = { Query: { a: () => 1, c3: () => 3, c10: () => 10 } };

  it.each(SERVERS)('names a wait on %s the store admits the operation after', async (kind) => {
    const server = await startHttpServer(kind, { typeDefs: cTypeDefs, resolvers: cResolvers, limits: { store: new MemoryStore(), buckets: [fastA, c] } });
    running.push(server);
    const ann = { 'x-user': 'ann' };
    const sentAt = performance.now();
    expect((await server.post({ query: '{ c10 }' }, ann)).status).toBe(200);
    expect((await server.post({ query: '{ c10 }' }, ann)).status).toBe(429); // a denial of 10 remembered
    // 3.2 tokens of "c" refill: enough for 3, and 3 s after the drain (6 tokens) it would not be short of 3.
    await sleep((C_PERIOD_MS * 32) / 100);
    expect((await server.post({ query: '{ c3 }' }, ann)).status).toBe(200); // leaves "c" short of 3
    expect((await server.post({ query: '{ a }' }, ann)).status).toBe(200);
    expect((await server.post({ query: '{ a }' }, ann)).status).toBe(429); // "a" remembered
    const both = await server.post({ query: '{ a c3 }' }, ann);
    // "c" holds 10 × (t - drain) / period - 3 after "c3": 3 tokens need 6 × period / 10 from the drain.
    const least = ((C_PERIOD_MS * 6) / 10 - (performance.now() - sentAt)) / 1000;
    if (least <= 0) return; // a machine so slow "c" refilled in between: nothing to tell
    expect(both.status).toBe(429);
    const extensions = both.body.errors?.[0]?.extensions as Record<string, unknown>;
    const wait = extensions['retryAfter'] as number;
    // Counted from what the admission left, never shorter than the store's; "a" alone waits at most its period.
    expect(wait).toBeGreaterThanOrEqual(least - 0.001);
    if (least > FAST_A_PERIOD_MS / 1000) expect(extensions).toMatchObject({ code: 'RATE_LIMITED', bucket: 'c', cost: 3 });
    await sleep(Math.ceil(wait * 1000));
    const after = await server.post({ query: '{ a c3 }' }, ann);
    expect(after.status).toBe(200);
  });
});

describe('what a denial the cache answers says of a bucket an admission drained', () => {
  /** Capacities up to 2^53 - 1, refilled in at most 100 years, at rates up to ten million a second. */
  const bucketArbitrary = fc
    .record({
      capacity: fc.oneof(fc.integer({ min: 1, max: 1_000_000 }), fc.integer({ min: 2 ** 50, max: Number.MAX_SAFE_INTEGER })),
      perSecond: fc.oneof(fc.integer({ min: 1, max: 1000 }), fc.integer({ min: 1, max: 10_000_000 })),
    })
    .map(({ capacity, perSecond }) => ({ capacity, perSecond: Math.max(perSecond, Math.ceil(capacity / (99 * 365 * 86_400))) }))
    .filter(({ perSecond }) => perSecond <= 10_000_000)
    .map(({ capacity, perSecond }) => new TokenBucket('x', capacity, Rate.perSecond(perSecond)));

  it('holds no more than the store says, and waits no less than the store would', async () => {
    let hits = 0;
    await fc.assert(
      fc.asyncProperty(bucketArbitrary, fc.double({ min: 0, max: 1, noNaN: true }), fc.double({ min: 0, max: 1, noNaN: true }), fc.double({ min: 0, max: 6, noNaN: true }), async (bucket, took, asks, tokens) => {
        // Epoch times in ms, at any fraction of a microsecond.
        let now = 1_750_000_000_000 + Math.random() * 1e9;
        const store = new MemoryStore({ now: () => now });
        const cache = new DenyCache(DENY_CACHE_MAX_ENTRIES, () => now);
        const msPerToken = bucket.rate.periodUs / bucket.rate.tokens / 1000;
        // Admissions that leave the bucket short of what they took, and costs a few tokens above what is left.
        const taken = Math.max(1, Math.round(bucket.capacity * (0.5 + took / 2)));
        const admitted = await store.acquire(bucket, 'k', taken);
        if (!admitted.allowed) throw new Error('a full bucket admits its capacity');
        cache.admitted(bucket, 'k', taken, { remaining: admitted.remaining, sentAt: now, answeredAt: now });
        now += tokens * msPerToken;
        const cost = Math.min(bucket.capacity, admitted.remaining + 1 + Math.round(asks * 5));
        const drained = cache.drainedWait(bucket, 'k', cost);
        if (drained === undefined) return;
        hits += 1;
        const held = await store.acquire(bucket, 'k', 0);
        expect(drained.remaining).toBeLessThanOrEqual((held as { remaining: number }).remaining);
        expect(drained.remaining).toBeLessThan(cost);
        const answer = await store.acquire(bucket, 'k', cost);
        if (!answer.allowed && answer.retryAfterMs !== null) expect(drained.retryAfterMs).toBeGreaterThanOrEqual(answer.retryAfterMs);
        await store.close();
      }),
      { numRuns: 2000 },
    );
    expect(hits).toBeGreaterThan(900);
  });
});
