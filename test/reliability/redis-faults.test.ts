// Redis crashes (SIGKILL, restarted empty: data and script cache gone) and
// hangs (SIGSTOP) under load. Two replicas share it: one with
// onStoreError 'allow', one with 'deny'. Every request must be answered
// within storeTimeoutMs plus a little, the way its policy says, no process
// may crash or leave a rejection unhandled, and limiting must be back within
// a second of Redis.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisStore } from '../../src/index.js';
import { LuaScript } from '../../src/stores/lua-script.js';
import { buckets } from '../../examples/app.js';
import { startRedisServer } from '../support/redis-server.js';
import type { RedisServerProcess } from '../support/redis-server.js';
import { uniquePrefix } from '../support/clients.js';
import { BOOK_QUERY, EXACT_SEARCH_BURST, SEARCH_QUERY, burst, exactBurst, searchBurst } from './support/burst.js';
import { kinds, loadFigures, round, slowest } from './support/figures.js';
import { now } from './support/http.js';
import { STORE_FAILED, startLoad, startReplicas, stopAll } from './support/processes.js';
import type { Replica } from './support/processes.js';

const CAPACITY = 20;
const RATE_PER_SECOND = 10;
const STORE_TIMEOUT_MS = 250;
/** Server work and scheduling on a busy 2-core machine, on top of the store timeout. */
const TOLERANCE_MS = 400;
const BOUND_MS = STORE_TIMEOUT_MS + TOLERANCE_MS;
const CONCURRENCY = 3;
const ALLOW = 0;
const DENY = 1;

let redis: RedisServerProcess | undefined;
let replicas: Replica[] = [];
const PREFIX = uniquePrefix('faults');

beforeAll(async () => {
  redis = await startRedisServer();
  const common = { REDIS_URL: redis.url, PREFIX, CAPACITY, RATE_PER_SECOND, STORE_TIMEOUT_MS };
  const [allow, deny] = await Promise.all([
    startReplicas(1, { ...common, ON_STORE_ERROR: 'allow' }),
    startReplicas(1, { ...common, ON_STORE_ERROR: 'deny' }),
  ]);
  replicas = [allow[0]!, deny[0]!];
  for (const replica of replicas) expect(await burst([replica.url], `warm-up-${replica.pid}`, 3)).toEqual(exactBurst(3, 0));
});

afterAll(async () => {
  await stopAll(replicas);
  await redis?.stop();
});

interface Fault {
  name: string;
  /** Breaks Redis; resolves once it is broken. */
  break(server: RedisServerProcess): Promise<void>;
  /** Repairs Redis; resolves once it answers PING. */
  repair(server: RedisServerProcess): Promise<void>;
}

const BEFORE_MS = 1_500;
const BROKEN_MS = 3_000;
const AFTER_MS = 2_500;

async function underFault(fault: Fault): Promise<void> {
  const server = redis!;
  const urls = replicas.map((r) => r.url);
  const failuresBefore = replicas.map((r) => r.count(STORE_FAILED));
  const load = startLoad({
    targets: urls,
    concurrency: CONCURRENCY,
    durationMs: BEFORE_MS + BROKEN_MS + AFTER_MS + 1_000,
    maxRequests: 200_000,
    requestTimeoutMs: 10_000,
    query: BOOK_QUERY,
    headers: { 'x-user-id': `${fault.name}-load` },
  });
  await load.started;
  await sleep(BEFORE_MS);
  await fault.break(server);
  const brokenAt = now();
  // Two searches (5 "search" tokens each) answered 503 by the 'deny' replica while Redis is broken:
  // does anything of them reach the bucket later?
  const probe = `${fault.name}-probe`;
  const probed = await burst([urls[DENY]!], probe, 2, SEARCH_QUERY);
  await sleep(Math.max(0, BROKEN_MS - (now() - brokenAt)));
  const repairFrom = now();
  await fault.repair(server);
  const backAt = now();
  const records = await load.records;
  const client = new Redis(server.url, { maxRetriesPerRequest: 0 });
  let probeLeft: number;
  try {
    const left = await new RedisStore(client, { prefix: PREFIX }).acquire(buckets.search, probe, 0);
    probeLeft = left.allowed ? left.remaining : -1;
  } finally {
    client.disconnect();
  }

  const all = loadFigures(records);
  const summary = replicas.map((replica, target) => {
    const mine = records.filter((r) => r[0] === target);
    const whileBroken = mine.filter((r) => r[1] >= brokenAt && r[2] <= repairFrom);
    const firstLimited = mine.find((r) => r[2] >= backAt && r[4] === 'limited' && r[1] >= backAt);
    return {
      replica,
      figures: loadFigures(mine),
      whileBroken: loadFigures(whileBroken),
      backInMs: firstLimited === undefined ? Infinity : round(firstLimited[2] - backAt),
      slowWhileBroken: slowest(mine, brokenAt, repairFrom).maxMs,
    };
  });
  console.log(
    `[faults/${fault.name}] 2 searches answered ${probed.join(', ')} while Redis was broken; ` +
      `their bucket holds ${probeLeft} of ${buckets.search.capacity} tokens afterwards ` +
      `(${probeLeft <= buckets.search.capacity - 5 ? 'their timed-out acquires still ran once Redis continued' : 'nothing of them reached Redis'})`,
  );
  for (const [i, s] of summary.entries()) {
    console.log(
      `[faults/${fault.name}/${i === ALLOW ? 'allow' : 'deny'}] ${s.figures.requests} requests (${kinds(s.figures)}); ` +
        `while Redis was ${fault.name === 'kill' ? 'down' : 'stopped'} ${round((repairFrom - brokenAt) / 1000, 2)} s: ` +
        `${s.whileBroken.requests} requests (${kinds(s.whileBroken)}), slowest ${s.slowWhileBroken} ms; ` +
        `worst latency overall ${s.figures.maxMs} ms (bound ${BOUND_MS} ms), p99 ${s.figures.p99Ms} ms; ` +
        `first 429 ${s.backInMs} ms after Redis answered PING again (repair took ${round(backAt - repairFrom)} ms); ` +
        `"store failed" log lines ${s.replica.count(STORE_FAILED) - failuresBefore[i]!}`,
    );
  }

  // Every request answered, within the bound.
  expect(all.byKind).not.toHaveProperty('other');
  expect(Object.keys(all.byKind).filter((k) => k.startsWith('error'))).toEqual([]);
  expect(all.maxMs).toBeLessThanOrEqual(BOUND_MS);
  // While Redis was broken: 'allow' serves data, 'deny' answers 503.
  const allow = summary[ALLOW]!;
  const deny = summary[DENY]!;
  expect(probed).toEqual(['unavailable', 'unavailable']);
  expect(allow.whileBroken.requests).toBeGreaterThan(10);
  expect(deny.whileBroken.requests).toBeGreaterThan(10);
  // A 429 while Redis is broken can only come from the replica's deny cache: a
  // denial the store gave before the fault, whose wait has not passed.
  const { data: served = 0, limited: cachedAllow = 0, ...otherAllow } = allow.whileBroken.byKind;
  expect(otherAllow).toEqual({});
  expect(served).toBeGreaterThan(allow.whileBroken.requests / 2);
  expect(cachedAllow + served).toBe(allow.whileBroken.requests);
  const { unavailable = 0, limited: cachedDeny = 0, ...otherDeny } = deny.whileBroken.byKind;
  expect(otherDeny).toEqual({});
  expect(unavailable).toBeGreaterThan(deny.whileBroken.requests / 2);
  expect(cachedDeny + unavailable).toBe(deny.whileBroken.requests);
  expect(Object.keys(allow.figures.byKind).sort()).toEqual(['data', 'limited']);
  expect(Object.keys(deny.figures.byKind).sort()).toEqual(['data', 'limited', 'unavailable']);
  // Limiting is back within a second of Redis.
  for (const s of summary) expect(s.backInMs).toBeLessThanOrEqual(1_000);
  // Nobody crashed or left a rejection unhandled, and a fresh identity gets exactly its burst.
  for (const replica of replicas) {
    expect(replica.alive()).toBe(true);
    expect(replica.markers).toEqual([]);
  }
  expect(await searchBurst(urls, `${fault.name}-fresh`)).toEqual(EXACT_SEARCH_BURST);
}

describe('Redis faults under load', () => {
  it('Redis killed and restarted empty: answered per onStoreError within the bound, limiting again within 1 s', async () => {
    await underFault({
      name: 'kill',
      break: (server) => server.kill(),
      repair: (server) => server.restart(),
    });
    // The restarted Redis had no scripts; the store loaded its own again.
    const client = new Redis(redis!.url, { maxRetriesPerRequest: 0 });
    try {
      const [loaded] = (await client.script('EXISTS', new LuaScript('acquire.lua').sha)) as number[];
      expect(loaded).toBe(1);
    } finally {
      client.disconnect();
    }
  });

  it('Redis stopped (SIGSTOP) and continued: answered per onStoreError within the bound, normal again within 1 s', async () => {
    await underFault({
      name: 'stop',
      break: (server) => server.pause(),
      repair: (server) => server.resume(),
    });
  });
});

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
