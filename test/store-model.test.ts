// The stores against the reference model of SPEC §1 (test/support/reference-bucket.ts),
// over random sequences of acquires, all-or-nothing acquires (with measured
// requests), checks, resets and passing time, at real magnitudes: clocks at
// today's epoch in µs and beyond, rates from one token an hour to ten million
// a second, capacities up to 2^53.
//
// MemoryStore runs on an injected clock and must agree with the model
// exactly. RedisStore runs on Redis's own clock, which the test cannot stop:
// around every call it reads Redis TIME before (t0) and after (t1), so the
// script ran at some moment in [t0, t1], and it keeps two models that bound
// what Redis can hold: `low` applies every take as late as possible (t1),
// `high` as early as possible (t0). Where both bounds decide alike Redis must
// decide the same; where they differ Redis may go either way, and what it
// answered (its decision and `remaining`) narrows both bounds again.
//
// Buckets whose capacity × period (the rate reduced) reaches 2^53 take the
// scripts' other path (capacities and costs as times): they are drawn too.
import { setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { Rate } from '../src/rate.js';
import type { AcquireRequest, BatchAdmission, BatchCheck, BucketKey, BucketStore } from '../src/stores/bucket-store.js';
import { MemoryStore } from '../src/stores/memory-store.js';
import type { RedisStoreClient } from '../src/stores/redis-client.js';
import { RedisStore } from '../src/stores/redis-store.js';
import { TokenBucket } from '../src/token-bucket.js';
import { keyString } from '../src/stores/validate.js';
import { familyClient, sharedTarget } from './support/client-families.js';
import { clusterClient, redisClient, uniquePrefix } from './support/clients.js';
import { redisNow, waitOnRedis } from './support/redis-clock.js';
import { ReferenceBucket, pairId } from './support/reference-bucket.js';

// `'7'`, `7` and `7n` are one identity; on a Cluster, alice and bob live in different hash slots.
const KEYS: readonly BucketKey[] = ['alice', 'bob', '7', 7, 7n];

/** 100 Julian years in µs: the longest full refill a bucket may have. */
const CENTURY_US = 3_155_760_000_000_000n;
/** Today, and later this century, in ms. */
const NOW_MS = Date.now();

interface Definition {
  capacity: number;
  tokens: number;
  periodUs: number;
}

interface RequestStep {
  bucket: number;
  key: BucketKey;
  cost: number;
  measure?: boolean;
}

type Step =
  | ({ kind: 'acquire' } & RequestStep)
  | { kind: 'acquireAll'; requests: RequestStep[] }
  | { kind: 'check'; requests: RequestStep[] }
  | { kind: 'reset'; bucket: number; key: BucketKey }
  | { kind: 'advance'; ms: number };

interface Scenario {
  definitions: Definition[];
  steps: Step[];
}

// ---------------------------------------------------------------- definitions at real magnitudes

/** From one token an hour to ten tokens a microsecond (ten million a second). */
const rateArbitrary: fc.Arbitrary<{ tokens: number; periodUs: number }> = fc
  .oneof(
    fc.record({ tokens: fc.integer({ min: 1, max: 3 }), periodUs: fc.integer({ min: 1_000_000, max: 3_600_000_000 }) }),
    fc.record({
      tokens: fc.integer({ min: 1, max: 10_000 }),
      periodUs: fc.constantFrom(1_000_000, 60_000_000, 3_600_000_000, 1_000, 700, 333_333),
    }),
    fc.record({ tokens: fc.integer({ min: 1, max: 10_000_000 }), periodUs: fc.integer({ min: 1, max: 1_000_000 }) }),
  )
  .map(({ tokens, periodUs }) => {
    if (tokens > 10 * periodUs) periodUs = Math.ceil(tokens / 10);
    if (periodUs > tokens * 3_600_000_000) periodUs = tokens * 3_600_000_000;
    return { tokens, periodUs };
  });

/** The largest capacity whose full refill takes at most 100 years (and a safe integer). */
function maxCapacity(tokens: number, periodUs: number): number {
  const bound = (BigInt(tokens) * CENTURY_US) / BigInt(periodUs);
  return bound > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(bound);
}

const definitionArbitrary: fc.Arbitrary<Definition> = rateArbitrary.chain(({ tokens, periodUs }) => {
  const max = maxCapacity(tokens, periodUs);
  return fc
    .oneof(
      fc.integer({ min: 0, max: 5 }),
      fc.integer({ min: 0, max: 1000 }),
      fc.integer({ min: 0, max }),
      fc.constant(max),
      fc.integer({ min: 0, max: 3 }).map((d) => max - d),
    )
    .map((capacity) => ({ capacity: Math.max(0, Math.min(capacity, max)), tokens, periodUs }));
});

function bucketsOf(definitions: readonly Definition[]): TokenBucket[] {
  return definitions.map((d, i) => new TokenBucket(`b${i}`, d.capacity, new Rate(d.tokens, d.periodUs / 1000)));
}

function requestsOf(buckets: readonly TokenBucket[], steps: readonly RequestStep[]): AcquireRequest[] {
  return steps.map(({ bucket, key, cost, measure }) => ({ bucket: buckets[bucket]!, key, cost, ...(measure ? { measure } : {}) }));
}

/** The plugin never names a pair twice; when a call does, its denial's wait is checked apart (see below). */
function namesAPairTwice(requests: readonly AcquireRequest[]): boolean {
  return new Set(requests.map((r) => pairId(r.bucket, r.key))).size < requests.length;
}

function describeStep(step: Step): string {
  const req = (r: RequestStep) =>
    `b${r.bucket}/${typeof r.key === 'bigint' ? `${r.key}n` : JSON.stringify(r.key)} cost ${r.cost}${r.measure ? ' (measured)' : ''}`;
  switch (step.kind) {
    case 'acquire':
      return `acquire ${req(step)}`;
    case 'acquireAll':
      return `acquireAll [${step.requests.map(req).join(', ')}]`;
    case 'check':
      return `checkAll [${step.requests.map(req).join(', ')}]`;
    case 'reset':
      return `reset ${req({ ...step, cost: 0 })}`;
    case 'advance':
      return `advance ${step.ms} ms`;
  }
}

/** Costs that matter for the bucket: small ones, the whole capacity, just around it, anything up to it. */
function costArbitrary(d: Definition): fc.Arbitrary<number> {
  return fc.oneof(
    fc.integer({ min: 0, max: 3 }),
    fc.constant(d.capacity),
    fc.integer({ min: Math.max(0, d.capacity - 2), max: Math.min(Number.MAX_SAFE_INTEGER, d.capacity + 1) }),
    fc.integer({ min: 0, max: d.capacity }),
  );
}

function stepArbitrary(definitions: readonly Definition[], advance: fc.Arbitrary<number>, withMeasure: boolean): fc.Arbitrary<Step> {
  const request = fc
    .nat(definitions.length - 1)
    .chain((bucket) =>
      fc.record({
        bucket: fc.constant(bucket),
        key: fc.constantFrom(...KEYS),
        cost: costArbitrary(definitions[bucket]!),
        measure: withMeasure ? fc.boolean() : fc.constant(false),
      }),
    )
    .map((r): RequestStep => (r.measure ? r : { bucket: r.bucket, key: r.key, cost: r.cost }));
  const plain = request.map((r): RequestStep => ({ bucket: r.bucket, key: r.key, cost: r.cost }));
  const calls: fc.Arbitrary<Step>[] = [
    plain.map((r): Step => ({ kind: 'acquire', ...r })),
    fc.array(request, { minLength: 2, maxLength: 3 }).map((requests): Step => ({ kind: 'acquireAll', requests })),
    fc.record({ bucket: fc.nat(definitions.length - 1), key: fc.constantFrom(...KEYS) }).map((r): Step => ({ kind: 'reset', ...r })),
    advance.map((ms): Step => ({ kind: 'advance', ms })),
  ];
  if (withMeasure) calls.push(fc.array(plain, { minLength: 1, maxLength: 3 }).map((requests): Step => ({ kind: 'check', requests })));
  return fc.oneof(
    { weight: 4, arbitrary: calls[0]! },
    { weight: 2, arbitrary: calls[1]! },
    { weight: 1, arbitrary: calls[2]! },
    { weight: 3, arbitrary: calls[3]! },
    ...(calls[4] ? [{ weight: 1, arbitrary: calls[4] }] : []),
  );
}

// ---------------------------------------------------------------- comparing with the model

function expectRemaining(got: readonly number[], expected: readonly number[], requests: readonly AcquireRequest[], where: string): void {
  expect(got.length, where).toBe(expected.length);
  got.forEach((left, i) => {
    expect(left, `${where}: remaining[${i}] above the capacity`).toBeLessThanOrEqual(requests[i]!.bucket.capacity);
    expect(left, `${where}: remaining[${i}]`).toBe(expected[i]);
  });
}

function expectAdmission(got: BatchAdmission, expected: BatchAdmission, requests: readonly AcquireRequest[], where: string): void {
  const detail = `${where}: got ${JSON.stringify(got)}, expected ${JSON.stringify(expected)}`;
  expect(got.allowed, detail).toBe(expected.allowed);
  expectRemaining(got.remaining, expected.remaining, requests, detail);
  if (got.allowed && expected.allowed) {
    expect(got.wouldDeny, detail).toEqual(expected.wouldDeny);
  } else if (!got.allowed && !expected.allowed) {
    expect(got.denied, detail).toEqual(expected.denied);
    if (!namesAPairTwice(requests)) expect(got.retryAfterMs, detail).toBe(expected.retryAfterMs);
  }
}

function expectCheck(got: BatchCheck, expected: BatchCheck, requests: readonly AcquireRequest[], where: string): void {
  const detail = `${where}: got ${JSON.stringify(got)}, expected ${JSON.stringify(expected)}`;
  expect({ allowed: got.allowed, denied: got.denied, retryAfterMs: got.retryAfterMs }, detail).toEqual({
    allowed: expected.allowed,
    denied: expected.denied,
    retryAfterMs: expected.retryAfterMs,
  });
  expectRemaining(got.remaining, expected.remaining, requests, detail);
}

// ---------------------------------------------------------------- MemoryStore, exactly

/**
 * Advances of whole ms, of eighths of a ms, of exactly n tokens' refill time
 * of one of the buckets (to the µs, where rounding bites), and long jumps of
 * up to one bucket's whole refill (years, for slow buckets).
 */
function memoryAdvance(definitions: readonly Definition[]): fc.Arbitrary<number> {
  const bucket = fc.nat(definitions.length - 1);
  return fc.oneof(
    fc.integer({ min: 0, max: 2000 }),
    fc.integer({ min: 0, max: 16_000 }).map((eighths) => eighths / 8),
    fc.record({ bucket, n: fc.integer({ min: 1, max: 3 }) }).map(({ bucket, n }) => {
      const d = definitions[bucket]!;
      return Math.ceil((n * d.periodUs) / d.tokens) / 1000;
    }),
    fc.record({ bucket, share: fc.double({ min: 0, max: 1, noNaN: true }) }).map(({ bucket, share }) => {
      const d = definitions[bucket]!;
      return Math.round(((d.capacity * d.periodUs) / d.tokens) * share) / 1000;
    }),
  );
}

const memoryScenario: fc.Arbitrary<Scenario & { start: number }> = fc
  .array(definitionArbitrary, { minLength: 2, maxLength: 3 })
  .chain((definitions) =>
    fc.record({
      definitions: fc.constant(definitions),
      // 1970, today and 2049: epoch-scale µs (MemoryStore refuses a clock whose full refill would end past 2^53 µs)
      start: fc.constantFrom(0, 1_000_000, NOW_MS, 2_000_000_000_000, 2_500_000_000_000),
      steps: fc.array(stepArbitrary(definitions, memoryAdvance(definitions), true), { maxLength: 40 }),
    }),
  );

async function checkMemoryStore({ definitions, start, steps }: Scenario & { start: number }): Promise<void> {
  const buckets = bucketsOf(definitions);
  let nowUs = BigInt(Math.round(start * 1000));
  const store = new MemoryStore({ now: () => Number(nowUs) / 1000 });
  const model = new ReferenceBucket();
  const nowMs = () => Number(nowUs) / 1000;
  // The clocks MemoryStore accepts: a reading plus each bucket's full refill stays below 2^53 µs (it refuses
  // later ones with a RangeError), and below year 2190 (7e15 µs).
  const longestRefillUs = definitions.reduce((longest, d) => {
    const refill = (BigInt(d.capacity) * BigInt(d.periodUs) + BigInt(d.tokens) - 1n) / BigInt(d.tokens);
    return refill > longest ? refill : longest;
  }, 0n);
  const lastUs = BigInt(Number.MAX_SAFE_INTEGER) - longestRefillUs - 1_000n;
  const clockLimitUs = lastUs < 7_000_000_000_000_000n ? lastUs : 7_000_000_000_000_000n;
  try {
    for (const [i, step] of steps.entries()) {
      const where = `step ${i} (${describeStep(step)}) at ${nowUs} µs`;
      switch (step.kind) {
        case 'advance':
          if (nowUs + BigInt(Math.round(step.ms * 1000)) < clockLimitUs) nowUs += BigInt(Math.round(step.ms * 1000));
          break;
        case 'acquire': {
          const requests = requestsOf(buckets, [step]);
          const expected = model.acquire(requests[0]!.bucket, step.key, step.cost, nowMs());
          const got = await store.acquire(requests[0]!.bucket, step.key, step.cost);
          expect(got.allowed, `${where}: ${JSON.stringify(got)} vs ${JSON.stringify(expected)}`).toBe(expected.allowed);
          if (got.allowed && expected.allowed) expectRemaining([got.remaining], [expected.remaining], requests, where);
          if (!got.allowed && !expected.allowed) expect(got.retryAfterMs, where).toBe(expected.retryAfterMs);
          break;
        }
        case 'acquireAll': {
          const requests = requestsOf(buckets, step.requests);
          expectAdmission(await store.acquireAll(requests), model.acquireAll(requests, nowMs()), requests, where);
          break;
        }
        case 'check': {
          const requests = requestsOf(buckets, step.requests);
          expectCheck(await store.checkAll(requests), model.checkAll(requests, nowMs()), requests, where);
          break;
        }
        case 'reset': {
          const bucket = buckets[step.bucket]!;
          // A bucket full again for less than a µs may still be held.
          const expected = model.reset(bucket, step.key, nowMs(), 0.001);
          const got = await store.reset(bucket, step.key);
          if (expected !== 'either') expect(got, where).toBe(expected);
          break;
        }
      }
    }
  } finally {
    await store.close();
  }
}

describe('MemoryStore against the reference model', () => {
  it('agrees exactly at epoch-scale clocks, from one token an hour to ten million a second, capacities up to 2^53', async () => {
    await fc.assert(fc.asyncProperty(memoryScenario, checkMemoryStore), { numRuns: 1500 });
  });

  it('admits a request after exactly the advertised wait (Rate.perHour(1), capacity 1)', async () => {
    let now = NOW_MS;
    const store = new MemoryStore({ now: () => now });
    const bucket = new TokenBucket('hourly', 1, Rate.perHour(1));
    expect(await store.acquire(bucket, 'k')).toEqual({ allowed: true, remaining: 0 });
    expect(await store.acquire(bucket, 'k')).toEqual({ allowed: false, retryAfterMs: 3_600_000 });
    now += 3_600_000;
    expect(await store.acquire(bucket, 'k')).toEqual({ allowed: true, remaining: 0 });
  });
});

// ---------------------------------------------------------------- what a user relies on, at random definitions

describe('MemoryStore at random definitions and epoch-scale clocks', () => {
  it('a full bucket admits its capacity; waiting retryAfterMs admits; remaining never exceeds the capacity', async () => {
    await fc.assert(
      fc.asyncProperty(
        definitionArbitrary,
        fc.constantFrom(NOW_MS, 2_000_000_000_000, 2_500_000_000_000),
        fc.double({ min: 0, max: 1, noNaN: true }),
        async (d, start, share) => {
          let now = start;
          const store = new MemoryStore({ now: () => now });
          const [bucket] = bucketsOf([d]);
          const full = await store.acquire(bucket!, 'k', d.capacity);
          expect(full).toEqual({ allowed: true, remaining: 0 });
          const cost = Math.max(1, Math.round(d.capacity * share));
          const denied = await store.acquire(bucket!, 'k', cost);
          if (cost > d.capacity) {
            expect(denied).toEqual({ allowed: false, retryAfterMs: null });
            return;
          }
          expect(denied.allowed).toBe(false);
          if (denied.allowed || denied.retryAfterMs === null) return;
          now += denied.retryAfterMs;
          const after = await store.acquire(bucket!, 'k', cost);
          expect(after.allowed, `${JSON.stringify(d)} cost ${cost}, waited ${denied.retryAfterMs} ms`).toBe(true);
          if (after.allowed) expect(after.remaining).toBeLessThanOrEqual(d.capacity);
        },
      ),
      { numRuns: 2000 },
    );
  });
});

// ---------------------------------------------------------------- RedisStore, within [t0, t1]

const clients: (Redis | Cluster)[] = [];
afterAll(async () => {
  await Promise.all(clients.map((c) => c.quit().catch(() => undefined)));
});

function redisTarget(kind: 'Redis' | 'Redis Cluster'): Redis | Cluster {
  const client = kind === 'Redis' ? redisClient(inject('redisUrl')) : clusterClient(inject('redisClusterNodes'));
  clients.push(client);
  return client;
}


describe.each(['Redis', 'Redis Cluster'] as const)('RedisStore on %s at random definitions', (kind) => {
  const client = redisTarget(kind);

  it('a full bucket admits its capacity; remaining never exceeds the capacity', async () => {
    const store = new RedisStore(client, { prefix: uniquePrefix('full admits') });
    await fc.assert(
      fc.asyncProperty(fc.array(definitionArbitrary, { minLength: 1, maxLength: 3 }), fc.constantFrom(...KEYS), async (definitions, key) => {
        const buckets = bucketsOf(definitions).map((b, i) => new TokenBucket(`${b.name}-${Math.random().toString(36).slice(2)}`, definitions[i]!.capacity, b.rate));
        const all = await store.acquireAll(buckets.map((bucket) => ({ bucket, key, cost: bucket.capacity })));
        expect(all).toEqual({ allowed: true, remaining: buckets.map(() => 0) });
        for (const bucket of buckets) {
          const zero = await store.acquire(bucket, key, 0);
          expect(zero.allowed && zero.remaining).toBeLessThanOrEqual(bucket.capacity);
        }
      }),
      { numRuns: 60 },
    );
  });

  it('waiting retryAfterMs admits (rates fast enough to wait for)', async () => {
    const store = new RedisStore(client, { prefix: uniquePrefix('wait admits') });
    const fast = definitionArbitrary.filter((d) => d.capacity >= 1 && (d.periodUs * Math.min(d.capacity, 3)) / d.tokens <= 30_000);
    await fc.assert(
      fc.asyncProperty(fast, fc.integer({ min: 1, max: 3 }), async (d, wanted) => {
        const bucket = new TokenBucket(`w${Math.random().toString(36).slice(2, 10)}`, d.capacity, new Rate(d.tokens, d.periodUs / 1000));
        const cost = Math.min(wanted, d.capacity);
        expect(await store.acquire(bucket, 'k', d.capacity)).toEqual({ allowed: true, remaining: 0 });
        const denied = await store.acquire(bucket, 'k', cost);
        if (denied.allowed) return; // refilled already: nothing to wait for
        expect(denied.retryAfterMs).not.toBeNull();
        await waitOnRedis(client, denied.retryAfterMs!);
        expect((await store.acquire(bucket, 'k', cost)).allowed, `${JSON.stringify(d)} cost ${cost}`).toBe(true);
      }),
      { numRuns: 25 },
    );
  }, 30_000);
});

/** Definitions whose refill matters within real waits of up to 40 ms, and slow ones where it never does. */
const redisScenario: fc.Arbitrary<Scenario> = fc
  .array(
    fc.oneof(
      fc
        .record({
          capacity: fc.integer({ min: 0, max: 5 }),
          tokens: fc.integer({ min: 1, max: 3 }),
          msPerToken: fc.integer({ min: 20, max: 100 }),
        })
        .map(({ capacity, tokens, msPerToken }) => ({ capacity, tokens, periodUs: tokens * msPerToken * 1000 })),
      definitionArbitrary,
    ),
    { minLength: 2, maxLength: 3 },
  )
  .chain((definitions) =>
    fc.record({
      definitions: fc.constant(definitions),
      steps: fc.array(stepArbitrary(definitions, fc.integer({ min: 0, max: 40 }), false), { minLength: 5, maxLength: 15 }),
    }),
  );

interface Bounds {
  /** Takes applied at t1: at most what Redis holds. */
  low: ReferenceBucket;
  /** Takes applied at t0: at least what Redis holds. */
  high: ReferenceBucket;
}

function toBatch(admission: Awaited<ReturnType<BucketStore['acquire']>>): BatchAdmission {
  return admission.allowed
    ? { allowed: true, remaining: [admission.remaining] }
    : { allowed: false, retryAfterMs: admission.retryAfterMs, denied: [{ index: 0, retryAfterMs: admission.retryAfterMs }], remaining: [] };
}

function expectWithin(value: number, min: number, max: number, what: string): void {
  expect(value, `${what}: ${value} outside [${min}, ${max}]`).toBeGreaterThanOrEqual(min);
  expect(value, `${what}: ${value} outside [${min}, ${max}]`).toBeLessThanOrEqual(max);
}

function checkAcquire(requests: readonly AcquireRequest[], got: BatchAdmission, atFewest: BatchAdmission, atMost: BatchAdmission, where: string): void {
  const detail = `${where}: Redis ${JSON.stringify(got)}, model between ${JSON.stringify(atFewest)} and ${JSON.stringify(atMost)}`;
  if (atFewest.allowed) expect(got.allowed, `${detail}: must be admitted`).toBe(true);
  if (!atMost.allowed) expect(got.allowed, `${detail}: must be denied`).toBe(false);
  if (got.allowed) {
    got.remaining.forEach((left, i) => {
      const min = atFewest.allowed ? atFewest.remaining[i]! : 0;
      const max = atMost.allowed ? atMost.remaining[i]! : requests[i]!.bucket.capacity;
      expectWithin(left, min, max, `${detail}: remaining[${i}]`);
    });
    return;
  }
  if (got.remaining.length === requests.length) {
    got.remaining.forEach((left, i) => {
      // an admission at t1 reports what it left, not what the bucket held: then only the capacity bounds it
      const max = atMost.allowed ? requests[i]!.bucket.capacity : atMost.remaining[i]!;
      expectWithin(left, atFewest.remaining[i]!, max, `${detail}: remaining now [${i}]`);
    });
  }
  if (!namesAPairTwice(requests)) {
    if (requests.some((r) => r.cost > r.bucket.capacity)) {
      expect(got.retryAfterMs, `${detail}: can never succeed`).toBeNull();
    } else {
      expect(got.retryAfterMs, detail).not.toBeNull();
      const min = atMost.allowed ? 0 : atMost.retryAfterMs!;
      const max = atFewest.allowed ? 0 : atFewest.retryAfterMs!;
      expectWithin(got.retryAfterMs!, min, max, `${detail}: retryAfterMs`);
    }
  }
  // Which requests were short, when both bounds agree on it.
  if (!atFewest.allowed && !atMost.allowed) {
    const indexes = (b: typeof atFewest) => b.denied.map((d) => d.index);
    if (JSON.stringify(indexes(atFewest)) === JSON.stringify(indexes(atMost))) {
      expect(indexes(got), `${detail}: short requests`).toEqual(indexes(atFewest));
      got.denied.forEach((d, j) => {
        const fewest = atFewest.denied[j]!.retryAfterMs;
        const most = atMost.denied[j]!.retryAfterMs;
        if (fewest === null || most === null) expect(d.retryAfterMs, detail).toBe(fewest);
        else expectWithin(d.retryAfterMs ?? Number.NaN, most, fewest, `${detail}: denied[${j}].retryAfterMs`);
      });
    }
  }
}

/**
 * After an admission at some moment in [t0, t1], bounds what each pair holds
 * using what Redis said it left: at least `remaining` whole tokens then (so
 * also at t1), fewer than `remaining + 1` then (so also at t0).
 */
function narrow(bounds: Bounds, requests: readonly AcquireRequest[], remaining: readonly number[], t0: number, t1: number): void {
  requests.forEach(({ bucket, key, cost }, i) => {
    const period = BigInt(bucket.rate.periodUs);
    const need = BigInt(cost) * period;
    const left = BigInt(remaining[i]!);
    const low = bounds.low.level(bucket, key, t1) - need;
    const floorLow = left * period;
    bounds.low.setLevel(bucket, key, t1, low > floorLow ? low : floorLow);
    const high = bounds.high.level(bucket, key, t0) - need;
    const ceilingHigh = (left + 1n) * period - 1n;
    bounds.high.setLevel(bucket, key, t0, high < ceilingHigh ? high : ceilingHigh);
  });
}

/** `client` reads Redis's clock; the store runs on `storeClient`, of any client library. */
async function checkRedisStore(client: Redis | Cluster, { definitions, steps }: Scenario, storeClient: RedisStoreClient = client): Promise<void> {
  const buckets = bucketsOf(definitions);
  const store = new RedisStore(storeClient, { prefix: uniquePrefix('store model') });
  const bounds: Bounds = { low: new ReferenceBucket(), high: new ReferenceBucket() };
  const cluster = 'nodes' in client;
  const started = await redisNow(client);
  for (const [i, step] of steps.entries()) {
    if (step.kind === 'advance') {
      await sleep(step.ms);
      continue;
    }
    if (step.kind === 'check') continue;
    const t0 = await redisNow(client);
    const where = `step ${i} (${describeStep(step)}) in [+${(t0 - started).toFixed(3)} ms`;
    if (step.kind === 'reset') {
      const bucket = buckets[step.bucket]!;
      const got = await store.reset(bucket, step.key);
      const t1 = await redisNow(client);
      const at = `${where}, +${(t1 - started).toFixed(3)} ms]`;
      // PXAT is rounded up to the ms and a key lives through its last ms: gone within 2 ms of full.
      if (bounds.high.clone().reset(bucket, step.key, t1, 2) === true) expect(got, `${at}: the bucket is not full`).toBe(true);
      if (bounds.low.clone().reset(bucket, step.key, t0, 2) === false) expect(got, `${at}: the bucket is full`).toBe(false);
      bounds.low.reset(bucket, step.key, t1, 2);
      bounds.high.reset(bucket, step.key, t0, 2);
      continue;
    }
    const requests = requestsOf(buckets, step.kind === 'acquire' ? [step] : step.requests);
    const got =
      step.kind === 'acquire'
        ? toBatch(await store.acquire(requests[0]!.bucket, requests[0]!.key, requests[0]!.cost))
        : await store.acquireAll(requests);
    const t1 = await redisNow(client);
    const at = `${where}, +${(t1 - started).toFixed(3)} ms]`;
    checkAcquire(requests, got, bounds.low.clone().acquireAll(requests, t0), bounds.high.clone().acquireAll(requests, t1), at);
    if (got.allowed) narrow(bounds, requests, got.remaining, t0, t1);
    else if (cluster && new Set(requests.map(({ key }) => keyString(key))).size > 1) givenBack(bounds, requests, t0, t1);
  }
}

/**
 * A denied operation across Cluster slots took its earlier slots and gave
 * them back, each bounded by its own take's refill (README: "each bounded by
 * its own take's refill"): up to what refilled while it ran less than was
 * taken, never more. So each pair may hold up to that much less.
 */
function givenBack(bounds: Bounds, requests: readonly AcquireRequest[], t0: number, t1: number): void {
  const ran = BigInt(Math.ceil((t1 - t0) * 1000));
  for (const { bucket, key, cost } of requests) {
    const lost = BigInt(bucket.rate.tokens) * ran;
    const most = BigInt(cost) * BigInt(bucket.rate.periodUs);
    const level = bounds.low.level(bucket, key, t1) - (lost < most ? lost : most);
    bounds.low.setLevel(bucket, key, t1, level > 0n ? level : 0n);
  }
}

// ioredis, and node-redis (iovalkey is ioredis's fork: the store runs both alike).
const modelCases = (['Redis', 'Redis Cluster'] as const).flatMap((kind) => (['ioredis', 'node-redis', 'node-redis-5'] as const).map((family) => [kind, family] as const));

describe.each(modelCases)('RedisStore on %s (%s) against the reference model', (kind, family) => {
  const client = redisTarget(kind);
  const storeClient = family === 'ioredis' ? client : familyClient(family, sharedTarget(kind === 'Redis' ? 'redis' : 'cluster'));

  it('agrees, within the time each call took, on random sequences with real waits', async () => {
    await fc.assert(
      fc.asyncProperty(redisScenario, (scenario) => checkRedisStore(client, scenario, storeClient)),
      // Real time: a run is a few hundred ms. The limit caps shrinking after a failure.
      { numRuns: 25, plugins: [fc.interruptAfterTimeLimit(25_000)] },
    );
  }, 40_000);
});

// ---------------------------------------------------------------- denials of one call, every store

const regressionStores: [string, () => RedisStore | MemoryStore][] = [
  ['MemoryStore', () => new MemoryStore()],
  ['RedisStore on Redis', () => new RedisStore(redisTarget('Redis'), { prefix: uniquePrefix('model regressions') })],
  ['RedisStore on Redis Cluster', () => new RedisStore(redisTarget('Redis Cluster'), { prefix: uniquePrefix('model regressions') })],
];

describe.each(regressionStores)('%s: the wait of a denied all-or-nothing call', (_name, makeStore) => {
  const store = makeStore();
  const hour = 3_600_000;

  it('is the longest wait of every short request, whichever identities they belong to', async () => {
    const fast = new TokenBucket('fast', 1, Rate.perSecond(1));
    const slow = new TokenBucket('slow', 1, Rate.perHour(1));
    await store.acquire(fast, 'alice');
    await store.acquire(slow, 'bob');
    const denied = await store.acquireAll([
      { bucket: fast, key: 'alice', cost: 1 },
      { bucket: slow, key: 'bob', cost: 1 },
    ]);
    expect(denied).toMatchObject({ allowed: false, denied: [{ index: 0 }, { index: 1 }], remaining: [0, 0] });
    if (denied.allowed) return;
    expect(denied.retryAfterMs).toBeGreaterThan(hour - 60_000);
  });

  it('is null when any request of the call can never succeed, whichever identities they belong to', async () => {
    const fast = new TokenBucket('fast-never', 1, Rate.perSecond(1));
    const small = new TokenBucket('small', 1, Rate.perHour(1));
    await store.acquire(fast, 'alice');
    const denied = await store.acquireAll([
      { bucket: fast, key: 'alice', cost: 1 },
      { bucket: small, key: 'bob', cost: 2 },
    ]);
    expect(denied).toMatchObject({ allowed: false, retryAfterMs: null, remaining: [0, 1] });
  });

  // SPEC §1: retryAfterMs is "how long until the bucket holds enough tokens".
  // A call naming one pair twice needs both costs at once.
  it('is null when one pair is asked for more than its capacity in total', async () => {
    const bucket = new TokenBucket('twice-never', 5, Rate.perHour(1));
    const answer = await store.acquireAll([
      { bucket, key: 'k', cost: 3 },
      { bucket, key: 'k', cost: 3 },
    ]);
    expect(answer).toMatchObject({ allowed: false, retryAfterMs: null, remaining: [5, 5] });
  });

  it('counts every cost asked of one pair', async () => {
    const bucket = new TokenBucket('twice', 6, Rate.perHour(1));
    await store.acquire(bucket, 'k', 4); // 2 left: the call below needs 4 more
    const answer = await store.acquireAll([
      { bucket, key: 'k', cost: 3 },
      { bucket, key: 'k', cost: 3 },
    ]);
    expect(answer.allowed).toBe(false);
    if (answer.allowed) return;
    expect(answer.retryAfterMs).toBeGreaterThan(4 * hour - 60_000);
    expect(answer.retryAfterMs).toBeLessThanOrEqual(4 * hour);
  });
});
