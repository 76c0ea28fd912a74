import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Cluster, Redis } from 'ioredis';
// The newest rate-limiter-flexible (the one graphql-rate-limit-directive accepts is older).
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible-latest';
import { Rate } from '../src/rate.js';
import { RedisStore } from '../src/stores/redis-store.js';
import { TokenBucket } from '../src/token-bucket.js';
import { startRedisCluster } from '../test/support/redis-server.js';
import type { Benchmark, BenchReport, TargetCheck } from './benchmark.js';
import { formatTable } from './benchmark.js';

/*
 * RedisStore.acquire against rate-limiter-flexible's RateLimiterRedis, both on
 * the same Redis in the same run: throughput, Redis CPU per acquire and bytes
 * per stored key. The peer is a fixed window of `capacity` points per
 * `capacity / rate` seconds: the same burst and the same long-run rate.
 *
 * Then the same throughput and Redis CPU figures per GraphQL-like operation
 * that takes one token from each of three buckets of one identity: ours in
 * one `acquireAll` script call, theirs with one `consume` per bucket.
 */

export interface StoreBenchOptions {
  /** Acquires in flight at once, per contender (besides the one-in-flight phase). Default 256. */
  concurrency: number;
  /** Distinct identities the throughput and CPU phases cycle through. Default 20,000. */
  identities: number;
  /** Seconds of one timed throughput run. Default 1.5. */
  seconds: number;
  /** Seconds of untimed warm-up per contender. Default 0.5. */
  warmupSeconds: number;
  /**
   * Throughput rounds, each running ours then theirs. Default 5: many short
   * interleaved runs share out a busy machine's noise more evenly than a few long ones.
   */
  rounds: number;
  /** Redis CPU rounds, each running ours then theirs. Default 3. */
  cpuRounds: number;
  /** Acquires per Redis CPU measurement. Default 20,000. */
  cpuCalls: number;
  /** Identities written (one acquire each) for the average bytes per key. Default 10,000. */
  memoryKeys: number;
}

export const DEFAULT_STORE_BENCH_OPTIONS: Readonly<StoreBenchOptions> = {
  concurrency: 256,
  identities: 20_000,
  seconds: 1.5,
  warmupSeconds: 0.5,
  rounds: 5,
  cpuRounds: 3,
  cpuCalls: 20_000,
  memoryKeys: 10_000,
};

export const OURS = 'graphql-token-bucket';
export const THEIRS = 'rate-limiter-flexible';

/** Ten characters, as the issue's "bytes per key" target assumes. */
export const SAMPLE_IDENTITY = 'user-12345';
/** Six characters; also the peer's keyPrefix, so both keys name the bucket. */
export const BUCKET_NAME = 'search';
/**
 * The buckets of one operation in the multi-bucket phase, all six characters
 * like BUCKET_NAME, each with the load bucket's capacity and rate; the peer
 * gets one RateLimiterRedis per name (its keyPrefix).
 */
export const OPERATION_BUCKET_NAMES = ['search', 'mutate', 'global'] as const;

/** Throughput and CPU: 10,000 µs per token (an integer interval), burst 1000. */
const loadBucket = (): TokenBucket => new TokenBucket(BUCKET_NAME, 1000, Rate.perSecond(100));
/**
 * Memory: also an integer interval, but 36 s per token, so every key outlives
 * the measurement (at 100/s a key taken once is full again, and gone, in 10 ms).
 */
const memoryBucket = (): TokenBucket => new TokenBucket(BUCKET_NAME, 1000, Rate.perHour(100));
/** 33,333,333.33… µs per token: the stored time is a 17-digit float string. */
const fractionalBucket = (): TokenBucket => new TokenBucket(BUCKET_NAME, 1000, new Rate(3, 100_000));
/** The multi-bucket phase: the load bucket's capacity and rate under each of OPERATION_BUCKET_NAMES. */
const operationBuckets = (): TokenBucket[] =>
  OPERATION_BUCKET_NAMES.map((name) => new TokenBucket(name, 1000, Rate.perSecond(100)));

export interface ThroughputFigures {
  /** Acquires per second of each timed run, in run order. */
  runs: number[];
  best: number;
  median: number;
  /** Share of the timed acquires that were admitted (should be ~1). */
  admittedShare: number;
  /** CPU of this Node process (user + sys) per acquire, lowest run: the client's share of the work. */
  clientUsecPerAcquire: number;
}

export interface RedisCpuFigures {
  /** `INFO commandstats` time of the commands the limiter issued, per acquire (lowest round). */
  usecPerAcquire: number;
  /** commandstats time per call of the commands summed into usecPerAcquire (a shared script call counts once). */
  usecPerCall: number;
  /** Of usecPerAcquire, the time of the commands run inside the script (the rest is Lua and script setup). */
  nestedUsecPerAcquire: number;
  /** Redis process CPU (`INFO cpu`, user + sys) per acquire (lowest round): adds parsing, I/O and expiry. */
  processUsecPerAcquire: number;
  /** The commands summed into usecPerAcquire (a script's usec already includes what it runs). */
  issued: string[];
  /** Calls per acquire of every command Redis counted, commands run inside scripts included. */
  callsPerAcquire: Record<string, number>;
  rounds: CpuSample[];
}

export interface CpuSample {
  usecPerAcquire: number;
  usecPerCall: number;
  nestedUsecPerAcquire: number;
  processUsecPerAcquire: number;
}

export interface KeyMemoryFigures {
  /** The Redis key of SAMPLE_IDENTITY's bucket. */
  key: string;
  /** What the key holds after one acquire. */
  value: string | null;
  encoding: string | null;
  /** `MEMORY USAGE key`: key, value and main-dictionary entry. */
  memoryUsage: number | null;
  /**
   * `used_memory` growth (client buffers excluded) / keys, after one acquire for
   * each of `keys` identities: adds the expiry entry, hash-table slots and allocator rounding.
   */
  averageBytes: number;
  keys: number;
}

export interface ContenderFigures {
  name: string;
  throughput: ThroughputFigures;
  redisCpu: RedisCpuFigures;
  memory: KeyMemoryFigures;
}

/**
 * The multi-bucket phase. Its `ThroughputFigures` and `RedisCpuFigures` count
 * operations where the single-acquire ones count acquires: `runs`, `best` and
 * `median` are operations/s, every `…PerAcquire` is per operation.
 */
export interface MultiBucketFigures {
  /** Buckets taken per operation, all of one identity (OPERATION_BUCKET_NAMES). */
  bucketsPerOperation: number;
  buckets: string[];
  setup: { ours: string; theirs: string };
  ours: { name: string; throughput: ThroughputFigures; redisCpu: RedisCpuFigures };
  theirs: { name: string; throughput: ThroughputFigures; redisCpu: RedisCpuFigures };
  /** ours / theirs, per operation: higher is better for throughput, lower for the rest. */
  ratios: {
    throughput: number;
    throughputMedian: number;
    clientCpu: number;
    redisCpu: number;
    processCpu: number;
  };
}

export interface StoreBenchFigures {
  redisVersion: string;
  /** Installed versions, since the peer's speed differs a lot between its majors. */
  versions: { node: string; ioredis: string; rateLimiterFlexible: string };
  options: StoreBenchOptions;
  /** How each contender was configured, for the record. */
  setup: { ours: string; theirs: string; memory: string; fractional: string };
  ours: ContenderFigures;
  theirs: ContenderFigures;
  /** The rate of the fractional-interval case. */
  fractionalRate: string;
  /** Our key when the interval per token is fractional (same identity and bucket name). */
  oursFractional: KeyMemoryFigures;
  /** Single acquire: ours / theirs, higher is better for throughput, lower for the rest. */
  ratios: {
    /** Best run over best run. */
    throughput: number;
    /** Median run over median run. */
    throughputMedian: number;
    clientCpu: number;
    redisCpu: number;
    processCpu: number;
    memoryUsage: number | null;
    averageBytes: number;
  };
  /** Three buckets of one identity per operation: one acquireAll vs three consume calls. */
  multiBucket: MultiBucketFigures;
  /**
   * The design's floor: a script that only reads Redis TIME and the keys and
   * writes each key with its expiry (SET … PXAT, one number formatted), as
   * ours must, deciding nothing. Redis CPU per call, measured in the same
   * interleaved rounds; `ratios` are floor / theirs.
   */
  floor: { single: RedisCpuFigures; multi: RedisCpuFigures; alone: RedisCpuFigures; ratios: { single: number; multi: number; alone: number } };
  /** Single acquire with one in flight (nothing to share a call with). */
  alone: PhaseFigures;
  /** Single acquire, `concurrency` in flight, on a 3-master Cluster of the bench's own (calls shared per master on Redis 7). */
  cluster: PhaseFigures;
}

/** One phase, both contenders; ratios ours / theirs (higher is better for throughput, lower for the rest). */
export interface PhaseFigures {
  ours: { throughput: ThroughputFigures; redisCpu: RedisCpuFigures };
  theirs: { throughput: ThroughputFigures; redisCpu: RedisCpuFigures };
  ratios: { throughput: number; throughputMedian: number; redisCpu: number; processCpu: number };
}

/** The single-acquire load on a 3-master Cluster started for the purpose; Redis CPU summed over the masters. */
async function measureOnCluster(bucket: TokenBucket, ids: readonly string[], options: StoreBenchOptions): Promise<LoadFigures> {
  const cluster = await startRedisCluster({ masters: 3 });
  const masters = cluster.nodes.slice(0, 3);
  const admins = masters.map(({ host, port }) => new Redis(port, host));
  const ours = new Cluster(masters);
  const theirs = new Cluster(masters);
  try {
    await Promise.all([ours.ping(), theirs.ping()]);
    return await measureLoad(admins, [ourContender(ours, bucket), peerContender(theirs, bucket)], ids, options);
  } finally {
    for (const client of [...admins, ours, theirs]) client.disconnect();
    await cluster.stop();
  }
}

/**
 * One limiter under test. `acquire` takes whatever one operation needs for an
 * identity, resolves to admitted or limited and rejects only on errors.
 */
interface Limiter {
  readonly name: string;
  acquire(identity: string): Promise<boolean>;
}

/** A single-bucket limiter, whose key can be inspected. */
interface Contender extends Limiter {
  keyFor(identity: string): string;
}

function ourContender(client: Redis | Cluster, bucket: TokenBucket): Contender {
  const store = new RedisStore(client);
  return {
    name: OURS,
    acquire: async (identity) => (await store.acquire(bucket, identity)).allowed,
    keyFor: (identity) => store.keyFor(bucket, identity),
  };
}

/** Same burst, same long-run rate: `capacity` points per `capacity / rate` seconds. */
function peerDurationSeconds(bucket: TokenBucket): number {
  const seconds = (bucket.capacity * bucket.rate.periodUs) / bucket.rate.tokens / 1e6;
  return Math.max(1, Math.round(seconds));
}

function peerLimiter(client: Redis | Cluster, bucket: TokenBucket): RateLimiterRedis {
  return new RateLimiterRedis({
    storeClient: client,
    useRedisPackage: false,
    keyPrefix: bucket.name,
    points: bucket.capacity,
    duration: peerDurationSeconds(bucket),
  });
}

/** `consume(identity, 1)` as admitted (true) or limited (false). */
function peerConsume(limiter: RateLimiterRedis, identity: string): Promise<boolean> {
  return limiter.consume(identity, 1).then(
    () => true,
    (rejection: unknown) => {
      // It rejects with a RateLimiterRes when limited, an Error when Redis fails.
      if (rejection instanceof RateLimiterRes) return false;
      throw rejection;
    },
  );
}

function peerContender(client: Redis | Cluster, bucket: TokenBucket): Contender {
  const limiter = peerLimiter(client, bucket);
  return {
    name: THEIRS,
    acquire: (identity) => peerConsume(limiter, identity),
    keyFor: (identity) => limiter.getKey(identity),
  };
}

/** One operation: every bucket of one identity, all or nothing, in one script call (what the plugin does). */
function ourOperation(client: Redis, buckets: readonly TokenBucket[]): Limiter {
  const store = new RedisStore(client);
  return {
    name: OURS,
    acquire: async (identity) => (await store.acquireAll(buckets.map((bucket) => ({ bucket, key: identity, cost: 1 })))).allowed,
  };
}

/**
 * One operation with the peer: a limiter per bucket, consumed concurrently
 * (a user wanting low latency would; it also lets ioredis pipeline the three
 * calls). The operation is admitted when every consume is. Nothing is
 * refunded when only some are: the peer has no all-or-nothing form.
 */
function peerOperation(client: Redis, buckets: readonly TokenBucket[]): Limiter {
  const limiters = buckets.map((bucket) => peerLimiter(client, bucket));
  return {
    name: THEIRS,
    acquire: async (identity) => (await Promise.all(limiters.map((l) => peerConsume(l, identity)))).every(Boolean),
  };
}

/**
 * The least this design can cost Redis per call: read the clock and the
 * keys, write each key with its expiry (one number formatted per key, the
 * expiry cut from it, as lua/acquire.lua does), reply. Nothing is decided:
 * what lua/acquire.lua spends above this is its arithmetic and checks.
 */
const FLOOR_SCRIPT = `local clock = redis.call('TIME')
local now = clock[1] * 1000000 + clock[2]
local values = redis.call('MGET', unpack(KEYS))
local out = {1}
for i = 1, #KEYS do
  local value = string.format('%d', now + 10000 * i)
  redis.call('SET', KEYS[i], value, 'PXAT', string.sub(value, 1, -4))
  out[1 + i] = 999
  out[1 + #KEYS + i] = now + 10000 * i
end
return out`;
const FLOOR_SINGLE_SCRIPT = `local clock = redis.call('TIME')
local now = clock[1] * 1000000 + clock[2]
local value = redis.call('GET', KEYS[1])
value = string.format('%d', now + 10000)
redis.call('SET', KEYS[1], value, 'PXAT', string.sub(value, 1, -4))
return {1, 999, now + 10000}`;

/**
 * The floor script, on the same keys our store would write, with the same
 * arguments (capacity, period, cost per bucket; the rates here are whole µs
 * per token): a script cannot know a bucket otherwise.
 */
async function floorLimiter(client: Redis, buckets: readonly TokenBucket[]): Promise<Limiter> {
  const store = new RedisStore(client);
  const sha = (await client.script('LOAD', buckets.length === 1 ? FLOOR_SINGLE_SCRIPT : FLOOR_SCRIPT)) as string;
  const args = buckets.flatMap((b) => [b.capacity, b.rate.periodUs / b.rate.tokens, 1]);
  return {
    name: 'design floor',
    acquire: async (identity) => {
      await client.evalsha(sha, buckets.length, ...buckets.map((bucket) => store.keyFor(bucket, identity)), ...args);
      return true;
    },
  };
}

function describePeer(bucket: TokenBucket): string {
  return `RateLimiterRedis { points: ${bucket.capacity}, duration: ${peerDurationSeconds(bucket)} s, keyPrefix: '${bucket.name}', useRedisPackage: false }, consume(key, 1)`;
}

function describeOurs(bucket: TokenBucket): string {
  return `RedisStore (prefix 'tb:'), TokenBucket('${bucket.name}', ${bucket.capacity}, ${bucket.rate.toString()}), acquire(bucket, key)`;
}

function describeOurOperation(buckets: readonly TokenBucket[]): string {
  const first = buckets[0];
  const shape = first ? `, ${first.capacity}, ${first.rate.toString()}` : '';
  return (
    `RedisStore (prefix 'tb:'), TokenBucket(${buckets.map((b) => `'${b.name}'`).join(' | ')}${shape}), ` +
    `acquireAll([${buckets.map((b) => `{ ${b.name}, key, 1 }`).join(', ')}]): one EVALSHA`
  );
}

function describePeerOperation(buckets: readonly TokenBucket[]): string {
  const first = buckets[0];
  const shape = first ? `points: ${first.capacity}, duration: ${peerDurationSeconds(first)} s, ` : '';
  return (
    `${buckets.length} × RateLimiterRedis { ${shape}keyPrefix: ${buckets.map((b) => `'${b.name}'`).join(' | ')}, ` +
    `useRedisPackage: false }, Promise.all of consume(key, 1) on each`
  );
}

function identities(count: number): string[] {
  return Array.from({ length: count }, (_, i) => `user-${String(i).padStart(5, '0')}`);
}

interface DriveResult {
  calls: number;
  admitted: number;
  seconds: number;
  /** CPU time of this process, user + sys. */
  cpuUsec: number;
}

/** Keeps `concurrency` acquires in flight, cycling through identities, until the time or call budget runs out. */
async function drive(
  contender: Limiter,
  ids: readonly string[],
  concurrency: number,
  budget: { seconds: number } | { calls: number },
): Promise<DriveResult> {
  const cpuStart = process.cpuUsage();
  const start = performance.now();
  const deadline = 'seconds' in budget ? start + budget.seconds * 1000 : Infinity;
  const maxCalls = 'calls' in budget ? budget.calls : Infinity;
  let started = 0;
  let admitted = 0;
  const worker = async (): Promise<void> => {
    while (started < maxCalls && performance.now() < deadline) {
      const identity = ids[started % ids.length] ?? '';
      started++;
      if (await contender.acquire(identity)) admitted++;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const seconds = (performance.now() - start) / 1000;
  const cpu = process.cpuUsage(cpuStart);
  return { calls: started, admitted, seconds, cpuUsec: cpu.user + cpu.system };
}

function infoField(info: string, field: string): number {
  const match = new RegExp(`^${field}:([0-9.]+)`, 'm').exec(info);
  if (!match?.[1]) throw new Error(`INFO has no ${field}`);
  return Number(match[1]);
}

interface CommandStat {
  calls: number;
  usec: number;
}

function parseCommandStats(info: string): Map<string, CommandStat> {
  const stats = new Map<string, CommandStat>();
  for (const line of info.split(/\r?\n/)) {
    const match = /^cmdstat_([^:]+):(.*)$/.exec(line);
    if (!match?.[1] || match[2] === undefined) continue;
    const fields = new Map(match[2].split(',').map((kv) => kv.split('=') as [string, string]));
    stats.set(match[1], { calls: Number(fields.get('calls') ?? 0), usec: Number(fields.get('usec') ?? 0) });
  }
  return stats;
}

/**
 * Commands whose usec already includes the commands they run (on Redis 7 an
 * EVAL's usec covers its nested SETs, which are also counted on their own).
 */
const WRAPPERS = new Set(['eval', 'evalsha', 'eval_ro', 'evalsha_ro', 'fcall', 'fcall_ro', 'exec', 'multi']);
/** The benchmark's own commands during a CPU measurement. */
const HOUSEKEEPING = new Set(['config|resetstat', 'info']);

/** The Redis, or every master of a Cluster. */
type Admin = Redis | readonly Redis[];
const each = (admin: Admin): readonly Redis[] => (Array.isArray(admin) ? admin : [admin as Redis]);

async function flush(admin: Admin): Promise<void> {
  await Promise.all(each(admin).map((a) => a.flushdb('SYNC')));
}

/** commandstats summed over every node. */
async function commandStats(admin: Admin): Promise<Map<string, CommandStat>> {
  const total = new Map<string, CommandStat>();
  for (const a of each(admin)) {
    for (const [name, stat] of parseCommandStats(await a.info('commandstats'))) {
      const sum = total.get(name) ?? { calls: 0, usec: 0 };
      total.set(name, { calls: sum.calls + stat.calls, usec: sum.usec + stat.usec });
    }
  }
  return total;
}

/** Redis process CPU (user + sys, s) summed over every node. */
async function processCpu(admin: Admin): Promise<number> {
  let sum = 0;
  for (const a of each(admin)) {
    const info = await a.info('cpu');
    sum += infoField(info, 'used_cpu_user') + infoField(info, 'used_cpu_sys');
  }
  return sum;
}

async function measureRedisCpu(
  admin: Admin,
  contender: Limiter,
  ids: readonly string[],
  options: StoreBenchOptions,
): Promise<CpuSample & { issued: string[]; callsPerAcquire: Record<string, number> }> {
  await flush(admin);
  const cpuBefore = await processCpu(admin);
  await Promise.all(each(admin).map((a) => a.call('CONFIG', 'RESETSTAT')));
  const result = await drive(contender, ids, options.concurrency, { calls: options.cpuCalls });
  const stats = await commandStats(admin);
  const cpuAfter = await processCpu(admin);

  const seen = [...stats.keys()].filter((name) => !HOUSEKEEPING.has(name)).sort();
  const wrappers = seen.filter((name) => WRAPPERS.has(name));
  const issued = wrappers.length > 0 ? wrappers : seen;
  const usecOf = (names: readonly string[]): number => names.reduce((sum, name) => sum + (stats.get(name)?.usec ?? 0), 0);
  const nested = wrappers.length > 0 ? seen.filter((name) => !WRAPPERS.has(name)) : [];
  const callsPerAcquire: Record<string, number> = {};
  for (const name of seen) callsPerAcquire[name] = round((stats.get(name)?.calls ?? 0) / result.calls, 3);
  const issuedCalls = issued.reduce((sum, name) => sum + (stats.get(name)?.calls ?? 0), 0);
  return {
    usecPerAcquire: usecOf(issued) / result.calls,
    usecPerCall: issuedCalls === 0 ? 0 : usecOf(issued) / issuedCalls,
    nestedUsecPerAcquire: usecOf(nested) / result.calls,
    processUsecPerAcquire: ((cpuAfter - cpuBefore) * 1e6) / result.calls,
    issued,
    callsPerAcquire,
  };
}

async function measureMemory(
  admin: Redis,
  contender: Contender,
  ids: readonly string[],
  options: StoreBenchOptions,
): Promise<KeyMemoryFigures> {
  await flush(admin);
  await contender.acquire(SAMPLE_IDENTITY);
  const key = contender.keyFor(SAMPLE_IDENTITY);
  const memoryUsage = (await admin.call('MEMORY', 'USAGE', key)) as number | null;
  const value = await admin.get(key);
  const encoding = (await admin.call('OBJECT', 'ENCODING', key)) as string | null;

  await flush(admin);
  const before = await datasetMemory(admin);
  await drive(contender, ids, options.concurrency, { calls: ids.length });
  const after = await datasetMemory(admin);
  const keys = await admin.dbsize();
  if (keys !== ids.length) {
    throw new Error(`${contender.name}: expected ${ids.length} keys for the memory average, found ${keys}`);
  }
  return { key, value, encoding, memoryUsage, averageBytes: (after - before) / keys, keys };
}

/** Time for serverCron to finish an incremental rehash, which briefly keeps the old hash table. */
const SETTLE_MS = 300;

/** `used_memory` without client buffers, once the keyspace's hash tables have settled. */
async function datasetMemory(admin: Redis): Promise<number> {
  await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
  const info = await admin.info('memory');
  return infoField(info, 'used_memory') - infoField(info, 'mem_clients_normal');
}

/** The version of an installed package, read next to its entry point. */
function installedVersion(name: string, manifestName = name): string {
  try {
    const entry = createRequire(import.meta.url).resolve(name);
    for (let dir = dirname(entry); dir !== dirname(dir); dir = dirname(dir)) {
      try {
        const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
        if (manifest.name === manifestName) return manifest.version ?? 'unknown';
      } catch {
        // no package.json at this level
      }
    }
  } catch {
    // not resolvable
  }
  return 'unknown';
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}

function round(value: number, digits: number): number {
  const scale = 10 ** digits;
  return Math.round(value * scale) / scale;
}

interface LoadFigures {
  /** ours, theirs */
  throughput: [ThroughputFigures, ThroughputFigures];
  redisCpu: [RedisCpuFigures, RedisCpuFigures];
  /** The design floor's Redis CPU, measured in the same interleaved rounds (a single Redis only). */
  floorCpu: RedisCpuFigures | undefined;
}

/**
 * Throughput (warm-up, then `rounds` interleaved timed runs) and Redis CPU
 * (`cpuRounds` interleaved rounds, the lowest counts) of two limiters, ours first.
 */
async function measureLoad(
  admin: Admin,
  contenders: readonly [Limiter, Limiter],
  loadIds: readonly string[],
  options: StoreBenchOptions,
  floor?: Limiter,
): Promise<LoadFigures> {
  // Warm-up: load both scripts, JIT both code paths.
  for (const contender of contenders) await drive(contender, loadIds, options.concurrency, { seconds: options.warmupSeconds });

  // Throughput, interleaved A B A B so drift hits both alike.
  const runs: DriveResult[][] = [[], []];
  for (let r = 0; r < options.rounds; r++) {
    for (const [i, contender] of contenders.entries()) {
      await flush(admin);
      runs[i]?.push(await drive(contender, loadIds, options.concurrency, { seconds: options.seconds }));
    }
  }
  const throughput = runs.map((results): ThroughputFigures => {
    const rates = results.map((x) => x.calls / x.seconds);
    const calls = results.reduce((s, x) => s + x.calls, 0);
    const admitted = results.reduce((s, x) => s + x.admitted, 0);
    return {
      runs: rates.map((x) => Math.round(x)),
      best: Math.round(Math.max(...rates)),
      median: Math.round(median(rates)),
      admittedShare: round(admitted / calls, 4),
      clientUsecPerAcquire: round(Math.min(...results.map((x) => x.cpuUsec / x.calls)), 2),
    };
  });

  // Redis CPU per call of `acquire`, interleaved the same way; the lowest round counts.
  const cpuRuns: Awaited<ReturnType<typeof measureRedisCpu>>[][] = [[], [], []];
  if (floor) await drive(floor, loadIds, options.concurrency, { seconds: options.warmupSeconds });
  for (let r = 0; r < options.cpuRounds; r++) {
    for (const [i, contender] of [...contenders, ...(floor ? [floor] : [])].entries()) {
      cpuRuns[i]?.push(await measureRedisCpu(admin, contender, loadIds, options));
    }
  }
  const redisCpu = cpuRuns.filter((samples) => samples.length > 0).map((samples): RedisCpuFigures => {
    const lowest = samples.reduce((a, b) => (b.usecPerAcquire < a.usecPerAcquire ? b : a));
    return {
      usecPerAcquire: round(lowest.usecPerAcquire, 3),
      usecPerCall: round(lowest.usecPerCall, 3),
      nestedUsecPerAcquire: round(lowest.nestedUsecPerAcquire, 3),
      processUsecPerAcquire: round(Math.min(...samples.map((s) => s.processUsecPerAcquire)), 3),
      issued: lowest.issued,
      callsPerAcquire: lowest.callsPerAcquire,
      rounds: samples.map((s) => ({
        usecPerAcquire: round(s.usecPerAcquire, 3),
        usecPerCall: round(s.usecPerCall, 3),
        nestedUsecPerAcquire: round(s.nestedUsecPerAcquire, 3),
        processUsecPerAcquire: round(s.processUsecPerAcquire, 3),
      })),
    };
  });
  return {
    throughput: throughput as [ThroughputFigures, ThroughputFigures],
    redisCpu: redisCpu.slice(0, 2) as [RedisCpuFigures, RedisCpuFigures],
    floorCpu: redisCpu[2],
  };
}

/**
 * Runs the store benchmark against the Redis at `redisUrl`. It flushes the
 * selected database between phases and resets the server's stats, so point
 * it at a scratch Redis. Takes about 4 × rounds × seconds + 15 s.
 */
export async function runStoreBench(redisUrl: string, overrides: Partial<StoreBenchOptions> = {}): Promise<StoreBenchFigures> {
  const options: StoreBenchOptions = { ...DEFAULT_STORE_BENCH_OPTIONS, ...overrides };
  const admin = new Redis(redisUrl);
  // One connection per contender, so neither queues behind the other's replies.
  const ourClient = new Redis(redisUrl);
  const peerClient = new Redis(redisUrl);
  try {
    const redisVersion = String(/^redis_version:(\S+)/m.exec(await admin.info('server'))?.[1] ?? 'unknown');
    const load = loadBucket();
    const loadIds = identities(options.identities);

    // Single acquire, one in flight: nothing to share a call with.
    const aloneOptions = { ...options, concurrency: 1, seconds: Math.min(options.seconds, 1), cpuCalls: Math.min(options.cpuCalls, 5_000) };
    const alone = await measureLoad(admin, [ourContender(ourClient, load), peerContender(peerClient, load)], loadIds, aloneOptions, await floorLimiter(ourClient, [load]));
    // Single acquire, `concurrency` in flight: throughput, then Redis CPU.
    const single = await measureLoad(admin, [ourContender(ourClient, load), peerContender(peerClient, load)], loadIds, options, await floorLimiter(ourClient, [load]));
    const onCluster = await measureOnCluster(load, loadIds, options);
    // Three buckets of one identity per operation, measured the same way.
    const multi = operationBuckets();
    const multiLoad = await measureLoad(
      admin,
      [ourOperation(ourClient, multi), peerOperation(peerClient, multi)],
      loadIds,
      options,
      await floorLimiter(ourClient, multi),
    );

    // Bytes per key: a slow integer interval for both, then our fractional case.
    const memory = memoryBucket();
    const fractional = fractionalBucket();
    const memoryIds = identities(options.memoryKeys);
    const ourMemory = await measureMemory(admin, ourContender(ourClient, memory), memoryIds, options);
    const peerMemory = await measureMemory(admin, peerContender(peerClient, memory), memoryIds, options);
    const fractionalMemory = await measureMemory(admin, ourContender(ourClient, fractional), memoryIds, options);
    await flush(admin);

    const pair = (figures: LoadFigures): PhaseFigures => {
      const [ours, theirs] = figures.throughput;
      const [oursCpu, theirsCpu] = figures.redisCpu;
      return {
        ours: { throughput: ours, redisCpu: oursCpu },
        theirs: { throughput: theirs, redisCpu: theirsCpu },
        ratios: {
          throughput: round(ours.best / theirs.best, 3),
          throughputMedian: round(ours.median / theirs.median, 3),
          redisCpu: round(oursCpu.usecPerAcquire / theirsCpu.usecPerAcquire, 3),
          processCpu: round(oursCpu.processUsecPerAcquire / theirsCpu.processUsecPerAcquire, 3),
        },
      };
    };
    const [ourThroughput, peerThroughput] = single.throughput;
    const [ourCpu, peerCpu] = single.redisCpu;
    const [ourMultiThroughput, peerMultiThroughput] = multiLoad.throughput;
    const [ourMultiCpu, peerMultiCpu] = multiLoad.redisCpu;
    return {
      redisVersion,
      versions: {
        node: process.versions.node,
        ioredis: installedVersion('ioredis'),
        rateLimiterFlexible: installedVersion('rate-limiter-flexible-latest', 'rate-limiter-flexible'),
      },
      options,
      setup: {
        ours: describeOurs(load),
        theirs: describePeer(load),
        memory: `${describeOurs(memory)} vs ${describePeer(memory)}`,
        fractional: describeOurs(fractional),
      },
      ours: { name: OURS, throughput: ourThroughput, redisCpu: ourCpu, memory: ourMemory },
      theirs: { name: THEIRS, throughput: peerThroughput, redisCpu: peerCpu, memory: peerMemory },
      fractionalRate: fractional.rate.toString(),
      oursFractional: fractionalMemory,
      ratios: {
        throughput: round(ourThroughput.best / peerThroughput.best, 3),
        throughputMedian: round(ourThroughput.median / peerThroughput.median, 3),
        clientCpu: round(ourThroughput.clientUsecPerAcquire / peerThroughput.clientUsecPerAcquire, 3),
        redisCpu: round(ourCpu.usecPerAcquire / peerCpu.usecPerAcquire, 3),
        processCpu: round(ourCpu.processUsecPerAcquire / peerCpu.processUsecPerAcquire, 3),
        memoryUsage:
          ourMemory.memoryUsage !== null && peerMemory.memoryUsage !== null
            ? round(ourMemory.memoryUsage / peerMemory.memoryUsage, 3)
            : null,
        averageBytes: round(ourMemory.averageBytes / peerMemory.averageBytes, 3),
      },
      floor: {
        single: single.floorCpu!,
        multi: multiLoad.floorCpu!,
        alone: alone.floorCpu!,
        ratios: {
          single: round(single.floorCpu!.usecPerAcquire / peerCpu.usecPerAcquire, 3),
          multi: round(multiLoad.floorCpu!.usecPerAcquire / peerMultiCpu.usecPerAcquire, 3),
          alone: round(alone.floorCpu!.usecPerAcquire / alone.redisCpu[1].usecPerAcquire, 3),
        },
      },
      alone: pair(alone),
      cluster: pair(onCluster),
      multiBucket: {
        bucketsPerOperation: multi.length,
        buckets: multi.map((b) => b.name),
        setup: { ours: describeOurOperation(multi), theirs: describePeerOperation(multi) },
        ours: { name: OURS, throughput: ourMultiThroughput, redisCpu: ourMultiCpu },
        theirs: { name: THEIRS, throughput: peerMultiThroughput, redisCpu: peerMultiCpu },
        ratios: {
          throughput: round(ourMultiThroughput.best / peerMultiThroughput.best, 3),
          throughputMedian: round(ourMultiThroughput.median / peerMultiThroughput.median, 3),
          clientCpu: round(ourMultiThroughput.clientUsecPerAcquire / peerMultiThroughput.clientUsecPerAcquire, 3),
          redisCpu: round(ourMultiCpu.usecPerAcquire / peerMultiCpu.usecPerAcquire, 3),
          processCpu: round(ourMultiCpu.processUsecPerAcquire / peerMultiCpu.processUsecPerAcquire, 3),
        },
      },
    };
  } finally {
    await Promise.allSettled([admin.quit(), ourClient.quit(), peerClient.quit()]);
  }
}

/**
 * The targets; a FAIL is reported, never fatal. Redis CPU is the Redis
 * process's (`INFO cpu`, user + sys, per acquire): what decides how many
 * shards a service needs, parsing, I/O and expiry included. commandstats
 * (the time inside the commands) is printed beside it: a shared call saves
 * most where commandstats does not look, the per-command parsing and I/O.
 */
export function storeBenchTargets(figures: StoreBenchFigures): TargetCheck[] {
  const { ours, theirs, ratios, multiBucket: multi, alone, options } = figures;
  const bytes = ours.memory.memoryUsage;
  const c = options.concurrency;
  const cpu = (o: RedisCpuFigures, t: RedisCpuFigures, ratio: number, commandstats: number): string =>
    `${fmt(o.processUsecPerAcquire, 2)} µs vs ${fmt(t.processUsecPerAcquire, 2)} µs (${fmt(ratio, 2)}×; ` +
    `commandstats ${fmt(o.usecPerAcquire, 2)} vs ${fmt(t.usecPerAcquire, 2)} µs, ${fmt(commandstats, 2)}×)`;
  return [
    {
      label: `one acquire in flight: Redis CPU per acquire <= 1.0× ${THEIRS}'s`,
      pass: alone.ratios.processCpu <= 1,
      detail: cpu(alone.ours.redisCpu, alone.theirs.redisCpu, alone.ratios.processCpu, alone.ratios.redisCpu),
    },
    {
      label: `one acquire in flight: throughput >= 1.0× ${THEIRS}'s`,
      pass: alone.ratios.throughput >= 1,
      detail:
        `best run ${fmt(alone.ours.throughput.best, 0)}/s vs ${fmt(alone.theirs.throughput.best, 0)}/s (${fmt(alone.ratios.throughput, 2)}×; ` +
        `medians ${fmt(alone.ratios.throughputMedian, 2)}×)`,
    },
    {
      label: `${c} acquires in flight: Redis CPU per acquire <= 0.5× ${THEIRS}'s`,
      pass: ratios.processCpu <= 0.5,
      detail: cpu(ours.redisCpu, theirs.redisCpu, ratios.processCpu, ratios.redisCpu),
    },
    {
      label: '<= 72 bytes per stored key (MEMORY USAGE)',
      pass: bytes !== null && bytes <= 72,
      detail: `${bytes ?? 'missing'} B for ${ours.memory.key} (${THEIRS}: ${theirs.memory.memoryUsage ?? 'missing'} B)`,
    },
    {
      label: `${c} acquires in flight: throughput >= 1.5× ${THEIRS}'s`,
      pass: ratios.throughput >= 1.5,
      detail:
        `best run ${fmt(ours.throughput.best, 0)}/s vs ${fmt(theirs.throughput.best, 0)}/s (${fmt(ratios.throughput, 2)}×; ` +
        `medians ${fmt(ratios.throughputMedian, 2)}×)`,
    },
    {
      label: `Redis CPU per ${multi.bucketsPerOperation}-bucket operation <= ${THEIRS}'s`,
      pass: multi.ratios.processCpu <= 1,
      detail: `${cpu(multi.ours.redisCpu, multi.theirs.redisCpu, multi.ratios.processCpu, multi.ratios.redisCpu)}; one acquireAll vs ${multi.bucketsPerOperation} consume calls`,
    },
  ];
}

function fmt(value: number, digits: number): string {
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/** Calls of each command per acquire (or per operation, in the multi-bucket phase). */
function describeCalls(cpu: RedisCpuFigures): string {
  const issued = cpu.issued.map((name) => `${name.toUpperCase()} ${cpu.callsPerAcquire[name] ?? 0}`).join(', ');
  const nested = Object.entries(cpu.callsPerAcquire)
    .filter(([name]) => !cpu.issued.includes(name))
    .map(([name, calls]) => `${name.toUpperCase()} ${calls}`)
    .join(', ');
  return nested ? `${issued} (running ${nested})` : issued;
}

function describeKey(m: KeyMemoryFigures): string {
  return `${m.key} = ${m.value ?? '(missing)'} [${m.encoding ?? '?'}]`;
}

/** Rows of one phase of the single-acquire load. */
function phaseRows(title: string, phase: PhaseFigures, n: number, floor?: RedisCpuFigures): string[][] {
  const { ours, theirs, ratios } = phase;
  const ratio = (x: number): string => `${fmt(x, 2)}×`;
  return [
    [title, '', '', ''],
    [`throughput, acquires/s (best of ${n})`, fmt(ours.throughput.best, 0), fmt(theirs.throughput.best, 0), ratio(ratios.throughput)],
    [`  median of ${n}`, fmt(ours.throughput.median, 0), fmt(theirs.throughput.median, 0), ratio(ratios.throughputMedian)],
    ['Redis CPU, µs/acquire (commandstats)', fmt(ours.redisCpu.usecPerAcquire, 2), fmt(theirs.redisCpu.usecPerAcquire, 2), ratio(ratios.redisCpu)],
    ['  µs per script call', fmt(ours.redisCpu.usecPerCall, 2), fmt(theirs.redisCpu.usecPerCall, 2), ''],
    ['  script calls per acquire', fmt(scriptCalls(ours.redisCpu), 3), fmt(scriptCalls(theirs.redisCpu), 3), ''],
    ...(floor ? [['  design floor: TIME + GET + SET PXAT', fmt(floor.usecPerAcquire, 2), '', '']] : []),
    [
      'Redis process CPU, µs/acquire (INFO cpu)',
      fmt(ours.redisCpu.processUsecPerAcquire, 2),
      fmt(theirs.redisCpu.processUsecPerAcquire, 2),
      ratio(ratios.processCpu),
    ],
  ];
}

function scriptCalls(cpu: RedisCpuFigures): number {
  return cpu.issued.reduce((sum, name) => sum + (cpu.callsPerAcquire[name] ?? 0), 0);
}

/** The table and notes printed by `bench/run.ts`. */
export function formatStoreBench(figures: StoreBenchFigures): string[] {
  const { ours, theirs, ratios, options, multiBucket: multi } = figures;
  const n = options.rounds;
  const k = multi.bucketsPerOperation;
  const ratio = (x: number | null): string => (x === null ? '-' : `${fmt(x, 2)}×`);
  const table = formatTable(
    ['figure', OURS, THEIRS, 'ours/theirs'],
    [
      ...phaseRows('one acquire in flight', figures.alone, n, figures.floor.alone),
      ['', '', '', ''],
      ...phaseRows(`${options.concurrency} acquires in flight, 3-master Cluster (shared per master)`, figures.cluster, n),
      ['', '', '', ''],
      [`single acquire, ${options.concurrency} in flight (1 bucket per call)`, '', '', ''],
      [`throughput, acquires/s (best of ${n})`, fmt(ours.throughput.best, 0), fmt(theirs.throughput.best, 0), ratio(ratios.throughput)],
      [`  median of ${n}`, fmt(ours.throughput.median, 0), fmt(theirs.throughput.median, 0), ratio(ratios.throughputMedian)],
      [
        '  each run',
        ours.throughput.runs.map((x) => fmt(x / 1000, 0)).join(' ') + ' k',
        theirs.throughput.runs.map((x) => fmt(x / 1000, 0)).join(' ') + ' k',
        '',
      ],
      ['  admitted', `${fmt(ours.throughput.admittedShare * 100, 1)}%`, `${fmt(theirs.throughput.admittedShare * 100, 1)}%`, ''],
      [
        'Node client CPU, µs/acquire',
        fmt(ours.throughput.clientUsecPerAcquire, 2),
        fmt(theirs.throughput.clientUsecPerAcquire, 2),
        ratio(ratios.clientCpu),
      ],
      ['Redis CPU, µs/acquire (commandstats)', fmt(ours.redisCpu.usecPerAcquire, 2), fmt(theirs.redisCpu.usecPerAcquire, 2), ratio(ratios.redisCpu)],
      ['  µs per script call', fmt(ours.redisCpu.usecPerCall, 2), fmt(theirs.redisCpu.usecPerCall, 2), ''],
      ['  design floor: TIME + GET + SET PXAT', fmt(figures.floor.single.usecPerAcquire, 2), '', ratio(figures.floor.ratios.single)],
      [
        '  of which commands run by the script',
        fmt(ours.redisCpu.nestedUsecPerAcquire, 2),
        fmt(theirs.redisCpu.nestedUsecPerAcquire, 2),
        '',
      ],
      [
        'Redis process CPU, µs/acquire (INFO cpu)',
        fmt(ours.redisCpu.processUsecPerAcquire, 2),
        fmt(theirs.redisCpu.processUsecPerAcquire, 2),
        ratio(ratios.processCpu),
      ],
      [
        'bytes/key, MEMORY USAGE',
        String(ours.memory.memoryUsage ?? '-'),
        String(theirs.memory.memoryUsage ?? '-'),
        ratio(ratios.memoryUsage),
      ],
      [
        `bytes/key, used_memory / ${fmt(ours.memory.keys, 0)} keys`,
        fmt(ours.memory.averageBytes, 1),
        fmt(theirs.memory.averageBytes, 1),
        ratio(ratios.averageBytes),
      ],
      ['', '', '', ''],
      [`${k} buckets per operation (same identity)`, '', '', ''],
      [
        `throughput, operations/s (best of ${n})`,
        fmt(multi.ours.throughput.best, 0),
        fmt(multi.theirs.throughput.best, 0),
        ratio(multi.ratios.throughput),
      ],
      [
        `  median of ${n}`,
        fmt(multi.ours.throughput.median, 0),
        fmt(multi.theirs.throughput.median, 0),
        ratio(multi.ratios.throughputMedian),
      ],
      [
        '  each run',
        multi.ours.throughput.runs.map((x) => fmt(x / 1000, 0)).join(' ') + ' k',
        multi.theirs.throughput.runs.map((x) => fmt(x / 1000, 0)).join(' ') + ' k',
        '',
      ],
      [
        '  admitted',
        `${fmt(multi.ours.throughput.admittedShare * 100, 1)}%`,
        `${fmt(multi.theirs.throughput.admittedShare * 100, 1)}%`,
        '',
      ],
      [
        'Node client CPU, µs/operation',
        fmt(multi.ours.throughput.clientUsecPerAcquire, 2),
        fmt(multi.theirs.throughput.clientUsecPerAcquire, 2),
        ratio(multi.ratios.clientCpu),
      ],
      [
        'Redis CPU, µs/operation (commandstats)',
        fmt(multi.ours.redisCpu.usecPerAcquire, 2),
        fmt(multi.theirs.redisCpu.usecPerAcquire, 2),
        ratio(multi.ratios.redisCpu),
      ],
      ['  design floor: TIME + MGET + 3 SET PXAT', fmt(figures.floor.multi.usecPerAcquire, 2), '', ratio(figures.floor.ratios.multi)],
      [
        '  of which commands run by the script',
        fmt(multi.ours.redisCpu.nestedUsecPerAcquire, 2),
        fmt(multi.theirs.redisCpu.nestedUsecPerAcquire, 2),
        '',
      ],
      [
        'Redis process CPU, µs/operation (INFO cpu)',
        fmt(multi.ours.redisCpu.processUsecPerAcquire, 2),
        fmt(multi.theirs.redisCpu.processUsecPerAcquire, 2),
        ratio(multi.ratios.processCpu),
      ],
    ],
  );
  const frac = figures.oursFractional;
  return [
    `Redis ${figures.redisVersion}, Node ${figures.versions.node}, ioredis ${figures.versions.ioredis}, ` +
      `${THEIRS} ${figures.versions.rateLimiterFlexible}`,
    `${options.concurrency} acquires (or ${k}-bucket operations) in flight; ${fmt(options.identities, 0)} identities; ` +
      `${n} interleaved throughput runs of ${options.seconds} s each; ${options.cpuRounds} interleaved CPU rounds of ` +
      `${fmt(options.cpuCalls, 0)} acquires (or operations), lowest shown`,
    '',
    ...table,
    '',
    `commands per single acquire (${options.concurrency} in flight): ours ${describeCalls(ours.redisCpu)}; theirs ${describeCalls(theirs.redisCpu)}`,
    `commands per ${k}-bucket operation: ours ${describeCalls(multi.ours.redisCpu)}; theirs ${describeCalls(multi.theirs.redisCpu)}`,
    `Redis CPU per bucket taken in a ${k}-bucket operation: ours ${fmt(multi.ours.redisCpu.usecPerAcquire / k, 2)} µs, ` +
      `theirs ${fmt(multi.theirs.redisCpu.usecPerAcquire / k, 2)} µs (single acquire: ` +
      `${fmt(ours.redisCpu.usecPerAcquire, 2)} µs, ${fmt(theirs.redisCpu.usecPerAcquire, 2)} µs)`,
    `keys after one acquire: ours ${describeKey(ours.memory)}; theirs ${describeKey(theirs.memory)}`,
    `fractional interval (${figures.fractionalRate}): ${describeKey(frac)}, ` +
      `MEMORY USAGE ${frac.memoryUsage ?? '-'} B, used_memory ${fmt(frac.averageBytes, 1)} B/key`,
    `single acquire, ours:   ${figures.setup.ours}`,
    `single acquire, theirs: ${figures.setup.theirs}`,
    `${k} buckets, ours:   ${multi.setup.ours}`,
    `${k} buckets, theirs: ${multi.setup.theirs}`,
    `memory phase buckets: ${figures.setup.memory}`,
  ];
}

export const storeBenchmark: Benchmark = {
  name: 'store',
  description: `RedisStore.acquire / acquireAll vs ${THEIRS} RateLimiterRedis`,
  async run({ redisUrl }): Promise<BenchReport> {
    const figures = await runStoreBench(redisUrl);
    return { lines: formatStoreBench(figures), targets: storeBenchTargets(figures), figures };
  },
};
