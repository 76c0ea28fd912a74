// SPEC §4 "Deny cache": after the store denies (bucket, identity) a cost c
// with a wait w, this replica denies requests for at least c during w without
// a store call (Redis counts the calls), with a retryAfter that decreases and
// is always long enough; smaller costs still reach the store; it only ever
// denies what the store would deny; memory stays at 10,000 pairs.
import { setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import { parse } from 'graphql';
import type { OperationDefinitionNode } from 'graphql';
import { makeExecutableSchema } from '@graphql-tools/schema';
import { afterEach, describe, expect, it } from 'vitest';
import { DenyCache, DENY_CACHE_MAX_ENTRIES } from '../src/core/deny-cache.js';
import { Limiter } from '../src/core/limiter.js';
import { MemoryStore, Rate, RedisStore, TokenBucket, tokenBucketDirectiveTypeDefs } from '../src/index.js';
import type { Identity } from '../src/index.js';
import { uniquePrefix } from './support/clients.js';
import { RecordingStore, captureLogger } from './support/graphql.js';
import type { ResponseBody } from './support/graphql.js';
import { TRANSPORTS, serveLimited } from './support/limited-servers.js';
import type { LimitedServer } from './support/limited-servers.js';
import { ownRedis } from './support/own-redis.js';

const typeDefs = `${tokenBucketDirectiveTypeDefs}
type Query {
  take(first: Int!): [Token!]!
  other(first: Int!): [Other!]!
}
# take(first: n) { id } costs n tokens of x; other(first: n) { id } n of y.
type Token @tokenBucket(name: "x", cost: 1) { id: ID! }
type Other @tokenBucket(name: "y", cost: 1) { id: ID! }
`;
const list = (_: unknown, { first }: { first: number }) => Array.from({ length: first }, (_x, i) => ({ id: String(i) }));
const resolvers = { Query: { take: list, other: list } };

/** 200 ms per token. */
const x = new TokenBucket('x', 10, new Rate(10, 2000));
/** 1 s per token. */
const y = new TokenBucket('y', 10, new Rate(1, 1000));
const take = (n: number) => ({ query: `{ take(first: ${n}) { id } }` });

// A server of our own: INFO commandstats counts every client's calls.
const own = ownRedis();
const servers: LimitedServer[] = [];

afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

let users = 0;
const fresh = (): string => `deny-cache-${++users}`;

interface Timed {
  sent: number;
  received: number;
  status: number;
  body: ResponseBody;
  /** `extensions.retryAfter` in ms. */
  retryAfterMs: number | null | undefined;
}

async function timed(server: LimitedServer, payload: unknown, user: string): Promise<Timed> {
  const sent = performance.now();
  const answer = await server.post(payload, user);
  const received = performance.now();
  const retryAfter = answer.body.errors?.[0]?.extensions?.['retryAfter'] as number | null | undefined;
  return { sent, received, status: answer.status, body: answer.body, retryAfterMs: typeof retryAfter === 'number' ? retryAfter * 1000 : retryAfter };
}

describe.each(TRANSPORTS)('the deny cache under %s, on Redis', (transport) => {
  async function serve(identify?: (user: string) => Identity, prefix = uniquePrefix('deny-cache')): Promise<LimitedServer> {
    const server = await serveLimited(transport, typeDefs, resolvers, {
      store: new RedisStore(own.client, { prefix }),
      buckets: [x, y],
      ...(identify ? { identify } : {}),
    });
    servers.push(server);
    // Loads the script once, so every later call is one EVALSHA.
    expect((await server.post(take(1), fresh())).status).toBe(200);
    return server;
  }

  it('denies at least the denied cost without a store call until the wait has passed, with a decreasing retryAfter that is long enough', async () => {
    const server = await serve();
    const user = fresh();
    const drain = await timed(server, take(10), user);
    expect(drain.status).toBe(200);
    // Empty: 6 tokens are 1200 ms away, between these two moments.
    const fitsAfter = drain.sent + 1200;
    const fitsBy = drain.received + 1200;
    const first = await timed(server, take(6), user);
    expect(first.status).toBe(429);

    const calls = await own.roundTrips();
    let previous = first.retryAfterMs as number;
    const cached: Timed[] = [];
    // Well inside the wait: a slow run only shortens the loop.
    while (performance.now() < fitsAfter - 700) {
      const same = await timed(server, take(6), user);
      expect(same.status).toBe(429);
      expect(same.body.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', bucket: 'x', cost: 6 });
      expect(same.retryAfterMs).toBeLessThanOrEqual(previous);
      previous = same.retryAfterMs as number;
      // Never short of the true wait for a client that waits from the answer,
      // and not much longer (the store's round trip, a millisecond of rounding).
      expect(same.received + previous).toBeGreaterThanOrEqual(fitsAfter);
      expect(same.sent + previous).toBeLessThanOrEqual(fitsBy + 50);
      cached.push(same);

      // 3 more tokens: 600 ms more.
      const more = await timed(server, take(9), user);
      expect(more.status).toBe(429);
      expect(more.body.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', bucket: 'x', cost: 9 });
      expect(more.received + (more.retryAfterMs as number)).toBeGreaterThanOrEqual(fitsAfter + 600);
      expect(more.sent + (more.retryAfterMs as number)).toBeLessThanOrEqual(fitsBy + 600 + 50);
    }
    // How many rounds fit in the 500 ms is the machine's business: a busy one ran 5.
    expect(cached.length).toBeGreaterThan(1);
    expect(await own.roundTrips()).toBe(calls);

    // A smaller cost might fit sooner: the store is asked (and both are still short: 4 tokens are
    // 800 ms from the drain, 300 ms after the loop, room for a busy machine).
    expect((await timed(server, take(5), user)).status).toBe(429);
    expect((await timed(server, take(4), user)).status).toBe(429);
    expect(await own.roundTrips()).toBe(calls + 2);

    // Waiting what the last answer said is enough.
    const last = await timed(server, take(6), user);
    expect(last.status).toBe(429);
    expect(await own.roundTrips()).toBe(calls + 2);
    await sleep(Math.max(0, last.received + (last.retryAfterMs as number) - performance.now()));
    const after = await timed(server, take(6), user);
    expect(after.status).toBe(200);
    expect(await own.roundTrips()).toBe(calls + 3);
  });

  it('denies an operation whose enforced bucket it remembers, taking nothing from the others, and names the longest wait', async () => {
    const prefix = uniquePrefix('deny-cache-multi');
    const server = await serve(undefined, prefix);
    const store = new RedisStore(own.client, { prefix });
    const user = fresh();
    expect((await server.post({ query: '{ take(first: 10) { id } other(first: 10) { id } }' }, user)).status).toBe(200);
    // x: 6 tokens 1.2 s away, y: 5 tokens 5 s away.
    const both = await timed(server, { query: '{ take(first: 6) { id } other(first: 5) { id } }' }, user);
    expect(both.body.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', bucket: 'y', cost: 5 });
    expect(both.retryAfterMs).toBeGreaterThan(4900);

    const calls = await own.roundTrips();
    const again = await timed(server, { query: '{ take(first: 6) { id } other(first: 5) { id } }' }, user);
    expect(again.body.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', bucket: 'y', cost: 5 });
    expect(again.retryAfterMs).toBeLessThanOrEqual(both.retryAfterMs as number);
    expect(again.received + (again.retryAfterMs as number)).toBeGreaterThanOrEqual(both.sent + (both.retryAfterMs as number) - 1);
    const onlyX = await timed(server, take(7), user);
    expect(onlyX.body.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', bucket: 'x', cost: 7 });
    expect(await own.roundTrips()).toBe(calls);

    // Another identity's y is untouched by the cached denial of this one's x.
    const other = fresh();
    expect((await server.post(take(10), other)).status).toBe(200);
    expect((await server.post(take(6), other)).status).toBe(429);
    const calls2 = await own.roundTrips();
    const denied = await server.post({ query: '{ take(first: 6) { id } other(first: 3) { id } }' }, other);
    expect(denied.body.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', bucket: 'x', cost: 6 });
    expect(await own.roundTrips()).toBe(calls2);
    const yLeft = await store.acquire(y, other, 0);
    expect(yLeft).toEqual({ allowed: true, remaining: 10 });
  });

  it("does not deny another plan's bucket of the same name from a denial of the first", async () => {
    let plan: 'free' | 'pro' = 'free';
    const proX = new TokenBucket('x', 1000, new Rate(1000, 2000));
    const server = await serve((user) => (plan === 'pro' ? { key: user, bucket: proX } : user));
    const user = fresh();
    expect((await server.post(take(10), user)).status).toBe(200);
    expect((await server.post(take(6), user)).status).toBe(429);
    const calls = await own.roundTrips();
    expect((await server.post(take(6), user)).status).toBe(429);
    expect(await own.roundTrips()).toBe(calls);
    plan = 'pro';
    await server.post(take(6), user);
    expect(await own.roundTrips()).toBe(calls + 1);
  });
});

describe('the deny cache in the limiter', () => {
  const schema = makeExecutableSchema({ typeDefs, resolvers });
  const documents = new Map<number, { document: ReturnType<typeof parse>; operation: OperationDefinitionNode }>();
  function input(n: number, user: string) {
    let parsed = documents.get(n);
    if (!parsed) {
      const document = parse(take(n).query);
      parsed = { document, operation: document.definitions[0] as OperationDefinitionNode };
      documents.set(n, parsed);
    }
    return { schema, ...parsed, variables: undefined, context: user, logger: captureLogger() };
  }

  it('forgets a denial when tokens come back through the limiter (a refund)', async () => {
    const store = new RecordingStore(new MemoryStore());
    const limiter = new Limiter<string>({ store, buckets: [x, y], identify: (user) => user }, 'test');
    limiter.load(schema);
    expect((await limiter.decide(input(10, 'ann'))).kind).toBe('allowed');
    expect((await limiter.decide(input(6, 'ann'))).kind).toBe('denied');
    expect((await limiter.decide(input(6, 'ann'))).kind).toBe('denied');
    expect(store.calls).toHaveLength(2);
    limiter.tokensReturned(x, 'ann');
    await limiter.decide(input(6, 'ann'));
    expect(store.calls).toHaveLength(3);
  });

  it("makes one store call for an identity's concurrent requests that the first call's denial answers", async () => {
    const store = new RecordingStore(new MemoryStore());
    const limiter = new Limiter<string>({ store, buckets: [x, y], identify: (user) => user }, 'test');
    limiter.load(schema);
    expect((await limiter.decide(input(10, 'bea'))).kind).toBe('allowed');
    const decisions = await Promise.all(Array.from({ length: 20 }, () => limiter.decide(input(6, 'bea'))));
    expect(decisions.map((d) => d.kind)).toEqual(Array(20).fill('denied'));
    expect(store.calls).toHaveLength(2);
    // A smaller cost is not answered by a larger one's denial.
    await Promise.all([limiter.decide(input(9, 'bea')), limiter.decide(input(2, 'bea'))]);
    expect(store.calls).toHaveLength(3);
  });

  it('after an admission that leaves the bucket short, queues concurrent requests behind one more call', async () => {
    const store = new RecordingStore(new MemoryStore());
    // One token every 300 ms.
    const slow = new TokenBucket('x', 1, new Rate(1, 300));
    const limiter = new Limiter<string>({ store, buckets: [slow, y], identify: (user) => user }, 'test');
    limiter.load(schema);
    expect((await limiter.decide(input(1, 'cy'))).kind).toBe('allowed');
    await sleep(350);
    const decisions = await Promise.all(Array.from({ length: 20 }, () => limiter.decide(input(1, 'cy'))));
    expect(decisions.filter((d) => d.kind === 'allowed')).toHaveLength(1);
    expect(decisions.filter((d) => d.kind === 'denied')).toHaveLength(19);
    // The admission, then one denial the others are answered by.
    expect(store.calls).toHaveLength(1 + 2);
  });

  it("does not hold up an identity's concurrent requests its bucket admits", async () => {
    const store = new RecordingStore(new MemoryStore());
    const roomy = new TokenBucket('x', 1000, Rate.perHour(1000));
    const limiter = new Limiter<string>({ store, buckets: [roomy, y], identify: (user) => user }, 'test');
    limiter.load(schema);
    const decisions = await Promise.all(Array.from({ length: 20 }, () => limiter.decide(input(5, 'dee'))));
    expect(decisions.map((d) => d.kind)).toEqual(Array(20).fill('allowed'));
    expect(store.calls).toHaveLength(20);
  });

  it("answers concurrent requests waiting for a call the store never answers within storeTimeoutMs, as the store's failure", async () => {
    const hanging = {
      acquire: () => new Promise<never>(() => {}),
      acquireAll: () => new Promise<never>(() => {}),
      reset: () => Promise.resolve(false),
    };
    const logger = captureLogger();
    const limiter = new Limiter<string>({ store: hanging, buckets: [x, y], identify: (user) => user, storeTimeoutMs: 200, onStoreError: 'deny' }, 'test');
    limiter.load(schema);
    const started = performance.now();
    const decisions = await Promise.all(Array.from({ length: 10 }, () => limiter.decide({ ...input(6, 'eve'), logger })));
    expect(decisions.map((d) => d.kind === 'store_error' && d.allowed)).toEqual(Array(10).fill(false));
    // One timeout, not ten in a row.
    expect(performance.now() - started).toBeLessThan(200 + 300);
  });

  it('never keeps an operation waiting for other calls longer than storeTimeoutMs, so a slow store costs it at most twice that', async () => {
    // Every call is decided at once and answered 750 ms later: slow, never timing out.
    const STORE_TIMEOUT_MS = 1000;
    const LATENCY_MS = 750;
    const inner = new MemoryStore();
    const slowStore = {
      acquire: (...args: Parameters<MemoryStore['acquire']>) => inner.acquire(...args),
      acquireAll: async (requests: Parameters<MemoryStore['acquireAll']>[0]) => {
        const answer = inner.acquireAll(requests);
        await sleep(LATENCY_MS);
        return answer;
      },
      reset: (...args: Parameters<MemoryStore['reset']>) => inner.reset(...args),
    };
    // One token every 900 ms: less than a token per round trip.
    const scarce = new TokenBucket('x', 1, new Rate(1, 900));
    const limiter = new Limiter<string>({ store: slowStore, buckets: [scarce, y], identify: (user) => user, storeTimeoutMs: STORE_TIMEOUT_MS }, 'test');
    limiter.load(schema);
    // The first takes the only token. The second waits for it, then (the bucket being short) asks
    // itself and is denied too late for its denial to answer anybody. The third waits for the first,
    // then for the second's call, then asks itself.
    const started = performance.now();
    const timedDecision = async (): Promise<number> => {
      await limiter.decide(input(1, 'flo'));
      return performance.now() - started;
    };
    const waited = await Promise.all([timedDecision(), timedDecision(), timedDecision()]);
    expect(waited[0]).toBeLessThan(STORE_TIMEOUT_MS);
    expect(Math.max(...waited)).toBeLessThan(2 * STORE_TIMEOUT_MS);
  });

  it(`keeps at most ${DENY_CACHE_MAX_ENTRIES.toLocaleString('en-US')} pairs under 100,000 flooding identities, the most recent ones`, async () => {
    const slow = new TokenBucket('x', 1, Rate.perHour(1));
    const store = new RecordingStore(new MemoryStore());
    const limiter = new Limiter<string>({ store, buckets: [slow, y], identify: (user) => user }, 'test');
    limiter.load(schema);
    const IDENTITIES = 100_000;
    for (let i = 0; i < IDENTITIES; i++) {
      const user = `flood-${i}`;
      await limiter.decide(input(1, user));
      const denied = await limiter.decide(input(1, user));
      if (denied.kind !== 'denied') throw new Error(`${user}: expected a denial, got ${denied.kind}`);
    }
    expect(store.calls).toHaveLength(2 * IDENTITIES);
    // The most recent 10,000 are answered here; older ones are asked of the store again.
    for (let i = IDENTITIES - DENY_CACHE_MAX_ENTRIES; i < IDENTITIES; i++) {
      expect((await limiter.decide(input(1, `flood-${i}`))).kind).toBe('denied');
    }
    expect(store.calls).toHaveLength(2 * IDENTITIES);
    for (let i = 0; i < 100; i++) expect((await limiter.decide(input(1, `flood-${i * 900}`))).kind).toBe('denied');
    expect(store.calls).toHaveLength(2 * IDENTITIES + 100);
  }, 120_000); // 200,000 decisions: about 5 s alone, over 20 s on a loaded machine; nothing here depends on time

  it('holds at most its bound, however many pairs and however long their keys', () => {
    const cache = new DenyCache();
    const now = performance.now();
    for (let i = 0; i < 100_000; i++) {
      cache.remember(x, `${'k'.repeat(i % 3 === 0 ? 10_000 : 5)}${i}`, 1, 60_000, now, now);
      expect(cache.size).toBeLessThanOrEqual(DENY_CACHE_MAX_ENTRIES);
    }
    expect(cache.size).toBe(DENY_CACHE_MAX_ENTRIES);
    expect(cache.check(x, `${'k'.repeat(10_000)}99999`, 1)).toBeDefined();
    expect(cache.check(x, `${'k'.repeat(10_000)}99998`, 1)).toBeUndefined();
  });
});

describe('the deny cache only denies what the store would deny', () => {
  /** A bucket whose full refill takes at most a year, at rates from one token an hour to ten million a second. */
  const bucketArbitrary = fc
    .record({
      capacity: fc.oneof(fc.integer({ min: 1, max: 20 }), fc.integer({ min: 1, max: 1_000_000 }), fc.constant(2 ** 40)),
      tokens: fc.oneof(fc.integer({ min: 1, max: 10 }), fc.integer({ min: 1, max: 10_000_000 })),
      periodMs: fc.oneof(fc.constantFrom(1000, 60_000, 3_600_000), fc.integer({ min: 1, max: 100_000 }), fc.integer({ min: 1, max: 1000 }).map((us) => us / 1000)),
    })
    .filter(({ capacity, tokens, periodMs }) => (capacity * periodMs) / tokens <= 365 * 24 * 3_600_000)
    .map(({ capacity, tokens, periodMs }) => new TokenBucket('x', capacity, new Rate(tokens, periodMs)));

  it('at every rate and capacity, with a retryAfter never shorter than the store gives', async () => {
    let hits = 0;
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(
        bucketArbitrary,
        fc.array(fc.record({ advance: fc.double({ min: 0, max: 1, noNaN: true }), cost: fc.double({ min: 0, max: 1, noNaN: true }) }), { minLength: 1, maxLength: 60 }),
        async (bucket, steps) => {
          let now = 1_750_000_000_000 + Math.floor(Math.random() * 1e9);
          const store = new MemoryStore({ now: () => now });
          const cache = new DenyCache(DENY_CACHE_MAX_ENTRIES, () => now);
          const msPerToken = bucket.rate.periodUs / bucket.rate.tokens / 1000;
          for (const step of steps) {
            // Costs near the capacity, advances up to a few tokens' refill: where denials and their ends are.
            const cost = Math.max(0, Math.min(bucket.capacity, Math.round(bucket.capacity * (0.5 + step.cost / 2))));
            now += step.advance * msPerToken * Math.max(1, Math.min(cost, 4));
            const cached = cache.check(bucket, 'k', cost);
            if (cached !== undefined) {
              // What the RateLimit field reports: never more than the bucket holds, always less than the cost.
              const held = await store.acquire(bucket, 'k', 0);
              expect(cached.remaining).toBeLessThanOrEqual((held as { remaining: number }).remaining);
              expect(cached.remaining).toBeLessThan(cost);
            }
            const answer = await store.acquire(bucket, 'k', cost);
            if (cached !== undefined) {
              hits += 1;
              expect(answer.allowed).toBe(false);
              const storeWait = (answer as { retryAfterMs: number }).retryAfterMs;
              expect(cached.retryAfterMs).toBeGreaterThanOrEqual(storeWait);
              expect(cached.retryAfterMs).toBeLessThanOrEqual(storeWait + 2);
            } else if (answer.allowed) {
              cache.admitted(bucket, 'k', cost);
            } else if (answer.retryAfterMs !== null) {
              cache.remember(bucket, 'k', cost, answer.retryAfterMs, now, now);
            }
          }
          await store.close();
          runs += 1;
        },
      ),
      { numRuns: 300 },
    );
    // The property was put to the test: many requests were answered by the cache.
    expect(runs).toBe(300);
    expect(hits).toBeGreaterThan(100);
  });
});

describe('what a remembered denial says the bucket holds', () => {
  it('is never more than the store says, just short of a whole token at epoch times', async () => {
    // 7 tokens every 17,944 ms; 7 taken twice, the third 7 denied, then all but a hair of 4 tokens' refill.
    const bucket = new TokenBucket('x', 14, new Rate(7, 17_944));
    const msPerToken = bucket.rate.periodUs / bucket.rate.tokens / 1000;
    const over: number[] = [];
    for (let start = 0; start < 2000; start++) {
      let now = 1_750_000_000_000 + start * 499_979.3;
      const store = new MemoryStore({ now: () => now });
      const cache = new DenyCache(DENY_CACHE_MAX_ENTRIES, () => now);
      expect((await store.acquire(bucket, 'k', 7)).allowed).toBe(true);
      expect((await store.acquire(bucket, 'k', 7)).allowed).toBe(true);
      const denied = await store.acquire(bucket, 'k', 7);
      if (denied.allowed || denied.retryAfterMs === null) throw new Error('expected a denial with a wait');
      cache.remember(bucket, 'k', 7, denied.retryAfterMs, now, now);
      now += 0.9999999948978636 * msPerToken * 4;
      const cached = cache.check(bucket, 'k', 7);
      const held = await store.acquire(bucket, 'k', 0);
      if (cached !== undefined && held.allowed && cached.remaining > held.remaining) over.push(start);
      await store.close();
    }
    expect(over).toEqual([]);
  });
});
