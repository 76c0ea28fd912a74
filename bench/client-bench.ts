import { Redis } from 'ioredis';
import { Redis as ValkeyRedis } from 'iovalkey';
import { createClient } from 'redis';
import { Rate } from '../src/rate.js';
import type { RedisStoreClient } from '../src/stores/redis-client.js';
import { RedisStore } from '../src/stores/redis-store.js';
import { TokenBucket } from '../src/token-bucket.js';
import type { Benchmark, BenchReport, TargetCheck } from './benchmark.js';
import { formatTable } from './benchmark.js';

/*
 * RedisStore on each client library it accepts, on the same Redis in the
 * same run, interleaved: node-redis v5 and iovalkey against ioredis. Then
 * the figures the README's "Sizing" section rests on: bytes per bucket,
 * script calls and Redis CPU per operation, what one Redis core sustains,
 * and the floor of a script that reads TIME and a key and writes it back
 * with SET … PXAT.
 */

export interface ClientBenchOptions {
  /** Acquires in flight at once in the throughput and loaded CPU phases. Default 256. */
  concurrency: number;
  /** Distinct identities the load cycles through. Default 20,000. */
  identities: number;
  /** Seconds of one timed throughput run. Default 1.5. */
  seconds: number;
  /** Throughput rounds, each running every client once. Default 5. */
  rounds: number;
  /** Calls per Redis CPU measurement. Default 20,000. */
  cpuCalls: number;
  /** Redis CPU rounds; the lowest counts. Default 5. */
  cpuRounds: number;
  /** Identities written for the bytes per bucket. Default 20,000. */
  memoryIdentities: number;
}

export const DEFAULT_CLIENT_BENCH_OPTIONS: Readonly<ClientBenchOptions> = {
  concurrency: 256,
  identities: 20_000,
  seconds: 1.5,
  rounds: 5,
  cpuCalls: 20_000,
  cpuRounds: 5,
  memoryIdentities: 20_000,
};

const FAMILIES = ['ioredis', 'node-redis', 'iovalkey'] as const;
type Family = (typeof FAMILIES)[number];

/** 100 tokens a second, burst 1000: the load never runs a bucket dry. */
const loadBucket = (name = 'search'): TokenBucket => new TokenBucket(name, 1000, Rate.perSecond(100));
/** 100 an hour: every key outlives the memory measurement. */
const memoryBucket = (name = 'search'): TokenBucket => new TokenBucket(name, 1000, Rate.perHour(100));
const OPERATION_BUCKETS = ['search', 'mutate', 'global'] as const;

/** The least a bucket's script can do: read the clock and the key, write the key with its expiry. */
export const FLOOR_SCRIPT = `local clock = redis.call('TIME')
local now = clock[1] * 1000000 + clock[2]
local value = redis.call('GET', KEYS[1])
value = string.format('%d', now + 10000)
redis.call('SET', KEYS[1], value, 'PXAT', string.sub(value, 1, -4))
return {1, 999, now + 10000}`;

interface Throughput {
  runs: number[];
  best: number;
  median: number;
  /** CPU of this Node process per acquire (µs), lowest run: the client library's share. */
  clientUsec: number;
}

interface RedisCpu {
  /** Script calls (EVALSHA + EVAL) per operation. */
  scriptCalls: number;
  /** commandstats usec of the script calls, per operation (lowest round). */
  usec: number;
  /** Redis process CPU (INFO cpu, user + sys) per operation (lowest round): adds parsing, replies and I/O. */
  processUsec: number;
}

export interface ClientBenchFigures {
  redisVersion: string;
  options: ClientBenchOptions;
  throughput: Record<Family, Throughput>;
  /** Single acquire at `concurrency` in flight, per client library. */
  redisCpu: Record<Family, RedisCpu>;
  /** Best over best, median over median, against ioredis. */
  ratios: Record<Exclude<Family, 'ioredis'>, { throughput: number; throughputMedian: number; clientCpu: number; processCpu: number }>;
  sizing: {
    /** Key and MEMORY USAGE of one bucket of a 10-character identity. */
    key: string;
    memoryUsage: number;
    /** used_memory growth per identity, one bucket each and three buckets each (expiry entries and hash tables included). */
    bytesPerIdentity: { oneBucket: number; threeBuckets: number };
    /** Redis CPU per operation: one acquire with one in flight, with `concurrency` in flight, a 3-bucket acquireAll, the floor script. */
    cpu: { alone: RedisCpu; loaded: RedisCpu; threeBuckets: RedisCpu; floor: RedisCpu };
  };
}

function identities(count: number): string[] {
  return Array.from({ length: count }, (_, i) => `user-${String(i).padStart(5, '0')}`);
}

type Operation = (identity: string) => Promise<unknown>;

/** Keeps `concurrency` operations in flight over `ids` until the time or call budget runs out. */
async function drive(op: Operation, ids: readonly string[], concurrency: number, budget: { seconds: number } | { calls: number }) {
  const cpuStart = process.cpuUsage();
  const start = performance.now();
  const deadline = 'seconds' in budget ? start + budget.seconds * 1000 : Infinity;
  const maxCalls = 'calls' in budget ? budget.calls : Infinity;
  let started = 0;
  const worker = async (): Promise<void> => {
    while (started < maxCalls && performance.now() < deadline) {
      const identity = ids[started % ids.length]!;
      started++;
      await op(identity);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const cpu = process.cpuUsage(cpuStart);
  return { calls: started, seconds: (performance.now() - start) / 1000, clientUsec: (cpu.user + cpu.system) / started };
}

function infoNumber(info: string, field: string): number {
  const match = new RegExp(`^${field}:([0-9.]+)`, 'm').exec(info);
  if (!match?.[1]) throw new Error(`INFO has no ${field}`);
  return Number(match[1]);
}

/** calls and usec of one command in INFO commandstats. */
function commandStat(info: string, name: string): { calls: number; usec: number } {
  const match = new RegExp(`^cmdstat_${name}:calls=(\\d+),usec=(\\d+)`, 'm').exec(info);
  return { calls: Number(match?.[1] ?? 0), usec: Number(match?.[2] ?? 0) };
}

async function measureCpu(admin: Redis, op: Operation, ids: readonly string[], concurrency: number, options: ClientBenchOptions): Promise<RedisCpu> {
  const samples: RedisCpu[] = [];
  for (let r = 0; r < options.cpuRounds; r++) {
    await admin.flushdb('SYNC');
    const calls = concurrency === 1 ? Math.min(options.cpuCalls, 5_000) : options.cpuCalls;
    const before = await admin.info('cpu');
    await admin.call('CONFIG', 'RESETSTAT');
    const { calls: done } = await drive(op, ids, concurrency, { calls });
    const stats = await admin.info('commandstats');
    const after = await admin.info('cpu');
    const scripts = ['evalsha', 'eval'].map((name) => commandStat(stats, name));
    const cpu = (info: string) => infoNumber(info, 'used_cpu_user') + infoNumber(info, 'used_cpu_sys');
    samples.push({
      scriptCalls: scripts.reduce((sum, s) => sum + s.calls, 0) / done,
      usec: scripts.reduce((sum, s) => sum + s.usec, 0) / done,
      processUsec: ((cpu(after) - cpu(before)) * 1e6) / done,
    });
  }
  return {
    scriptCalls: Math.min(...samples.map((s) => s.scriptCalls)),
    usec: Math.min(...samples.map((s) => s.usec)),
    processUsec: Math.min(...samples.map((s) => s.processUsec)),
  };
}

/** used_memory growth per identity after `op` ran once for each, once the hash tables have settled. */
async function bytesPerIdentity(admin: Redis, op: Operation, ids: readonly string[]): Promise<number> {
  const settled = async (): Promise<number> => {
    await new Promise((resolve) => setTimeout(resolve, 300));
    const info = await admin.info('memory');
    return infoNumber(info, 'used_memory') - infoNumber(info, 'mem_clients_normal');
  };
  await admin.flushdb('SYNC');
  const before = await settled();
  await drive(op, ids, 64, { calls: ids.length });
  return ((await settled()) - before) / ids.length;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

const round = (value: number, digits: number): number => Math.round(value * 10 ** digits) / 10 ** digits;

export async function runClientBench(redisUrl: string, overrides: Partial<ClientBenchOptions> = {}): Promise<ClientBenchFigures> {
  const options: ClientBenchOptions = { ...DEFAULT_CLIENT_BENCH_OPTIONS, ...overrides };
  const admin = new Redis(redisUrl);
  const nodeRedis = createClient({ url: redisUrl });
  nodeRedis.on('error', () => {});
  await nodeRedis.connect();
  // One connection per library, as each would have in its own process.
  const clients: Record<Family, RedisStoreClient> = { ioredis: new Redis(redisUrl), 'node-redis': nodeRedis, iovalkey: new ValkeyRedis(redisUrl) };
  try {
    const redisVersion = String(/^redis_version:(\S+)/m.exec(await admin.info('server'))?.[1] ?? 'unknown');
    const ids = identities(options.identities);
    const load = loadBucket();
    const acquireOn = (family: Family, bucket = load): Operation => {
      const store = new RedisStore(clients[family]);
      return (identity) => store.acquire(bucket, identity);
    };

    // Throughput, interleaved: every round runs each library once.
    const runs: Record<Family, { perSecond: number; clientUsec: number }[]> = { ioredis: [], 'node-redis': [], iovalkey: [] };
    for (const family of FAMILIES) await drive(acquireOn(family), ids, options.concurrency, { seconds: 0.5 });
    for (let r = 0; r < options.rounds; r++) {
      for (const family of FAMILIES) {
        await admin.flushdb('SYNC');
        const run = await drive(acquireOn(family), ids, options.concurrency, { seconds: options.seconds });
        runs[family].push({ perSecond: run.calls / run.seconds, clientUsec: run.clientUsec });
      }
    }
    const throughput = Object.fromEntries(
      FAMILIES.map((family) => {
        const perSecond = runs[family].map((run) => run.perSecond);
        return [
          family,
          {
            runs: perSecond.map((x) => Math.round(x)),
            best: Math.round(Math.max(...perSecond)),
            median: Math.round(median(perSecond)),
            clientUsec: round(Math.min(...runs[family].map((run) => run.clientUsec)), 2),
          },
        ];
      }),
    ) as Record<Family, Throughput>;

    const redisCpu = {} as Record<Family, RedisCpu>;
    for (const family of FAMILIES) redisCpu[family] = await measureCpu(admin, acquireOn(family), ids, options.concurrency, options);
    const ratio = (family: Exclude<Family, 'ioredis'>) => ({
      throughput: round(throughput[family].best / throughput.ioredis.best, 3),
      throughputMedian: round(throughput[family].median / throughput.ioredis.median, 3),
      clientCpu: round(throughput[family].clientUsec / throughput.ioredis.clientUsec, 3),
      processCpu: round(redisCpu[family].processUsec / redisCpu.ioredis.processUsec, 3),
    });

    // Sizing, on ioredis.
    const store = new RedisStore(clients.ioredis);
    const memory = memoryBucket();
    await admin.flushdb('SYNC');
    await store.acquire(memory, 'user-12345');
    const key = store.keyFor(memory, 'user-12345');
    const memoryUsage = Number(await admin.call('MEMORY', 'USAGE', key));
    const memoryIds = identities(options.memoryIdentities);
    const oneBucket = await bytesPerIdentity(admin, (id) => store.acquire(memory, id), memoryIds);
    const three = OPERATION_BUCKETS.map((name) => memoryBucket(name));
    const threeBuckets = await bytesPerIdentity(admin, (id) => store.acquireAll(three.map((bucket) => ({ bucket, key: id, cost: 1 }))), memoryIds);

    const operation = OPERATION_BUCKETS.map((name) => loadBucket(name));
    const floorSha = String(await admin.script('LOAD', FLOOR_SCRIPT));
    const floorClient = clients.ioredis as Redis;
    const floor: Operation = (identity) => floorClient.evalsha(floorSha, 1, store.keyFor(load, identity), 1000, 10_000, 1);
    const cpu = {
      alone: await measureCpu(admin, acquireOn('ioredis'), ids, 1, options),
      loaded: redisCpu.ioredis,
      threeBuckets: await measureCpu(admin, (id) => store.acquireAll(operation.map((bucket) => ({ bucket, key: id, cost: 1 }))), ids, options.concurrency, options),
      floor: await measureCpu(admin, floor, ids, options.concurrency, options),
    };
    await admin.flushdb('SYNC');

    return {
      redisVersion,
      options,
      throughput,
      redisCpu,
      ratios: { 'node-redis': ratio('node-redis'), iovalkey: ratio('iovalkey') },
      sizing: { key, memoryUsage, bytesPerIdentity: { oneBucket: round(oneBucket, 1), threeBuckets: round(threeBuckets, 1) }, cpu },
    };
  } finally {
    await Promise.allSettled([admin.quit(), (clients.ioredis as Redis).quit(), nodeRedis.close(), (clients.iovalkey as ValkeyRedis).quit()]);
  }
}

export function clientBenchTargets(figures: ClientBenchFigures): TargetCheck[] {
  const { throughput, ratios } = figures;
  return (['node-redis', 'iovalkey'] as const).map((family) => ({
    label: `${family}: RedisStore throughput >= 0.9× ioredis's`,
    pass: ratios[family].throughput >= 0.9,
    detail:
      `best run ${fmt(throughput[family].best, 0)}/s vs ${fmt(throughput.ioredis.best, 0)}/s (${fmt(ratios[family].throughput, 2)}×; ` +
      `medians ${fmt(ratios[family].throughputMedian, 2)}×)`,
  }));
}

function fmt(value: number, digits: number): string {
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/** Shards and memory for a million operations a second, from the figures measured. */
export function sizingArithmetic(figures: ClientBenchFigures): string[] {
  const { cpu, bytesPerIdentity } = figures.sizing;
  const perCore = 1e6 / cpu.loaded.processUsec;
  const shardsAt = (utilisation: number) => Math.ceil(1e6 / (perCore * utilisation));
  const gb = (bytes: number) => fmt((bytes * 10_000_000) / 1e9, 2);
  // On a Cluster only one identity's acquires share a call: the floor's cost is the closer guide there.
  const unshared = 1e6 / cpu.floor.processUsec;
  return [
    `one Redis core: ${fmt(perCore, 0)} acquires/s at ${fmt(cpu.loaded.processUsec, 2)} µs of process CPU each, calls shared ` +
      `(commandstats alone: ${fmt(1e6 / cpu.loaded.usec, 0)}/s)`,
    `1 M acquires/s: ${fmt(1e6 / perCore, 1)} cores fully busy when calls are shared; ${shardsAt(0.5)} Redis cores at 50% CPU, ${shardsAt(0.7)} at 70%`,
    `unshared (a Cluster, each identity's acquires apart): at least the floor's ${fmt(cpu.floor.processUsec, 2)} µs: ` +
      `${fmt(1e6 / unshared, 1)} cores; ${Math.ceil(1e6 / (unshared * 0.5))} Cluster masters at 50% CPU`,
    `10 M identities: ${gb(bytesPerIdentity.oneBucket)} GB with one bucket each, ${gb(bytesPerIdentity.threeBuckets)} GB with three ` +
      '(per copy: double it for one replica per master; only identities seen within a refill time hold keys)',
  ];
}

export function formatClientBench(figures: ClientBenchFigures): string[] {
  const { throughput, redisCpu, ratios, options } = figures;
  const ratioOf = (family: Family, pick: (r: ClientBenchFigures['ratios']['iovalkey']) => number): string =>
    family === 'ioredis' ? '1.00×' : `${fmt(pick(ratios[family]), 2)}×`;
  const table = formatTable(
    ['single acquire', ...FAMILIES.map((f) => `${f}`), 'node-redis / ioredis', 'iovalkey / ioredis'],
    [
      [
        `throughput, acquires/s (best of ${options.rounds})`,
        ...FAMILIES.map((f) => fmt(throughput[f].best, 0)),
        ratioOf('node-redis', (r) => r.throughput),
        ratioOf('iovalkey', (r) => r.throughput),
      ],
      [
        `  median of ${options.rounds}`,
        ...FAMILIES.map((f) => fmt(throughput[f].median, 0)),
        ratioOf('node-redis', (r) => r.throughputMedian),
        ratioOf('iovalkey', (r) => r.throughputMedian),
      ],
      ['  each run', ...FAMILIES.map((f) => throughput[f].runs.map((x) => fmt(x / 1000, 0)).join(' ') + ' k'), '', ''],
      [
        'Node client CPU, µs/acquire',
        ...FAMILIES.map((f) => fmt(throughput[f].clientUsec, 2)),
        ratioOf('node-redis', (r) => r.clientCpu),
        ratioOf('iovalkey', (r) => r.clientCpu),
      ],
      ['Redis CPU, µs/acquire (commandstats)', ...FAMILIES.map((f) => fmt(redisCpu[f].usec, 2)), '', ''],
      [
        'Redis process CPU, µs/acquire (INFO cpu)',
        ...FAMILIES.map((f) => fmt(redisCpu[f].processUsec, 2)),
        ratioOf('node-redis', (r) => r.processCpu),
        ratioOf('iovalkey', (r) => r.processCpu),
      ],
    ],
  );
  const { sizing } = figures;
  const cpuRow = (label: string, c: RedisCpu): string[] => [label, fmt(c.scriptCalls, 3), fmt(c.usec, 2), fmt(c.processUsec, 2)];
  const sizingTable = formatTable(
    ['Redis CPU per operation (ioredis)', 'script calls', 'µs (commandstats)', 'µs (process)'],
    [
      cpuRow('acquire, 1 in flight', sizing.cpu.alone),
      cpuRow(`acquire, ${options.concurrency} in flight`, sizing.cpu.loaded),
      cpuRow(`acquireAll of 3 buckets, ${options.concurrency} in flight`, sizing.cpu.threeBuckets),
      cpuRow(`floor: TIME + GET + SET PXAT, ${options.concurrency} in flight`, sizing.cpu.floor),
    ],
  );
  return [
    `Redis ${figures.redisVersion}; ${options.concurrency} acquires in flight per library, one connection each; ` +
      `${fmt(options.identities, 0)} identities; ${options.rounds} interleaved runs of ${options.seconds} s; ` +
      `CPU: lowest of ${options.cpuRounds} rounds of ${fmt(options.cpuCalls, 0)} calls`,
    '',
    ...table,
    '',
    ...sizingTable,
    '',
    `bytes: MEMORY USAGE ${sizing.memoryUsage} B for ${sizing.key}; used_memory per identity ` +
      `${fmt(sizing.bytesPerIdentity.oneBucket, 1)} B with one bucket, ${fmt(sizing.bytesPerIdentity.threeBuckets, 1)} B with three ` +
      `(${fmt(options.memoryIdentities, 0)} identities)`,
    ...sizingArithmetic(figures),
  ];
}

export const clientBenchmark: Benchmark = {
  name: 'clients',
  description: 'RedisStore on node-redis v5 and iovalkey vs ioredis, and the sizing figures',
  async run({ redisUrl }): Promise<BenchReport> {
    const figures = await runClientBench(redisUrl);
    return { lines: formatClientBench(figures), targets: clientBenchTargets(figures), figures };
  },
};
