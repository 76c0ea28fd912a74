// Random interleavings of acquire, refund and reset by two store objects on
// one key (two processes, as far as the stores can tell), against an exact
// bigint model on Redis's clock.
//
// Never fuller: the bucket holds no more than had every refunded token never
// been taken, counting each refund out of the refunding store's latest takes
// since the latest reset (a reset gives back everything before it, so
// nothing before it is given back again).
// Never emptier: no less than had no refund given anything back; and at one
// token an hour, where nothing refills within a run, within a token of the
// counterfactual itself, except for what a store cannot know: takes of its
// own made before another store's reset and not yet from a full bucket since
// (lua/reset.lua's mark then voids its refunds).
import fc from 'fast-check';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { Rate } from '../src/rate.js';
import { RedisStore } from '../src/stores/redis-store.js';
import { TokenBucket } from '../src/token-bucket.js';
import { clusterClient, redisClient, uniquePrefix } from './support/clients.js';
import { redisNow } from './support/redis-clock.js';

interface Definition {
  capacity: number;
  tokens: number;
  periodUs: number;
}

type Step = { kind: 'take'; by: 0 | 1; cost: number } | { kind: 'refund'; by: 0 | 1; share: number } | { kind: 'reset'; by: 0 | 1 };

const definitions: fc.Arbitrary<Definition> = fc.oneof(
  // nothing refills within a run: refunds must be exact
  fc.record({ capacity: fc.integer({ min: 1, max: 1000 }), tokens: fc.constant(1), periodUs: fc.constant(3_600_000_000) }),
  // tokens refill while it runs, up to ten million a second
  fc.record({ capacity: fc.integer({ min: 1, max: 1_000_000 }), tokens: fc.integer({ min: 1, max: 10_000_000 }), periodUs: fc.constantFrom(1_000_000, 333_333, 1_000) }),
  fc.record({ capacity: fc.constantFrom(2 ** 40, Number.MAX_SAFE_INTEGER), tokens: fc.constant(10_000_000), periodUs: fc.constant(1_000_000) }),
);

function steps(d: Definition): fc.Arbitrary<Step[]> {
  const by = fc.constantFrom(0 as const, 1 as const);
  const cost = fc.oneof(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: d.capacity }));
  return fc.array(
    fc.oneof(
      { weight: 5, arbitrary: fc.record({ kind: fc.constant('take' as const), by, cost }) },
      { weight: 4, arbitrary: fc.record({ kind: fc.constant('refund' as const), by, share: fc.integer({ min: 0, max: 1000 }) }) },
      { weight: 1, arbitrary: fc.record({ kind: fc.constant('reset' as const), by }) },
    ),
    { minLength: 1, maxLength: 14 },
  );
}

interface Take {
  by: 0 | 1;
  /** µs: the earliest and the latest the script can have run at. */
  early: bigint;
  late: bigint;
  cost: bigint;
  /** Not refunded (upper model) / not refunded by a refund that must have given back (lower model). */
  keptHigh: bigint;
  keptLow: bigint;
}

/** A full bucket since `from`, then `takes` at the chosen times, read at `now`: tokens × periodUs. */
function level(d: Definition, from: bigint | undefined, takes: readonly { at: bigint; cost: bigint }[], now: bigint): bigint {
  const full = BigInt(d.capacity) * BigInt(d.periodUs);
  const sorted = [...takes].sort((x, y) => (x.at < y.at ? -1 : x.at > y.at ? 1 : 0));
  let value = full;
  let t = from ?? sorted[0]?.at ?? now;
  for (const take of sorted) {
    if (take.at > t) value += (take.at - t) * BigInt(d.tokens);
    if (value > full) value = full;
    value -= take.cost * BigInt(d.periodUs);
    if (take.at > t) t = take.at;
  }
  if (now > t) value += (now - t) * BigInt(d.tokens);
  return value > full ? full : value;
}

function floorDiv(a: bigint, b: bigint): bigint {
  const q = a / b;
  return q * b > a ? q - 1n : q;
}

const clients: (Redis | Cluster)[] = [];
afterAll(async () => {
  await Promise.all(clients.map((c) => c.quit().catch(() => undefined)));
});

describe.each(['Redis', 'Redis Cluster'] as const)('two RedisStores on one key on %s', (kind) => {
  const client = kind === 'Redis' ? redisClient(inject('redisUrl')) : clusterClient(inject('redisClusterNodes'));
  const reader = kind === 'Redis' ? redisClient(inject('redisUrl')) : clusterClient(inject('redisClusterNodes'));
  clients.push(client, reader);
  const prefix = uniquePrefix(`interleavings ${kind}`);
  const stores = [new RedisStore(client, { prefix }), new RedisStore(reader, { prefix })] as const;
  let run = 0;
  const now = async (): Promise<bigint> => BigInt(Math.round((await redisNow(reader)) * 1000));

  it('acquire, refund and reset interleaved: never fuller than the counterfactual, never emptier than no refund', async () => {
    await fc.assert(
      fc.asyncProperty(
        definitions.chain((d) => fc.record({ d: fc.constant(d), steps: steps(d) })),
        async ({ d, steps }) => {
          run += 1;
          const key = `k${run}`;
          const bucket = new TokenBucket('model', d.capacity, new Rate(d.tokens, d.periodUs / 1000));
          const P = BigInt(d.periodUs);
          const slow = d.tokens === 1 && d.periodUs === 3_600_000_000;
          let takes: Take[] = [];
          let resetEarly: bigint | undefined;
          let resetLate: bigint | undefined;
          /** Per store: its takes before another store's reset may still be in its chain. */
          const voided = [false, false];
          /** Per store: what it took and has not asked back, as the application sees it (across resets). */
          const owedBy: [bigint, bigint] = [0n, 0n];
          const log: string[] = [];
          for (const step of steps) {
            const store = stores[step.by];
            const early = await now();
            if (step.kind === 'take') {
              const answer = await store.acquire(bucket, key, step.cost);
              const late = await now();
              log.push(`store ${step.by} takes ${step.cost}: ${JSON.stringify(answer)}`);
              if (answer.allowed && step.cost > 0) {
                const cost = BigInt(step.cost);
                takes.push({ by: step.by, early, late, cost, keptHigh: cost, keptLow: cost });
                owedBy[step.by] += cost;
                // from a full bucket, the store starts its chain afresh (a `remaining` of capacity - cost tells it)
                if (answer.remaining === d.capacity - step.cost) voided[step.by] = false;
              }
            } else if (step.kind === 'refund') {
              const own = takes.filter((t) => t.by === step.by);
              const tokens = Number((owedBy[step.by] * BigInt(step.share)) / 1000n);
              owedBy[step.by] -= BigInt(tokens);
              await store.refund(bucket, key, tokens);
              log.push(`store ${step.by} refunds ${tokens}`);
              // out of its latest takes first
              let high = BigInt(tokens);
              let low = voided[step.by] ? 0n : BigInt(tokens);
              for (let j = own.length - 1; j >= 0; j--) {
                const t = own[j]!;
                const h = high < t.keptHigh ? high : t.keptHigh;
                t.keptHigh -= h;
                high -= h;
                const l = low < t.keptLow ? low : t.keptLow;
                t.keptLow -= l;
                low -= l;
              }
            } else {
              await store.reset(bucket, key);
              const late = await now();
              log.push(`store ${step.by} resets`);
              // a take of the other store before the reset voids its refunds until it takes from full
              const other = step.by === 0 ? 1 : 0;
              if (takes.some((t) => t.by === other)) voided[other] = true;
              voided[step.by] = false; // its own takes are forgotten
              takes = [];
              resetEarly = early;
              resetLate = late;
            }
            const readEarly = await now();
            const answer = await stores[0].acquire(bucket, key, 0);
            const readLate = await now();
            if (!answer.allowed) throw new Error('a cost-0 acquire is always admitted');
            const left = BigInt(answer.remaining);
            const where = `${JSON.stringify(d)}\n${log.join('\n')}`;
            // fullest: takes as early, the reset as late, read as late as can be
            const high = level(d, resetLate, takes.map((t) => ({ at: t.early, cost: t.keptHigh })), readLate) / P;
            expect(left, `fuller than had the refunded tokens never been taken\n${where}`).toBeLessThanOrEqual(high);
            // emptiest: takes as late, the reset as early, read as early as can be
            const none = level(d, resetEarly, takes.map((t) => ({ at: t.late, cost: t.cost })), readEarly);
            expect(left, `emptier than had no refund given anything back\n${where}`).toBeGreaterThanOrEqual(floorDiv(none, P));
            if (slow) {
              const low = level(d, resetEarly, takes.map((t) => ({ at: t.late, cost: t.keptLow })), readEarly) / P;
              expect(left, `emptier by a token than the counterfactual\n${where}`).toBeGreaterThanOrEqual(low - 1n);
            }
          }
        },
      ),
      {
        numRuns: kind === 'Redis' ? 60 : 30,
        examples: [
          // another store's reset between a take and its refund (what lua/reset.lua's mark is for)
          [
            {
              d: { capacity: 10, tokens: 1, periodUs: 3_600_000_000 },
              steps: [
                { kind: 'take', by: 0, cost: 5 },
                { kind: 'reset', by: 1 },
                { kind: 'take', by: 1, cost: 10 },
                { kind: 'refund', by: 0, share: 1000 },
                { kind: 'take', by: 0, cost: 0 },
              ],
            },
          ],
          // refunds of two stores' interleaved takes, each counted from its own chain's end
          [
            {
              d: { capacity: 100, tokens: 1, periodUs: 3_600_000_000 },
              steps: [
                { kind: 'take', by: 0, cost: 30 },
                { kind: 'take', by: 1, cost: 30 },
                { kind: 'take', by: 0, cost: 30 },
                { kind: 'refund', by: 0, share: 500 },
                { kind: 'refund', by: 0, share: 1000 },
                { kind: 'refund', by: 1, share: 1000 },
              ],
            },
          ],
        ],
      },
    );
  }, 90_000);
});
