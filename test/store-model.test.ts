// The stores against the reference model of SPEC §1 (test/support/reference-bucket.ts),
// over random sequences of acquires, all-or-nothing acquires, resets and
// passing time.
//
// MemoryStore runs on an injected clock and must agree with the model
// exactly. RedisStore runs on Redis's own clock, which the test cannot stop:
// around every call it reads Redis TIME before (t0) and after (t1), so the
// script ran at some moment in [t0, t1], and it keeps two models that bound
// what Redis can hold: `low` applies every take as late as possible (t1),
// `high` as early as possible (t0). Where both bounds decide alike Redis must
// decide the same; where they differ Redis may go either way, and what it
// answered (its decision and `remaining`) narrows both bounds again.
import { setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { Rate } from '../src/rate.js';
import type { AcquireRequest, BatchAdmission, BucketKey, BucketStore } from '../src/stores/bucket-store.js';
import { MemoryStore } from '../src/stores/memory-store.js';
import { RedisStore } from '../src/stores/redis-store.js';
import { TokenBucket } from '../src/token-bucket.js';
import { clusterClient, redisClient, uniquePrefix } from './support/clients.js';
import { ReferenceBucket, pairId } from './support/reference-bucket.js';

// `'7'`, `7` and `7n` are one identity; on a Cluster, alice and bob live in different hash slots.
const KEYS: readonly BucketKey[] = ['alice', 'bob', '7', 7, 7n];

interface Definition {
  capacity: number;
  tokens: number;
  periodMs: number;
}

interface RequestStep {
  bucket: number;
  key: BucketKey;
  cost: number;
}

type Step =
  | ({ kind: 'acquire' } & RequestStep)
  | { kind: 'acquireAll'; requests: RequestStep[] }
  | { kind: 'reset'; bucket: number; key: BucketKey }
  | { kind: 'advance'; ms: number };

interface Scenario {
  definitions: Definition[];
  steps: Step[];
}

function bucketsOf(definitions: readonly Definition[]): TokenBucket[] {
  return definitions.map((d, i) => new TokenBucket(`b${i}`, d.capacity, new Rate(d.tokens, d.periodMs)));
}

function requestsOf(buckets: readonly TokenBucket[], steps: readonly RequestStep[]): AcquireRequest[] {
  return steps.map(({ bucket, key, cost }) => ({ bucket: buckets[bucket]!, key, cost }));
}

/** The plugin never names a pair twice; when a call does, its denial's wait is checked apart (see below). */
function namesAPairTwice(requests: readonly AcquireRequest[]): boolean {
  return new Set(requests.map((r) => pairId(r.bucket, r.key))).size < requests.length;
}

function describeStep(step: Step): string {
  const req = (r: RequestStep) => `b${r.bucket}/${typeof r.key === 'bigint' ? `${r.key}n` : JSON.stringify(r.key)} cost ${r.cost}`;
  switch (step.kind) {
    case 'acquire':
      return `acquire ${req(step)}`;
    case 'acquireAll':
      return `acquireAll [${step.requests.map(req).join(', ')}]`;
    case 'reset':
      return `reset ${req({ ...step, cost: 0 })}`;
    case 'advance':
      return `advance ${step.ms} ms`;
  }
}

function stepArbitrary(definitions: readonly Definition[], advance: fc.Arbitrary<number>): fc.Arbitrary<Step> {
  const bucket = fc.nat(definitions.length - 1);
  const key = fc.constantFrom(...KEYS);
  const request = fc.record({ bucket, key, cost: fc.integer({ min: 0, max: 6 }) });
  return fc.oneof(
    { weight: 4, arbitrary: request.map((r): Step => ({ kind: 'acquire', ...r })) },
    { weight: 2, arbitrary: fc.array(request, { minLength: 2, maxLength: 3 }).map((requests): Step => ({ kind: 'acquireAll', requests })) },
    { weight: 1, arbitrary: fc.record({ bucket, key }).map((r): Step => ({ kind: 'reset', ...r })) },
    { weight: 3, arbitrary: advance.map((ms): Step => ({ kind: 'advance', ms })) },
  );
}

// ---------------------------------------------------------------- MemoryStore, exactly

/**
 * Advances of whole ms, of eighths of a ms (exact in binary, so the store's
 * clock arithmetic is exact and only its token arithmetic is tested), and of
 * exactly n tokens' refill time of one of the buckets (where rounding bites).
 */
function memoryAdvance(definitions: readonly Definition[]): fc.Arbitrary<number> {
  return fc.oneof(
    fc.integer({ min: 0, max: 2000 }),
    fc.integer({ min: 0, max: 16_000 }).map((eighths) => eighths / 8),
    fc
      .record({ bucket: fc.nat(definitions.length - 1), n: fc.integer({ min: 1, max: 3 }) })
      .map(({ bucket, n }) => {
        const d = definitions[bucket]!;
        return Math.round(((n * d.periodMs) / d.tokens) * 8) / 8;
      }),
  );
}

const memoryScenario: fc.Arbitrary<Scenario & { start: number }> = fc
  .array(
    fc.record({
      capacity: fc.integer({ min: 0, max: 5 }),
      tokens: fc.integer({ min: 1, max: 3 }),
      periodMs: fc.integer({ min: 50, max: 1000 }),
    }),
    { minLength: 2, maxLength: 3 },
  )
  .chain((definitions) =>
    fc.record({
      definitions: fc.constant(definitions),
      start: fc.constantFrom(0, 1_000_000, 1_750_000_000_000),
      steps: fc.array(stepArbitrary(definitions, memoryAdvance(definitions)), { maxLength: 40 }),
    }),
  );

async function checkMemoryStore({ definitions, start, steps }: Scenario & { start: number }): Promise<void> {
  const buckets = bucketsOf(definitions);
  let now = start;
  const store = new MemoryStore({ now: () => now });
  const model = new ReferenceBucket();
  try {
    for (const [i, step] of steps.entries()) {
      const where = `step ${i} (${describeStep(step)}) at +${now - start} ms`;
      switch (step.kind) {
        case 'advance':
          now += step.ms;
          break;
        case 'acquire': {
          const bucket = buckets[step.bucket]!;
          const expected = model.acquire(bucket, step.key, step.cost, now);
          expect(await store.acquire(bucket, step.key, step.cost), where).toEqual(expected);
          break;
        }
        case 'acquireAll': {
          const requests = requestsOf(buckets, step.requests);
          const expected = model.acquireAll(requests, now);
          const got = await store.acquireAll(requests);
          if (namesAPairTwice(requests) && !expected.allowed && !got.allowed) {
            expect({ allowed: got.allowed, denied: got.denied }, where).toEqual({ allowed: false, denied: expected.denied });
          } else {
            expect(got, where).toEqual(expected);
          }
          break;
        }
        case 'reset': {
          const bucket = buckets[step.bucket]!;
          // MemoryStore's expiry is rounded up to the ms: a bucket full again for less may still be there.
          const expected = model.reset(bucket, step.key, now, 1);
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
  it('agrees exactly on random sequences of acquires, resets and clock advances', async () => {
    await fc.assert(fc.asyncProperty(memoryScenario, checkMemoryStore), { numRuns: 1000 });
  });

  // Found by the property above: the store keeps tokens as a float and
  // compares it with no tolerance, so a bucket refilled by exactly one token
  // can hold 0.9999999999999999 of it.
  it('admits a request after exactly the advertised wait (Rate.perHour(1), capacity 1)', async () => {
    let now = 1_000_000;
    const store = new MemoryStore({ now: () => now });
    const bucket = new TokenBucket('hourly', 1, Rate.perHour(1));
    expect(await store.acquire(bucket, 'k')).toEqual({ allowed: true, remaining: 0 });
    // ceil((1 - 0) / (1 / 3_600_000)) = 3_600_000
    expect(await store.acquire(bucket, 'k')).toEqual({ allowed: false, retryAfterMs: 3_600_000 });
    now += 3_600_000;
    expect(await store.acquire(bucket, 'k')).toEqual({ allowed: true, remaining: 0 });
  });

  it('admits a request after exactly one token of refill (new Rate(1, 98), capacity 1)', async () => {
    let now = 0;
    const store = new MemoryStore({ now: () => now });
    const bucket = new TokenBucket('b98', 1, new Rate(1, 98));
    expect(await store.acquire(bucket, 'k')).toEqual({ allowed: true, remaining: 0 });
    expect(await store.acquire(bucket, 'k')).toEqual({ allowed: false, retryAfterMs: 98 });
    now = 98;
    expect(await store.acquire(bucket, 'k')).toEqual({ allowed: true, remaining: 0 });
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

/** Redis's clock, in ms with µs fractions: the clock the store's script reads. */
async function redisNow(client: Redis | Cluster): Promise<number> {
  const [seconds, micros] = (await client.time()).map(Number);
  return seconds! * 1000 + micros! / 1000;
}

/** Fast rates (one token per 20–100 ms) so real waits of up to 40 ms matter. */
const redisScenario: fc.Arbitrary<Scenario> = fc
  .array(
    fc
      .record({
        capacity: fc.integer({ min: 0, max: 5 }),
        tokens: fc.integer({ min: 1, max: 3 }),
        msPerToken: fc.integer({ min: 20, max: 100 }),
      })
      .map(({ capacity, tokens, msPerToken }) => ({ capacity, tokens, periodMs: tokens * msPerToken })),
    { minLength: 2, maxLength: 3 },
  )
  .chain((definitions) =>
    fc.record({
      definitions: fc.constant(definitions),
      steps: fc.array(stepArbitrary(definitions, fc.integer({ min: 0, max: 40 })), { minLength: 5, maxLength: 15 }),
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
    : { allowed: false, retryAfterMs: admission.retryAfterMs, denied: [{ index: 0, retryAfterMs: admission.retryAfterMs }] };
}

/** `value` in [min - 1, max + 1]: Redis keeps fractions of a µs the model rounds. */
function expectWithin(value: number, min: number, max: number, what: string): void {
  expect(value, `${what}: ${value} outside [${min}, ${max}] ± 1`).toBeGreaterThanOrEqual(min - 1);
  expect(value, `${what}: ${value} outside [${min}, ${max}] ± 1`).toBeLessThanOrEqual(max + 1);
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

/** After an admission in [t0, t1], bounds what each pair holds, using what Redis said it left. */
function narrow(bounds: Bounds, requests: readonly AcquireRequest[], remaining: readonly number[], t0: number, t1: number): void {
  requests.forEach(({ bucket, key, cost }, i) => {
    const period = BigInt(bucket.rate.periodUs);
    const oneMicrosecond = BigInt(bucket.rate.tokens); // of refill, for Redis's half-µs slack
    const need = BigInt(cost) * period;
    const left = BigInt(remaining[i]!);
    const low = bounds.low.level(bucket, key, t1) - need;
    const floorLow = left * period - oneMicrosecond;
    bounds.low.setLevel(bucket, key, t1, low > floorLow ? low : floorLow);
    const high = bounds.high.level(bucket, key, t0) - need;
    const ceilingHigh = (left + 1n) * period + oneMicrosecond;
    bounds.high.setLevel(bucket, key, t0, high < ceilingHigh ? high : ceilingHigh);
  });
}

async function checkRedisStore(client: Redis | Cluster, { definitions, steps }: Scenario): Promise<void> {
  const buckets = bucketsOf(definitions);
  const store = new RedisStore(client, { prefix: uniquePrefix('store model') });
  const bounds: Bounds = { low: new ReferenceBucket(), high: new ReferenceBucket() };
  const started = await redisNow(client);
  for (const [i, step] of steps.entries()) {
    if (step.kind === 'advance') {
      await sleep(step.ms);
      continue;
    }
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
  }
}

describe.each(['Redis', 'Redis Cluster'] as const)('RedisStore on %s against the reference model', (kind) => {
  const client = redisTarget(kind);

  it('agrees, within the time each call took, on random sequences with real waits', async () => {
    await fc.assert(
      fc.asyncProperty(redisScenario, (scenario) => checkRedisStore(client, scenario)),
      // Real time: a run is a few hundred ms. The limit caps shrinking after a failure.
      { numRuns: 15, plugins: [fc.interruptAfterTimeLimit(20_000)] },
    );
  }, 30_000);
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
    expect(denied).toMatchObject({ allowed: false, denied: [{ index: 0 }, { index: 1 }] });
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
    expect(denied).toMatchObject({ allowed: false, retryAfterMs: null });
  });

  // SPEC §1: retryAfterMs is "how long until the bucket holds enough tokens".
  // A call naming one pair twice needs both costs at once.
  it('is null when one pair is asked for more than its capacity in total', async () => {
    const bucket = new TokenBucket('twice-never', 5, Rate.perHour(1));
    const answer = await store.acquireAll([
      { bucket, key: 'k', cost: 3 },
      { bucket, key: 'k', cost: 3 },
    ]);
    expect(answer).toMatchObject({ allowed: false, retryAfterMs: null });
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
