// Refunds against the exact counterfactual, over random operations of one
// identity at real magnitudes (clocks at today's epoch in µs and decades
// ahead, rates from one token an hour to ten million a second, capacities up
// to 2^53): operations take tokens, and later each gives back part or all of
// what it took.
//
// The counterfactual is the same history with every refunded token never
// taken, evaluated exactly in bigint. A refund does not say which take it is
// for, so the store promises that some of its takes could have been that
// much smaller: the counterfactual takes each refund out of the latest takes
// (those whose tokens lie furthest ahead, the fullest counterfactual). A
// refund may give back less (what has refilled meanwhile is not given
// twice), never more: the bucket never holds more than the counterfactual.
// And when the store gives back everything it took in one call, the bucket
// is full again: nothing is lost.
//
// MemoryStore runs on an injected clock. RedisStore runs on Redis's clock:
// around every call the test reads Redis TIME, and the counterfactual takes
// each operation's tokens at the earliest moment the script can have run and
// is read at the latest, so it bounds Redis from above.
import fc from 'fast-check';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { Rate } from '../src/rate.js';
import { MemoryStore } from '../src/stores/memory-store.js';
import { RedisStore } from '../src/stores/redis-store.js';
import { TokenBucket } from '../src/token-bucket.js';
import { familyClient, sharedTarget } from './support/client-families.js';
import { clusterClient, redisClient, uniquePrefix } from './support/clients.js';
import { redisNow, waitOnRedis } from './support/redis-clock.js';

/** 100 Julian years in µs: the longest full refill a bucket may have. */
const CENTURY_US = 3_155_760_000_000_000n;
const HALF_YEAR_US = 15_778_800_000_000;

interface Definition {
  capacity: number;
  tokens: number;
  periodUs: number;
}

type Step = { kind: 'take'; cost: number } | { kind: 'refund'; op: number; share: number } | { kind: 'advance'; us: number };

/** From one token an hour to ten tokens a microsecond (ten million a second). */
const rateArbitrary = fc
  .oneof(
    fc.record({ tokens: fc.integer({ min: 1, max: 3 }), periodUs: fc.integer({ min: 1_000_000, max: 3_600_000_000 }) }),
    fc.record({ tokens: fc.integer({ min: 1, max: 10_000 }), periodUs: fc.constantFrom(1_000_000, 60_000_000, 1_000, 700, 333_333) }),
    fc.record({ tokens: fc.integer({ min: 1, max: 10_000_000 }), periodUs: fc.integer({ min: 1, max: 1_000_000 }) }),
  )
  .map(({ tokens, periodUs }) => {
    if (tokens > 10 * periodUs) periodUs = Math.ceil(tokens / 10);
    if (periodUs > tokens * 3_600_000_000) periodUs = tokens * 3_600_000_000;
    return { tokens, periodUs };
  });

function maxCapacity(tokens: number, periodUs: number): number {
  const bound = (BigInt(tokens) * CENTURY_US) / BigInt(periodUs);
  return bound > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(bound);
}

const definitionArbitrary: fc.Arbitrary<Definition> = rateArbitrary.chain(({ tokens, periodUs }) => {
  const max = maxCapacity(tokens, periodUs);
  return fc
    .oneof(fc.integer({ min: 1, max: 20 }), fc.integer({ min: 1, max: 1000 }), fc.integer({ min: 1, max }), fc.constant(max))
    .map((capacity) => ({ capacity: Math.max(1, Math.min(capacity, max)), tokens, periodUs }));
});

/** A full refill of the bucket in µs (at most 100 years). */
function fullRefillUs(d: Definition): number {
  return Number((BigInt(d.capacity) * BigInt(d.periodUs) + BigInt(d.tokens) - 1n) / BigInt(d.tokens));
}

/** Operations: takes of up to the capacity, refunds of a share (per mille) of what one of them kept, and waits. */
function stepsArbitrary(d: Definition, maxAdvanceUs: number): fc.Arbitrary<Step[]> {
  const cost = fc.oneof(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: d.capacity }), fc.constant(d.capacity));
  return fc.array(
    fc.oneof(
      { weight: 4, arbitrary: cost.map((c): Step => ({ kind: 'take', cost: c })) },
      {
        weight: 3,
        arbitrary: fc.record({ op: fc.nat(40), share: fc.integer({ min: 0, max: 1000 }) }).map((r): Step => ({ kind: 'refund', ...r })),
      },
      { weight: 3, arbitrary: fc.integer({ min: 0, max: maxAdvanceUs }).map((us): Step => ({ kind: 'advance', us })) },
    ),
    { minLength: 1, maxLength: 40 },
  );
}

/** What a history leaves, exactly: takes (µs, tokens) from a full bucket, read at `now`; tokens × periodUs. */
function levelAfter(d: Definition, takes: readonly { at: bigint; cost: bigint }[], now: bigint): bigint {
  const full = BigInt(d.capacity) * BigInt(d.periodUs);
  const refill = (level: bigint, from: bigint, to: bigint): bigint => {
    const next = level + (to > from ? to - from : 0n) * BigInt(d.tokens);
    return next < full ? next : full;
  };
  let level = full;
  let t = takes[0]?.at ?? now;
  for (const take of takes) {
    level = refill(level, t, take.at) - take.cost * BigInt(d.periodUs);
    t = take.at;
  }
  return refill(level, t, now);
}

interface Subject {
  store: MemoryStore | RedisStore;
  /** Redis TIME (or the injected clock) in µs. */
  now(): Promise<bigint>;
  advance(us: number): Promise<void>;
}

/** One operation: when it took (at the earliest), what it took, what it has asked back so far, what the counterfactual keeps. */
interface Op {
  at: bigint;
  cost: number;
  asked: number;
  kept: number;
}

async function run(subject: Subject, d: Definition, steps: readonly Step[], key: string): Promise<void> {
  const { store } = subject;
  const bucket = new TokenBucket('model', d.capacity, new Rate(d.tokens, d.periodUs / 1000));
  const ops: Op[] = [];
  const log: string[] = [];
  const held = async (): Promise<number> => {
    const answer = await store.acquire(bucket, key, 0);
    if (!answer.allowed) throw new Error('a cost-0 acquire is always admitted');
    return answer.remaining;
  };
  const counterfactual = (now: bigint): bigint => {
    const kept = ops.map((op) => ({ at: op.at, cost: BigInt(op.kept) }));
    return levelAfter(d, kept, now) / BigInt(d.periodUs);
  };

  for (const step of steps) {
    if (step.kind === 'advance') {
      await subject.advance(step.us);
      log.push(`advance ${step.us} µs`);
      continue;
    }
    if (step.kind === 'take') {
      const before = await subject.now();
      const answer = await store.acquire(bucket, key, step.cost);
      log.push(`take ${step.cost}: ${JSON.stringify(answer)}`);
      if (answer.allowed && step.cost > 0) ops.push({ at: before, cost: step.cost, asked: 0, kept: step.cost });
    } else {
      const op = ops[step.op % Math.max(1, ops.length)];
      if (op === undefined) continue;
      const tokens = Math.floor(((op.cost - op.asked) * step.share) / 1000);
      await store.refund(bucket, key, tokens);
      op.asked += tokens;
      let left = tokens;
      for (let j = ops.length - 1; j >= 0 && left > 0; j--) {
        const share = Math.min(left, ops[j]!.kept);
        ops[j]!.kept -= share;
        left -= share;
      }
      log.push(`refund ${tokens} of a take of ${op.cost}`);
    }
    const left = await held();
    const after = await subject.now();
    const where = `${JSON.stringify(d)}\n${log.join('\n')}`;
    expect(left, `above the capacity after\n${where}`).toBeLessThanOrEqual(d.capacity);
    expect(BigInt(left), `more than had the refunded tokens never been taken, after\n${where}`).toBeLessThanOrEqual(counterfactual(after));
  }

  // Everything given back in one call: full again.
  const owed = ops.reduce((sum, op) => sum + (op.cost - op.asked), 0);
  if (ops.length > 0 && ops.every((op) => op.asked === 0) && owed <= Number.MAX_SAFE_INTEGER) {
    await store.refund(bucket, key, owed);
    expect(await held(), `not full after giving back everything, after\n${JSON.stringify(d)}\n${log.join('\n')}`).toBe(d.capacity);
  }
}

describe('MemoryStore refunds against the counterfactual', () => {
  const epoch = BigInt(Date.now()) * 1000n;
  const clockArbitrary = fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 30 * 365 * 86_400_000_000 }));

  it('never give back more than had the tokens not been taken, and give everything back at once', async () => {
    await fc.assert(
      fc.asyncProperty(
        // at most 40 waits of half a year: the clock stays within this century and the next
        definitionArbitrary.chain((d) =>
          fc.record({ d: fc.constant(d), steps: stepsArbitrary(d, Math.min(fullRefillUs(d), HALF_YEAR_US)), ahead: clockArbitrary }),
        ),
        async ({ d, steps, ahead }) => {
          let now = epoch + BigInt(ahead);
          const store = new MemoryStore({ now: () => Number(now) / 1000 });
          await run({ store, now: async () => now, advance: async (us) => void (now += BigInt(us)) }, d, steps, 'k');
        },
      ),
      { numRuns: 400 },
    );
  });
});

const clients: (Redis | Cluster)[] = [];
afterAll(async () => {
  await Promise.all(clients.map((c) => c.quit().catch(() => undefined)));
});

// ioredis, and node-redis (iovalkey is ioredis's fork: the store runs both alike). The clock is read on ioredis.
const modelCases = (['Redis', 'Redis Cluster'] as const).flatMap((kind) => (['ioredis', 'node-redis', 'node-redis-5'] as const).map((family) => [kind, family] as const));

describe.each(modelCases)('RedisStore on %s (%s): refunds against the counterfactual', (kind, family) => {
  const client = kind === 'Redis' ? redisClient(inject('redisUrl')) : clusterClient(inject('redisClusterNodes'));
  clients.push(client);
  const storeClient = family === 'ioredis' ? client : familyClient(family, sharedTarget(kind === 'Redis' ? 'redis' : 'cluster'));
  const store = new RedisStore(storeClient, { prefix: uniquePrefix(`refund model ${kind} ${family}`) });
  let run_ = 0;

  it('never give back more than had the tokens not been taken, and give everything back at once', async () => {
    // waits of up to 30 ms: rates whose tokens refill within the run matter most
    await fc.assert(
      fc.asyncProperty(
        definitionArbitrary.chain((d) => fc.record({ d: fc.constant(d), steps: stepsArbitrary(d, 30_000) })),
        async ({ d, steps }) => {
          run_ += 1;
          await run(
            {
              store,
              now: async () => BigInt(Math.round((await redisNow(client)) * 1000)),
              advance: (us) => waitOnRedis(client, us / 1000),
            },
            d,
            steps.slice(0, 16),
            `k${run_}`,
          );
        },
      ),
      { numRuns: 40 },
    );
  }, 60_000);
});
