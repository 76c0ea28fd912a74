// One identity floods two replicas of the example server (deny cache on, the
// default) sharing one Redis, while other identities use the same replicas.
// The flood is answered mostly by the replicas themselves (few store calls),
// yet admits exactly what its bucket allows; a steady identity beside it gets
// exactly its own limit, and fresh identities' bursts are exact.
import { Redis } from 'ioredis';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { kinds, loadFigures, round, unusedRefill } from './support/figures.js';
import { BOOK_QUERY, EXACT_SEARCH_BURST, SEARCHES_PER_BURST, burst, exactBurst } from './support/burst.js';
import type { LoadRecord } from './support/load.js';
import { startLoad, startReplicas, stopAll } from './support/processes.js';
import type { Replica } from './support/processes.js';
import { uniquePrefix } from '../support/clients.js';

const REPLICAS = 2;
/** The "api" bucket: 20 in a burst, then one every 200 ms, per identity. */
const CAPACITY = 20;
const RATE_PER_SECOND = 5;
const DURATION_MS = 8_000;
const FLOOD_CONCURRENCY_PER_REPLICA = 16;
/** 5 tokens of "search" (20 in a burst, one per 3 s) and 1 of "api": a fresh identity gets exactly 4. */
const ONE_SEARCH = '{ search(term: "Book", first: 1) { title } }';
/** Float slack of the fractional bucket: a token, at most. */
const TOLERANCE_TOKENS = 1;

let replicas: Replica[] = [];
let admin: Redis | undefined;
afterEach(async () => {
  await stopAll(replicas);
  replicas = [];
  admin?.disconnect();
  admin = undefined;
});

async function scriptCalls(redis: Redis): Promise<number> {
  const info = await redis.info('commandstats');
  let calls = 0;
  for (const match of info.matchAll(/^cmdstat_(evalsha|eval):calls=(\d+)/gm)) calls += Number(match[2]);
  return calls;
}

/** Admissions of one identity must be what its bucket allows over the load's window, to a token, less refill nobody asked for. */
function expectExact(label: string, records: readonly LoadRecord[]): void {
  const figures = loadFigures(records);
  const admitted = figures.byKind['data'] ?? 0;
  const expected = CAPACITY + (RATE_PER_SECOND * figures.windowMs) / 1000;
  const reachable = expected - unusedRefill(records, CAPACITY, RATE_PER_SECOND).tokens;
  console.log(
    `[flood/${label}] admitted ${admitted} of ${figures.requests} (${kinds(figures)}), expected ${round(expected)}, ` +
      `reachable ${round(reachable)}; latency p50 ${figures.p50Ms} ms p99 ${figures.p99Ms} ms, ${round(figures.requests / (figures.windowMs / 1000), 0)} req/s`,
  );
  expect(Object.keys(figures.byKind).sort()).toEqual(['data', 'limited']);
  expect(admitted).toBeLessThanOrEqual(expected + TOLERANCE_TOKENS);
  // Refill no request was there to take is the only slack below.
  expect(admitted).toBeGreaterThanOrEqual(Math.floor(0.99 * reachable) - TOLERANCE_TOKENS);
}

describe('a flood from one identity', () => {
  it('is answered by the replicas, admits exactly its limit, and leaves other identities their exact limits', async () => {
    const redisUrl = inject('redisUrl');
    admin = new Redis(redisUrl);
    replicas = await startReplicas(REPLICAS, {
      REDIS_URL: redisUrl,
      PREFIX: uniquePrefix('flood'),
      CAPACITY,
      RATE_PER_SECOND,
      ON_STORE_ERROR: 'deny',
    });
    const urls = replicas.map((r) => r.url);
    for (const replica of replicas) expect(await burst([replica.url], `warm-up-${replica.pid}`, 3)).toEqual(exactBurst(3, 0));

    const before = await scriptCalls(admin);
    const common = { targets: urls, durationMs: DURATION_MS, maxRequests: 2_000_000, requestTimeoutMs: 10_000, query: BOOK_QUERY };
    const flood = startLoad({ ...common, concurrency: FLOOD_CONCURRENCY_PER_REPLICA, headers: { 'x-user-id': `flooder-${process.pid}` } });
    const steady = startLoad({ ...common, concurrency: 1, headers: { 'x-user-id': `steady-${process.pid}` } });
    await Promise.all([flood.started, steady.started]);
    // Fresh identities meanwhile: each gets exactly 4 searches (5 tokens of 20, refilling one per 3 s).
    const bursts: string[][] = [];
    for (let i = 0; i < 10; i++) bursts.push(await burst(urls, `searcher-${process.pid}-${i}`, SEARCHES_PER_BURST + 2, ONE_SEARCH));
    const [floodRecords, steadyRecords] = await Promise.all([flood.records, steady.records]);
    const storeCalls = (await scriptCalls(admin)) - before;

    for (const kinds of bursts) expect(kinds).toEqual(EXACT_SEARCH_BURST);
    expectExact('flooder', floodRecords);
    expectExact('steady', steadyRecords);

    const floodDenied = floodRecords.filter((r) => r[4] === 'limited').length;
    const requests = floodRecords.length + steadyRecords.length + bursts.flat().length;
    console.log(`[flood] ${storeCalls} store calls for ${requests} requests, ${floodDenied} of them the flood's denials (${round((100 * storeCalls) / requests, 2)}%)`);
    // Without the deny cache every request is a store call; with it, a flood
    // costs about one per replica per wait (200 ms) plus its admissions.
    expect(floodDenied).toBeGreaterThan(10 * (floodRecords.length - floodDenied));
    expect(storeCalls).toBeLessThan(0.1 * requests);
    for (const replica of replicas) {
      expect(replica.alive()).toBe(true);
      expect(replica.markers).toEqual([]);
    }
  });
});
