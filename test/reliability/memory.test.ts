// 100,000 identities each make one request with a fast refill. A bucket
// costs memory only while it is not full: every Redis key carries an expiry,
// there is at most one per (identity, bucket), and once the buckets are full
// again nothing is left, in Redis or in a MemoryStore.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryStore, Rate, RedisStore, TokenBucket } from '../../src/index.js';
import { startRedisServer } from '../support/redis-server.js';
import type { RedisServerProcess } from '../support/redis-server.js';
import { round } from './support/figures.js';

const IDENTITIES = 100_000;
const CAPACITY = 5;
/** One token back per LIFETIME_MS: a bucket one request below full is full again, and its key gone, after that long. */
const LIFETIME_MS = 2_000;
const bucket = new TokenBucket('memory', CAPACITY, new Rate(1, LIFETIME_MS));
const identity = (i: number): string => `user-${i}`;

let server: RedisServerProcess | undefined;
let client: Redis | undefined;

beforeAll(async () => {
  // A Redis of its own: DBSIZE must count only this test's keys.
  server = await startRedisServer();
  client = new Redis(server.url, { enableAutoPipelining: true, maxRetriesPerRequest: 1 });
});

afterAll(async () => {
  client?.disconnect();
  await server?.stop();
});

async function usedMemory(redis: Redis): Promise<number> {
  return Number(/used_memory:(\d+)/.exec(await redis.info('memory'))?.[1]);
}

describe('memory stays bounded', () => {
  it(`RedisStore: ${IDENTITIES} identities leave ≤ 1 key each, every key expiring, none once full again`, async () => {
    const redis = client!;
    const store = new RedisStore(redis, { prefix: 'mem:' });
    const memoryBefore = await usedMemory(redis);

    const started = performance.now();
    const CHUNK = 2_000; // requests in flight; auto-pipelining sends each chunk in a few round trips
    let admitted = 0;
    // Right after each chunk, every key it wrote must carry an expiry of at most LIFETIME_MS.
    let checked = 0;
    let withoutTtl = 0;
    let maxTtl = -Infinity;
    for (let from = 0; from < IDENTITIES; from += CHUNK) {
      const ids = Array.from({ length: Math.min(CHUNK, IDENTITIES - from) }, (_, j) => identity(from + j));
      const results = await Promise.all(ids.map((id) => store.acquire(bucket, id)));
      admitted += results.filter((r) => r.allowed && r.remaining === CAPACITY - 1).length;
      const ttls = await Promise.all(ids.map((id) => redis.pttl(store.keyFor(bucket, id))));
      for (const ttl of ttls) {
        if (ttl === -2) continue; // already expired and gone: fine
        checked += 1;
        if (ttl === -1) withoutTtl += 1;
        maxTtl = Math.max(maxTtl, ttl);
      }
    }
    const writtenAt = performance.now();
    const writeMs = writtenAt - started;
    const keysAfterWrite = await redis.dbsize();
    const memoryAfter = await usedMemory(redis);

    // Whatever is still there is one of ours: nothing but one key per (identity, bucket).
    const expected = new Set<string>();
    for (let i = 0; i < IDENTITIES; i++) expected.add(store.keyFor(bucket, identity(i)));
    const seen = new Set<string>();
    let foreign = 0;
    let cursor = '0';
    let rounds = 0;
    do {
      const [next, keys] = await redis.scan(cursor, 'COUNT', 5_000);
      cursor = next;
      for (const key of keys) {
        seen.add(key); // SCAN may return a key twice
        if (!expected.has(key)) foreign += 1;
      }
      rounds += 1;
    } while (cursor !== '0' && rounds < 10_000);
    const scannedMs = performance.now() - writtenAt;

    // Once full again, nothing is left: poll DBSIZE, which counts a key until Redis reclaims it.
    const deadline = Date.now() + LIFETIME_MS + 15_000;
    let left = await redis.dbsize();
    while (left > 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      left = await redis.dbsize();
    }
    const emptyAfterMs = performance.now() - writtenAt;
    const memoryEnd = await usedMemory(redis);

    console.log(
      `[memory/redis] ${IDENTITIES} acquires in ${round(writeMs, 0)} ms (${round(IDENTITIES / (writeMs / 1000), 0)}/s), ${admitted} admitted with ${CAPACITY - 1} left; ` +
        `PTTL of ${checked} keys right after their write: ${withoutTtl} without TTL, longest ${maxTtl} ms ≤ ${LIFETIME_MS}; ` +
        `DBSIZE ${keysAfterWrite} after the last write; SCAN found ${seen.size} keys in ${round(scannedMs, 0)} ms, ${foreign} not ours; ` +
        `DBSIZE 0 reached ${left === 0 ? `${round(emptyAfterMs, 0)} ms after the last write` : 'NEVER'} (lifetime ${LIFETIME_MS} ms); ` +
        `used_memory ${round(memoryBefore / 2 ** 20, 2)} → ${round(memoryAfter / 2 ** 20, 2)} → ${round(memoryEnd / 2 ** 20, 2)} MiB`,
    );

    expect(admitted).toBe(IDENTITIES);
    expect(keysAfterWrite).toBeLessThanOrEqual(IDENTITIES);
    expect(checked).toBeGreaterThan(0.9 * IDENTITIES);
    expect(withoutTtl).toBe(0);
    expect(foreign).toBe(0);
    expect(maxTtl).toBeLessThanOrEqual(LIFETIME_MS);
    expect(left).toBe(0);
  });

  it(`MemoryStore: ${IDENTITIES} identities, size back to 0 once the buckets are full again`, async () => {
    let clock = 1_000_000;
    const store = new MemoryStore({ now: () => clock });
    const started = performance.now();
    for (let i = 0; i < IDENTITIES; i++) {
      const result = await store.acquire(bucket, identity(i));
      if (!result.allowed) throw new Error(`identity ${i} was denied`);
    }
    const writeMs = performance.now() - started;
    const sizeAfter = store.size;
    clock += LIFETIME_MS - 1;
    const sizeJustBefore = store.size;
    clock += 1;
    const sizeAtLifetime = store.size;

    // The real clock: nothing to inject, just wait for the buckets to be full again.
    const real = new MemoryStore({ sweepIntervalMs: 50 });
    const short = new TokenBucket('memory-short', CAPACITY, new Rate(1, 200));
    for (let i = 0; i < IDENTITIES; i++) await real.acquire(short, identity(i));
    const filledAt = performance.now();
    const realSizeAfter = real.size;
    const deadline = Date.now() + 5_000;
    while (real.size > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    const sweptMs = performance.now() - filledAt;
    const realSizeEnd = real.size;
    await real.close();
    await store.close();

    console.log(
      `[memory/memorystore] ${IDENTITIES} acquires in ${round(writeMs, 0)} ms; size ${sizeAfter} after, ${sizeJustBefore} 1 ms before the lifetime, ${sizeAtLifetime} at it (injected clock); ` +
        `real clock, 200 ms lifetime: size ${realSizeAfter} right after the last acquire → ${realSizeEnd} ${round(sweptMs, 0)} ms later`,
    );
    expect(sizeAfter).toBe(IDENTITIES);
    expect(sizeJustBefore).toBe(IDENTITIES);
    expect(sizeAtLifetime).toBe(0);
    expect(realSizeEnd).toBe(0);
  });
});
