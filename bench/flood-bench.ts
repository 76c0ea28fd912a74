import autocannon from 'autocannon';
import { Redis } from 'ioredis';
import type { Benchmark, BenchReport, TargetCheck } from './benchmark.js';
import { formatTable } from './benchmark.js';
import { killLive, median, processCpuUs, redisCounters, startServer, stopServer } from './graphql-bench.js';
import type { ServerProcess } from './graphql-bench.js';
import { IDENTITY_HEADER, QUERY } from './graphql-schema.js';

/*
 * One identity floods an operation its bucket denied long ago. Each server in
 * its own process, under load from this one (autocannon), on the same Redis,
 * interleaved over rounds: no limiter answering the operation with its data,
 * and tokenBucketPlugin (RedisStore) denying it with the deny cache on and off.
 * With the cache, a replica answers the flood itself: denied requests should
 * come at least as fast as the unlimited server answers, and Redis should
 * hardly hear of them.
 */

export interface FloodBenchOptions {
  /** Concurrent HTTP connections (pipelining 1), all one identity. Default 32. */
  connections: number;
  /** Seconds of one timed run. Default 5. */
  seconds: number;
  /** Seconds of untimed load before each timed run. Default 1. */
  warmupSeconds: number;
  /** Rounds, each running every server once. Default 3. */
  rounds: number;
}

export const DEFAULT_FLOOD_BENCH_OPTIONS: Readonly<FloodBenchOptions> = { connections: 32, seconds: 5, warmupSeconds: 1, rounds: 3 };

/** Targets of the issue. */
export const TARGET_DENIED_TO_NONE = 0.9;
export const TARGET_STORE_CALLS_PER_DENIAL = 0.001;

const SERVERS = ['none', 'flooded', 'flooded-no-cache'] as const;
type FloodServer = (typeof SERVERS)[number];
const FLOOD_IDENTITY = 'flooding-user';
const REQUEST_HEADERS = { 'content-type': 'application/json', [IDENTITY_HEADER]: FLOOD_IDENTITY };
const REQUEST_BODY = JSON.stringify({ query: QUERY });
/** Lets requests left in flight by autocannon finish before Redis counters are read. */
const SETTLE_MS = 250;

export interface FloodRun {
  round: number;
  /** Responses per second (all 200 for `none`, all 429 for the flooded servers). */
  requestsPerSecond: number;
  responses: number;
  /** Responses other than the expected status, and connection errors: should be 0. */
  unexpected: number;
  latencyP50Ms: number;
  latencyP99Ms: number;
  /** EVALSHA + EVAL calls Redis served during the run, per response. */
  storeCallsPerResponse: number;
  serverCpuUsPerResponse: number;
}

export interface FloodServerFigures {
  runs: FloodRun[];
  best: number;
  median: number;
  /** Highest over the runs. */
  storeCallsPerResponse: number;
}

export interface FloodBenchResult {
  query: string;
  connections: number;
  seconds: number;
  warmupSeconds: number;
  rounds: number;
  servers: Record<FloodServer, FloodServerFigures>;
  ratios: {
    /** Best denied req/s with the deny cache over best req/s of the unlimited server. */
    deniedToNone: number;
    /** The same without the deny cache. */
    deniedNoCacheToNone: number;
    perRound: { round: number; deniedToNone: number; deniedNoCacheToNone: number }[];
  };
  targets: TargetCheck[];
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function load(url: string, connections: number, seconds: number): Promise<autocannon.Result> {
  return autocannon({ url, method: 'POST', headers: REQUEST_HEADERS, body: REQUEST_BODY, connections, pipelining: 1, duration: seconds });
}

async function post(server: ServerProcess): Promise<number> {
  const response = await fetch(server.url, { method: 'POST', headers: REQUEST_HEADERS, body: REQUEST_BODY });
  await response.text();
  return response.status;
}

/** The unlimited server answers 200; a flooded one admits the first operation and denies the next. */
async function prepare(server: ServerProcess): Promise<void> {
  const expected = server.variant === 'none' ? [200, 200] : [200, 429];
  const statuses = [await post(server), await post(server)];
  if (statuses.join() !== expected.join()) throw new Error(`the ${server.variant} server answered ${statuses.join(', ')}, expected ${expected.join(', ')}`);
}

async function timedRun(server: ServerProcess, admin: Redis, round: number, options: FloodBenchOptions): Promise<FloodRun> {
  await load(server.url, options.connections, options.warmupSeconds);
  await sleep(SETTLE_MS);
  const before = await redisCounters(admin);
  const cpuBefore = await processCpuUs(server.child.pid);
  const result = await load(server.url, options.connections, options.seconds);
  const cpuAfter = await processCpuUs(server.child.pid);
  await sleep(SETTLE_MS);
  const after = await redisCounters(admin);
  const seconds = (result.finish.getTime() - result.start.getTime()) / 1000;
  const responses = result.requests.total;
  const expected = server.variant === 'none' ? result['2xx'] : result.non2xx;
  return {
    round,
    requestsPerSecond: responses / seconds,
    responses,
    unexpected: responses - expected + result.errors + result.timeouts,
    latencyP50Ms: result.latency.p50,
    latencyP99Ms: result.latency.p99,
    storeCallsPerResponse: (after.scriptCalls - before.scriptCalls) / responses,
    serverCpuUsPerResponse: (cpuAfter - cpuBefore) / responses,
  };
}

function progress(message: string): void {
  process.stderr.write(`  flood: ${message}\n`);
}

export async function measureFloodBench(redisUrl: string, overrides: Partial<FloodBenchOptions> = {}): Promise<FloodBenchResult> {
  const options: FloodBenchOptions = { ...DEFAULT_FLOOD_BENCH_OPTIONS, ...overrides };
  const admin = new Redis(redisUrl);
  const servers: ServerProcess[] = [];
  process.on('exit', killLive);
  try {
    progress(`starting ${SERVERS.join(', ')}`);
    const started = await Promise.allSettled(SERVERS.map((variant) => startServer(variant, redisUrl)));
    for (const outcome of started) if (outcome.status === 'fulfilled') servers.push(outcome.value);
    const failure = started.find((o): o is PromiseRejectedResult => o.status === 'rejected');
    if (failure) throw failure.reason;
    // Both flooded servers share one Redis: one empties the bucket, the other finds it empty.
    for (const server of servers) {
      if (server.variant === 'flooded-no-cache') {
        const status = await post(server);
        if (status !== 429) throw new Error(`the flooded-no-cache server answered ${status}, expected 429`);
      } else {
        await prepare(server);
      }
    }

    const runs = new Map<string, FloodRun[]>(SERVERS.map((s) => [s, []]));
    for (let round = 1; round <= options.rounds; round++) {
      for (const server of servers) {
        const run = await timedRun(server, admin, round, options);
        runs.get(server.variant)?.push(run);
        progress(`round ${round}/${options.rounds} ${server.variant}: ${Math.round(run.requestsPerSecond)} req/s, ${run.storeCallsPerResponse.toFixed(4)} store calls per response`);
      }
    }
    const figures = (name: FloodServer): FloodServerFigures => {
      const list = runs.get(name) ?? [];
      const rps = list.map((r) => r.requestsPerSecond);
      return { runs: list, best: Math.max(...rps), median: median(rps), storeCallsPerResponse: Math.max(...list.map((r) => r.storeCallsPerResponse)) };
    };
    const byServer = Object.fromEntries(SERVERS.map((s) => [s, figures(s)])) as Record<FloodServer, FloodServerFigures>;
    const perRound = Array.from({ length: options.rounds }, (_, i) => {
      const rps = (s: FloodServer): number => byServer[s].runs[i]?.requestsPerSecond ?? NaN;
      return { round: i + 1, deniedToNone: rps('flooded') / rps('none'), deniedNoCacheToNone: rps('flooded-no-cache') / rps('none') };
    });
    const result: Omit<FloodBenchResult, 'targets'> = {
      query: QUERY,
      connections: options.connections,
      seconds: options.seconds,
      warmupSeconds: options.warmupSeconds,
      rounds: options.rounds,
      servers: byServer,
      ratios: {
        deniedToNone: byServer.flooded.best / byServer.none.best,
        deniedNoCacheToNone: byServer['flooded-no-cache'].best / byServer.none.best,
        perRound,
      },
    };
    return { ...result, targets: floodTargets(result) };
  } finally {
    await Promise.all(servers.map(stopServer));
    killLive();
    process.off('exit', killLive);
    admin.disconnect();
  }
}

function floodTargets(result: Omit<FloodBenchResult, 'targets'>): TargetCheck[] {
  const { servers, ratios } = result;
  const unexpected = SERVERS.flatMap((s) => servers[s].runs.filter((r) => r.unexpected > 0).map((r) => `${s} round ${r.round}: ${r.unexpected}`));
  return [
    {
      label: `denied requests/s with the deny cache >= ${TARGET_DENIED_TO_NONE}x what no limiter answers`,
      pass: ratios.deniedToNone >= TARGET_DENIED_TO_NONE,
      detail: `${ratios.deniedToNone.toFixed(2)}x (${rps(servers.flooded.best)} vs ${rps(servers.none.best)} req/s, best runs)`,
    },
    {
      label: `store calls per denied request with the deny cache <= ${TARGET_STORE_CALLS_PER_DENIAL}`,
      pass: servers.flooded.storeCallsPerResponse <= TARGET_STORE_CALLS_PER_DENIAL,
      detail: `${servers.flooded.storeCallsPerResponse.toFixed(5)} (highest run; ${servers['flooded-no-cache'].storeCallsPerResponse.toFixed(3)} without the cache)`,
    },
    {
      label: 'every response had the expected status (200 without a limiter, 429 flooded)',
      pass: unexpected.length === 0,
      detail: unexpected.length === 0 ? `${SERVERS.length * result.rounds} runs, none other` : unexpected.join(', '),
    },
  ];
}

const rps = (value: number): string => Math.round(value).toLocaleString('en-US');

export function formatFloodBench(result: FloodBenchResult): string[] {
  const rounds = Array.from({ length: result.rounds }, (_, i) => `round ${i + 1}`);
  return [
    `POST ${result.query} as one identity ("${IDENTITY_HEADER}: ${FLOOD_IDENTITY}"); ${result.connections} connections, pipelining 1,`,
    `${result.seconds} s per run after ${result.warmupSeconds} s of warm-up, servers interleaved over ${result.rounds} rounds.`,
    'none answers with data; flooded servers deny every request (their `price` bucket was emptied for an hour before the runs).',
    '',
    ...formatTable(
      ['req/s', ...rounds, 'best', 'median', 'p50 ms', 'p99 ms', 'server CPU µs', 'store calls/response'],
      SERVERS.map((s) => {
        const f = result.servers[s];
        const best = f.runs.reduce((a, b) => (b.requestsPerSecond > a.requestsPerSecond ? b : a));
        return [
          s,
          ...f.runs.map((r) => rps(r.requestsPerSecond)),
          rps(f.best),
          rps(f.median),
          best.latencyP50Ms.toFixed(1),
          best.latencyP99Ms.toFixed(1),
          Math.min(...f.runs.map((r) => r.serverCpuUsPerResponse)).toFixed(0),
          f.storeCallsPerResponse.toFixed(5),
        ];
      }),
    ),
    '',
    `flooded / none: ${result.ratios.deniedToNone.toFixed(2)}x best, ${result.ratios.perRound.map((r) => `${r.deniedToNone.toFixed(2)}x`).join(', ')} per round`,
    `flooded-no-cache / none: ${result.ratios.deniedNoCacheToNone.toFixed(2)}x best, ${result.ratios.perRound.map((r) => `${r.deniedNoCacheToNone.toFixed(2)}x`).join(', ')} per round`,
    '(store calls: EVALSHA + EVAL calls Redis served during a run, per response; highest run)',
  ];
}

/** For `bench/run.ts` (`npm run bench -- --only flood` runs it alone). */
export const floodBenchmark: Benchmark = {
  name: 'flood',
  description: 'one identity floods a denied operation: denied req/s vs an unlimited server, and store calls per denial, deny cache on and off',
  async run({ redisUrl }): Promise<BenchReport> {
    const result = await measureFloodBench(redisUrl);
    return { lines: formatFloodBench(result), targets: result.targets, figures: result };
  },
};
