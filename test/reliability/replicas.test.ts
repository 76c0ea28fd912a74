// Four replicas of the example server share one Redis (then one Redis
// Cluster); one identity hammers all four at once. The shared buckets must
// admit exactly what one bucket would: the burst plus what refilled during
// the run, never more, and not less: at least 99% of it, leaving out only
// refill that came while no request reached the bucket (a stalled process).
import { afterEach, describe, expect, inject, it } from 'vitest';
import { loadFigures, kinds, round, unusedRefill } from './support/figures.js';
import { BOOK_QUERY, burst, exactBurst } from './support/burst.js';
import { startLoad, startReplicas, stopAll } from './support/processes.js';
import type { Replica } from './support/processes.js';
import { uniquePrefix } from '../support/clients.js';

const REPLICAS = 4;
const CAPACITY = 50;
const RATE_PER_SECOND = 100;
const DURATION_MS = 10_000;
const CONCURRENCY_PER_REPLICA = 3;
/** Float slack of the fractional bucket: a token, at most. */
const TOLERANCE_TOKENS = 1;

let replicas: Replica[] = [];
afterEach(async () => {
  await stopAll(replicas);
  replicas = [];
});

async function runReplicas(label: string, where: { REDIS_URL: string } | { REDIS_CLUSTER_NODES: string }): Promise<void> {
  replicas = await startReplicas(REPLICAS, {
    ...where,
    PREFIX: uniquePrefix(`replicas ${label}`),
    CAPACITY,
    RATE_PER_SECOND,
    ON_STORE_ERROR: 'deny', // a store failure shows as a 503 instead of hiding as an admission
  });
  // A cold replica takes tens of ms over its first operation (JIT, first script
  // load): warm each one up with another identity, so the measured window
  // starts when the replicas can answer at their normal pace.
  await warmUp(replicas);
  const identity = `replicas-${label}-${process.pid}`;
  const load = startLoad({
    targets: replicas.map((r) => r.url),
    concurrency: CONCURRENCY_PER_REPLICA,
    durationMs: DURATION_MS,
    maxRequests: 500_000,
    requestTimeoutMs: 10_000,
    query: BOOK_QUERY,
    headers: { 'x-user-id': identity },
  });
  const records = await load.records;
  const figures = loadFigures(records);
  const admitted = figures.byKind['data'] ?? 0;
  const elapsedS = figures.windowMs / 1000;
  const expected = CAPACITY + RATE_PER_SECOND * elapsedS;
  // Demand the bucket never saw (a stalled process on a busy machine) cannot be admitted:
  // the lower bound counts only refill that some request could have taken.
  const unused = unusedRefill(records, CAPACITY, RATE_PER_SECOND);
  const reachable = expected - unused.tokens;
  const perReplica = replicas.map((_, i) => records.filter((r) => r[0] === i && r[4] === 'data').length);
  console.log(
    `[replicas/${label}] ${REPLICAS} replicas × ${CONCURRENCY_PER_REPLICA} in flight for ${DURATION_MS / 1000} s: ` +
      `admitted ${admitted} of ${figures.requests} (${kinds(figures)}), expected ${round(expected)} = ${CAPACITY} + ${RATE_PER_SECOND}/s × ${round(elapsedS, 3)} s ` +
      `(${round((100 * admitted) / expected, 2)}%); refill no request was there to take ${round(unused.tokens)} (longest gap between admissions ${unused.longestGapMs} ms), ` +
      `so ${round((100 * admitted) / reachable, 2)}% of the ${round(reachable)} that could be taken; per replica ${perReplica.join('/')}, ` +
      `latency p50 ${figures.p50Ms} ms p99 ${figures.p99Ms} ms max ${figures.maxMs} ms, ${round(figures.requests / elapsedS, 0)} req/s`,
  );

  expect(figures.byKind['data'] ?? 0).toBeGreaterThan(0);
  expect(Object.keys(figures.byKind).sort()).toEqual(['data', 'limited']);
  expect(admitted).toBeLessThanOrEqual(expected + TOLERANCE_TOKENS);
  expect(admitted).toBeGreaterThanOrEqual(0.99 * reachable);
  for (const n of perReplica) expect(n).toBeGreaterThan(0);
  for (const replica of replicas) {
    expect(replica.alive()).toBe(true);
    expect(replica.markers).toEqual([]);
  }
}

async function warmUp(targets: readonly Replica[]): Promise<void> {
  for (const replica of targets) {
    const kinds = await burst([replica.url], `warm-up-${replica.pid}`, 5);
    expect(kinds).toEqual(exactBurst(5, 0));
  }
}

describe('replicas sharing one bucket store', () => {
  it('admit exactly capacity + refill × elapsed on one Redis', async () => {
    await runReplicas('redis', { REDIS_URL: inject('redisUrl') });
  });

  it('admit exactly capacity + refill × elapsed on a 3-master Redis Cluster', async () => {
    const nodes = inject('redisClusterNodes');
    if (nodes === null) throw new Error('no Redis Cluster: see the [redis] line of the global setup');
    await runReplicas('cluster', { REDIS_CLUSTER_NODES: nodes.map((n) => `${n.host}:${n.port}`).join(',') });
  });
});
