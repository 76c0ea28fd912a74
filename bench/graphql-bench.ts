import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { Redis } from 'ioredis';
import type { Benchmark, BenchReport, TargetCheck } from './benchmark.js';
import { formatTable, formatTargets } from './benchmark.js';
import { runCostAnalysisBench } from './graphql-cost.js';
import type { CostBenchOptions, CostOperationFigures } from './graphql-cost.js';
import { IDENTITY, IDENTITY_HEADER, QUERY, VARIANTS } from './graphql-schema.js';
import type { FloodVariant, Variant } from './graphql-schema.js';

/*
 * An Apollo server over HTTP, each variant in its own process, under load
 * from this one (autocannon), all on the same Redis in the same run: no
 * limiter, tokenBucketPlugin with RedisStore, and graphql-rate-limit-directive
 * with rate-limiter-flexible's RateLimiterRedis. Rounds run the variants
 * interleaved (A B C A B C) so drift on a busy machine hits them alike. Then
 * the time of the static cost analysis of ~1,000-field operations.
 *
 * GRAPHQL_BENCH_CPU_PROF=<dir> writes a V8 CPU profile of each server to <dir>.
 */

export interface GraphqlBenchOptions {
  /** Concurrent HTTP connections (pipelining 1). Default 50. */
  connections: number;
  /** Seconds of one timed run. Default 5. */
  seconds: number;
  /** Seconds of untimed load before each timed run. Default 1. */
  warmupSeconds: number;
  /** Rounds, each running every variant once. Default 3: on a shared machine one more round makes a quiet run likelier for each. */
  rounds: number;
  cost: Partial<CostBenchOptions>;
}

export const DEFAULT_GRAPHQL_BENCH_OPTIONS: Readonly<GraphqlBenchOptions> = {
  connections: 50,
  seconds: 5,
  warmupSeconds: 1,
  rounds: 3,
  cost: {},
};

/** The targets this benchmark reports PASS or FAIL against. */
export const TARGET_OURS_TO_NONE = 0.85;
export const TARGET_OURS_TO_PEER = 2;
export const TARGET_COST_ANALYSIS_US = 1000;

const PEER: Variant = 'graphql-rate-limit-directive';

export interface LoadRun {
  round: number;
  requestsPerSecond: number;
  /** Responses received in the timed run. */
  requests: number;
  latencyP50Ms: number;
  latencyP99Ms: number;
  /** Non-2xx answers, connection errors and bodies other than the expected one: all should be 0. */
  bad: number;
  /** EVALSHA + EVAL calls Redis served during the run, per request sent. */
  redisScriptCallsPerRequest: number;
  /** All Redis commands during the run, per request sent. */
  redisCommandsPerRequest: number;
  /** CPU time of the server process (user + sys) per response. */
  serverCpuUsPerRequest: number;
  /** CPU time of redis-server (`INFO cpu`) per request sent. */
  redisCpuUsPerRequest: number;
  /** CPU time of this process (autocannon) per response. */
  loadCpuUsPerRequest: number;
  /**
   * Cores kept busy during the run by everything else on the machine (other
   * processes, the kernel): what disturbed this run. NaN off Linux.
   */
  otherCores: number;
}

export interface VariantFigures {
  runs: LoadRun[];
  /** Requests per second, best run. */
  best: number;
  /** Requests per second, median of the runs. */
  median: number;
  /** Lowest over the runs. */
  redisScriptCallsPerRequest: number;
  serverCpuUsPerRequest: number;
}

export interface GraphqlBenchResult {
  query: string;
  connections: number;
  seconds: number;
  warmupSeconds: number;
  rounds: number;
  variants: Record<Variant, VariantFigures>;
  ratios: {
    /** Best ours over best none. */
    oursToNone: number;
    /** Best ours+usage (refundUnusedCost and rateLimitHeaders on) over best none. */
    usageToNone: number;
    /** Best ours over best graphql-rate-limit-directive. */
    oursToPeer: number;
    /** The same from the runs of each round (paired in time). */
    perRound: { round: number; oursToNone: number; usageToNone: number; oursToPeer: number }[];
    /** Server CPU per request, lowest run: ours over none (above 1: what the plugin adds to the server). */
    serverCpuOursToNone: number;
  };
  /** NODE_ENV of this process, where the cost analysis runs: graphql-js is slower outside 'production'. */
  costAnalysisNodeEnv: string;
  costAnalysis: CostOperationFigures[];
  targets: TargetCheck[];
}

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const SERVER_SCRIPT = join(ROOT, 'bench', 'graphql-server.ts');
const START_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 5_000;
/** Lets requests left in flight by autocannon finish before Redis counters are read. */
const SETTLE_MS = 250;

export interface ServerProcess {
  variant: Variant | FloodVariant;
  url: string;
  child: ChildProcess;
}

/** Every server still running, killed on exit whatever happens. */
const live = new Set<ChildProcess>();
export const killLive = (): void => {
  for (const child of live) child.kill('SIGKILL');
};

export async function startServer(variant: Variant | FloodVariant, redisUrl: string): Promise<ServerProcess> {
  const profileDir = process.env.GRAPHQL_BENCH_CPU_PROF;
  const nodeArgs = ['--import', 'tsx'];
  if (profileDir) nodeArgs.push('--cpu-prof', `--cpu-prof-dir=${profileDir}`, `--cpu-prof-name=${variant}.cpuprofile`);
  const child = spawn(process.execPath, [...nodeArgs, SERVER_SCRIPT, variant, '0', redisUrl], {
    cwd: ROOT,
    env: { ...process.env, NODE_ENV: 'production' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  live.add(child);
  child.once('exit', () => live.delete(child));

  let log = '';
  const collect = (chunk: Buffer): void => {
    log = (log + chunk.toString('utf8')).slice(-4000);
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);

  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => fail(new Error(`timed out after ${START_TIMEOUT_MS} ms`)), START_TIMEOUT_MS);
    const onData = (): void => {
      const match = /^READY (\S+)$/m.exec(log);
      if (match?.[1]) {
        cleanUp();
        resolve(match[1]);
      }
    };
    const onExit = (code: number | null): void => fail(new Error(`exited with code ${String(code)}`));
    const onError = (error: Error): void => fail(error);
    const cleanUp = (): void => {
      clearTimeout(timer);
      child.stdout?.off('data', onData);
      child.off('exit', onExit);
      child.off('error', onError);
    };
    const fail = (error: Error): void => {
      cleanUp();
      reject(new Error(`the ${variant} server did not start: ${error.message}\n${log}`));
    };
    child.stdout?.on('data', onData);
    child.once('exit', onExit);
    child.once('error', onError);
  });
  return { variant, url, child };
}

export async function stopServer({ child }: ServerProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
  await exited;
  clearTimeout(timer);
}

const REQUEST_HEADERS = { 'content-type': 'application/json', [IDENTITY_HEADER]: IDENTITY };
const REQUEST_BODY = JSON.stringify({ query: QUERY });

/** One request by hand: the answer every request of the load must match. */
async function probe(server: ServerProcess): Promise<string> {
  const response = await fetch(server.url, { method: 'POST', headers: REQUEST_HEADERS, body: REQUEST_BODY });
  const text = await response.text();
  const body = JSON.parse(text) as { data?: { items?: unknown[] }; errors?: unknown };
  if (response.status !== 200 || body.errors !== undefined || body.data?.items?.length !== 10) {
    throw new Error(`the ${server.variant} server answered ${response.status}: ${text.slice(0, 500)}`);
  }
  return text;
}

function load(url: string, connections: number, seconds: number, expectBody: string): Promise<autocannon.Result> {
  return autocannon({
    url,
    method: 'POST',
    headers: REQUEST_HEADERS,
    body: REQUEST_BODY,
    connections,
    pipelining: 1,
    duration: seconds,
    expectBody,
  });
}

export interface Counters {
  scriptCalls: number;
  commands: number;
  redisCpuUs: number;
}

export async function redisCounters(admin: Redis): Promise<Counters> {
  const [commandstats, cpu] = await Promise.all([admin.info('commandstats'), admin.info('cpu')]);
  let scriptCalls = 0;
  let commands = 0;
  for (const match of commandstats.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    const name = match[1] ?? '';
    const calls = Number(match[2]);
    if (name === 'info') continue; // our own
    commands += calls;
    if (name === 'evalsha' || name === 'eval') scriptCalls += calls;
  }
  const field = (name: string): number => Number(new RegExp(`^${name}:([0-9.]+)`, 'm').exec(cpu)?.[1] ?? NaN);
  return { scriptCalls, commands, redisCpuUs: (field('used_cpu_user') + field('used_cpu_sys')) * 1e6 };
}

/** USER_HZ: 100 on every Linux Node supports. */
const CLOCK_TICKS = 100;

/** CPU time all cores spent busy, from /proc/stat (Linux); NaN elsewhere. */
async function machineBusyUs(): Promise<number> {
  try {
    const stat = await readFile('/proc/stat', 'utf8');
    const ticks = (/^cpu\s+(.*)$/m.exec(stat)?.[1] ?? '').trim().split(/\s+/).map(Number);
    // user nice system idle iowait irq softirq steal: busy is everything but idle and iowait.
    const busy = ticks.slice(0, 8).reduce((sum, t, i) => (i === 3 || i === 4 ? sum : sum + t), 0);
    return (busy / CLOCK_TICKS) * 1e6;
  } catch {
    return NaN;
  }
}

/** user + sys CPU of a process, from /proc (Linux); NaN elsewhere. */
export async function processCpuUs(pid: number | undefined): Promise<number> {
  try {
    const stat = await readFile(`/proc/${String(pid)}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields 14 and 15 of stat (utime, stime), counted from the state field (3).
    const ticks = Number(fields[11]) + Number(fields[12]);
    return (ticks / CLOCK_TICKS) * 1e6;
  } catch {
    return NaN;
  }
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function timedRun(
  server: ServerProcess,
  admin: Redis,
  round: number,
  options: GraphqlBenchOptions,
  expectBody: string,
): Promise<LoadRun> {
  await load(server.url, options.connections, options.warmupSeconds, expectBody);
  await sleep(SETTLE_MS);
  const before = await redisCounters(admin);
  const cpuBefore = await processCpuUs(server.child.pid);
  const busyBefore = await machineBusyUs();
  const loadCpu = process.cpuUsage();
  const result = await load(server.url, options.connections, options.seconds, expectBody);
  const loadUsed = process.cpuUsage(loadCpu);
  const busyAfter = await machineBusyUs();
  const cpuAfter = await processCpuUs(server.child.pid);
  await sleep(SETTLE_MS);
  const after = await redisCounters(admin);

  const seconds = (result.finish.getTime() - result.start.getTime()) / 1000;
  const serverCpu = cpuAfter - cpuBefore;
  // Redis counters are read after SETTLE_MS: near enough for telling a quiet run from a disturbed one.
  const redisCpu = after.redisCpuUs - before.redisCpuUs;
  const responses = result.requests.total;
  const sent = result.requests.sent;
  return {
    round,
    requestsPerSecond: responses / seconds,
    requests: responses,
    latencyP50Ms: result.latency.p50,
    latencyP99Ms: result.latency.p99,
    bad: result.non2xx + result.errors + result.mismatches,
    redisScriptCallsPerRequest: (after.scriptCalls - before.scriptCalls) / sent,
    redisCommandsPerRequest: (after.commands - before.commands) / sent,
    serverCpuUsPerRequest: serverCpu / responses,
    redisCpuUsPerRequest: redisCpu / sent,
    loadCpuUsPerRequest: (loadUsed.user + loadUsed.system) / responses,
    otherCores: Math.max(0, busyAfter - busyBefore - serverCpu - loadUsed.user - loadUsed.system - redisCpu) / (seconds * 1e6),
  };
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] ?? NaN) : ((sorted[mid - 1] ?? NaN) + (sorted[mid] ?? NaN)) / 2;
}

function summarize(runs: LoadRun[]): VariantFigures {
  const rps = runs.map((r) => r.requestsPerSecond);
  return {
    runs,
    best: Math.max(...rps),
    median: median(rps),
    redisScriptCallsPerRequest: Math.min(...runs.map((r) => r.redisScriptCallsPerRequest)),
    serverCpuUsPerRequest: Math.min(...runs.map((r) => r.serverCpuUsPerRequest)),
  };
}

function progress(message: string): void {
  process.stderr.write(`  graphql: ${message}\n`);
}

/** Measures everything and returns the figures, printing only progress (to stderr). */
export async function measureGraphqlBench(
  redisUrl: string,
  overrides: Partial<GraphqlBenchOptions> = {},
): Promise<GraphqlBenchResult> {
  const options: GraphqlBenchOptions = { ...DEFAULT_GRAPHQL_BENCH_OPTIONS, ...overrides };

  // First, while nothing else of ours runs.
  progress('cost analysis');
  const costAnalysis = runCostAnalysisBench(options.cost);

  const admin = new Redis(redisUrl);
  const servers: ServerProcess[] = [];
  process.on('exit', killLive);
  try {
    progress(`starting ${VARIANTS.join(', ')}`);
    const started = await Promise.allSettled(VARIANTS.map((variant) => startServer(variant, redisUrl)));
    for (const outcome of started) if (outcome.status === 'fulfilled') servers.push(outcome.value);
    const failure = started.find((o): o is PromiseRejectedResult => o.status === 'rejected');
    if (failure) throw failure.reason;

    const bodies = await Promise.all(servers.map(probe));
    const expectBody = bodies[0] ?? '';
    if (bodies.some((b) => b !== expectBody)) throw new Error(`the variants answer differently:\n${bodies.join('\n')}`);

    const runs = new Map<string, LoadRun[]>(VARIANTS.map((v) => [v, []]));
    for (let round = 1; round <= options.rounds; round++) {
      for (const server of servers) {
        const run = await timedRun(server, admin, round, options, expectBody);
        runs.get(server.variant)?.push(run);
        progress(`round ${round}/${options.rounds} ${server.variant}: ${Math.round(run.requestsPerSecond)} req/s`);
      }
    }

    const variants = Object.fromEntries(VARIANTS.map((v) => [v, summarize(runs.get(v) ?? [])])) as Record<Variant, VariantFigures>;
    const perRound = Array.from({ length: options.rounds }, (_, i) => {
      const rps = (v: Variant): number => variants[v].runs[i]?.requestsPerSecond ?? NaN;
      return { round: i + 1, oursToNone: rps('ours') / rps('none'), usageToNone: rps('ours+usage') / rps('none'), oursToPeer: rps('ours') / rps(PEER) };
    });
    const result: Omit<GraphqlBenchResult, 'targets'> = {
      query: QUERY,
      connections: options.connections,
      seconds: options.seconds,
      warmupSeconds: options.warmupSeconds,
      rounds: options.rounds,
      variants,
      ratios: {
        oursToNone: variants.ours.best / variants.none.best,
        usageToNone: variants['ours+usage'].best / variants.none.best,
        oursToPeer: variants.ours.best / variants[PEER].best,
        perRound,
        serverCpuOursToNone: variants.ours.serverCpuUsPerRequest / variants.none.serverCpuUsPerRequest,
      },
      costAnalysisNodeEnv: process.env.NODE_ENV ?? '',
      costAnalysis,
    };
    return { ...result, targets: graphqlBenchTargets(result) };
  } finally {
    await Promise.all(servers.map(stopServer));
    killLive();
    process.off('exit', killLive);
    admin.disconnect();
  }
}

function graphqlBenchTargets(result: Omit<GraphqlBenchResult, 'targets'>): TargetCheck[] {
  const { variants, ratios, costAnalysis } = result;
  const allRuns = VARIANTS.flatMap((v) => variants[v].runs.map((r) => ({ variant: v, bad: r.bad })));
  const bad = allRuns.filter((r) => r.bad > 0);
  const slowest = costAnalysis.reduce((a, b) => (b.cpuMeanUs > a.cpuMeanUs ? b : a));
  return [
    {
      label: `tokenBucketPlugin on Redis >= ${TARGET_OURS_TO_NONE}x no limiter`,
      pass: ratios.oursToNone >= TARGET_OURS_TO_NONE,
      detail: `${ratios.oursToNone.toFixed(2)}x (${rps(variants.ours.best)} vs ${rps(variants.none.best)} req/s, best runs)`,
    },
    {
      label: `tokenBucketPlugin with refundUnusedCost and rateLimitHeaders on Redis >= ${TARGET_OURS_TO_NONE}x no limiter`,
      pass: ratios.usageToNone >= TARGET_OURS_TO_NONE,
      detail: `${ratios.usageToNone.toFixed(2)}x (${rps(variants['ours+usage'].best)} vs ${rps(variants.none.best)} req/s, best runs)`,
    },
    {
      label: `tokenBucketPlugin on Redis >= ${TARGET_OURS_TO_PEER}x graphql-rate-limit-directive`,
      pass: ratios.oursToPeer >= TARGET_OURS_TO_PEER,
      detail: `${ratios.oursToPeer.toFixed(2)}x (${rps(variants.ours.best)} vs ${rps(variants[PEER].best)} req/s, best runs)`,
    },
    {
      label: `cost analysis of a ~1,000-field operation < ${TARGET_COST_ANALYSIS_US / 1000} ms`,
      pass: costAnalysis.every((c) => c.cpuMeanUs < TARGET_COST_ANALYSIS_US),
      detail: costAnalysis
        .map((c) => `${c.name} ${us(c.cpuMeanUs)} µs CPU mean, ${us(c.p50Us)} µs wall p50, ${us(c.p99Us)} µs wall p99`)
        .join('; ') + ` (slowest: ${slowest.name})`,
    },
    {
      label: 'every response was the expected 200 body',
      pass: bad.length === 0,
      detail: bad.length === 0 ? `${allRuns.length} runs, no error` : bad.map((r) => `${r.variant}: ${r.bad} bad`).join(', '),
    },
  ];
}

const rps = (value: number): string => Math.round(value).toLocaleString('en-US');
const us = (value: number): string => (value >= 100 ? Math.round(value).toLocaleString('en-US') : value.toFixed(1));

export function formatGraphqlBench(result: GraphqlBenchResult): string[] {
  const { variants, ratios } = result;
  const rounds = Array.from({ length: result.rounds }, (_, i) => `round ${i + 1}`);
  const lines = [
    `POST ${result.query}, identity from "${IDENTITY_HEADER}"; ${result.connections} connections, pipelining 1,`,
    `${result.seconds} s per run after ${result.warmupSeconds} s of warm-up, variants interleaved over ${result.rounds} rounds.`,
    'Each server in its own process (NODE_ENV=production), load from this one. Figures per request.',
    '',
    ...formatTable(
      ['req/s', ...rounds, 'best', 'median', 'p50 ms', 'p99 ms', 'CPU µs: server', 'Redis', 'load', 'scripts', 'commands', 'others\' cores'],
      VARIANTS.map((v) => {
        const f = variants[v];
        const best = f.runs.reduce((a, b) => (b.requestsPerSecond > a.requestsPerSecond ? b : a));
        const low = (pick: (r: LoadRun) => number): number => Math.min(...f.runs.map(pick));
        return [
          v,
          ...f.runs.map((r) => rps(r.requestsPerSecond)),
          rps(f.best),
          rps(f.median),
          best.latencyP50Ms.toFixed(1),
          best.latencyP99Ms.toFixed(1),
          us(low((r) => r.serverCpuUsPerRequest)),
          us(low((r) => r.redisCpuUsPerRequest)),
          us(low((r) => r.loadCpuUsPerRequest)),
          low((r) => r.redisScriptCallsPerRequest).toFixed(2),
          low((r) => r.redisCommandsPerRequest).toFixed(2),
          f.runs.map((r) => r.otherCores.toFixed(1)).join(' '),
        ];
      }),
    ),
    '',
    `ours / none: ${ratios.oursToNone.toFixed(2)}x best, ${ratios.perRound.map((r) => `${r.oursToNone.toFixed(2)}x`).join(', ')} per round`,
    `ours+usage / none: ${ratios.usageToNone.toFixed(2)}x best, ${ratios.perRound.map((r) => `${r.usageToNone.toFixed(2)}x`).join(', ')} per round ` +
      '(refundUnusedCost and rateLimitHeaders on; every item is returned, so nothing is refunded and no second store call is made)',
    `ours / ${PEER}: ${ratios.oursToPeer.toFixed(2)}x best, ${ratios.perRound.map((r) => `${r.oursToPeer.toFixed(2)}x`).join(', ')} per round`,
    `server CPU per request, ours / none: ${ratios.serverCpuOursToNone.toFixed(2)}x (lowest runs; the plugin's own work, less sensitive to a busy machine)`,
    `Redis script calls per operation, ours: ${variants.ours.redisScriptCallsPerRequest.toFixed(3)} (one round trip), ` +
      `ours+usage: ${variants['ours+usage'].redisScriptCallsPerRequest.toFixed(3)}, ` +
      `${PEER}: ${variants[PEER].redisScriptCallsPerRequest.toFixed(3)} (one per limited field resolved)`,
    '(CPU µs per request, lowest run, of the server process, redis-server and the load generator;',
    ' "scripts": EVALSHA + EVAL calls and "commands": every Redis command, per request sent;',
    ' "others\' cores": cores other processes kept busy during each run, by round: high means a disturbed run)',
    '',
    'Cost analysis: CostModel.costOf in this process, document parsed and validated once, variables coerced per call;',
    `graphql-js in ${result.costAnalysisNodeEnv === 'production' ? 'production' : 'development'} mode (NODE_ENV=${result.costAnalysisNodeEnv || 'unset'}).`,
    '',
    ...formatTable(
      ['operation', 'fields', 'expanded', 'calls', 'CPU mean µs', 'CPU p99 µs', 'wall mean µs', 'wall p50 µs', 'wall p99 µs', 'costs'],
      result.costAnalysis.map((c) => [
        c.name,
        String(c.fields),
        String(c.expandedFields),
        String(c.calls),
        us(c.cpuMeanUs),
        us(c.cpuP99Us),
        us(c.meanUs),
        us(c.p50Us),
        us(c.p99Us),
        Object.entries(c.costs)
          .map(([bucket, cost]) => `${bucket} ${cost}`)
          .join(', '),
      ]),
    ),
    ...result.costAnalysis.map((c) => `  ${c.name}: ${c.description}`),
  ];
  return lines;
}

/** For `bench/run.ts`. */
export const graphqlBenchmark: Benchmark = {
  name: 'graphql',
  description: `Apollo Server over HTTP: no limiter vs tokenBucketPlugin (RedisStore), alone and with refundUnusedCost and rateLimitHeaders, vs ${PEER}; cost analysis time`,
  async run({ redisUrl }): Promise<BenchReport> {
    const result = await measureGraphqlBench(redisUrl);
    return { lines: formatGraphqlBench(result), targets: result.targets, figures: result };
  },
};

/** Runs the GraphQL benchmark on its own: prints its table, targets and a `BENCH_JSON` line, and returns the figures. */
export async function runGraphqlBench(redisUrl: string, overrides: Partial<GraphqlBenchOptions> = {}): Promise<GraphqlBenchResult> {
  if (!redisUrl) throw new Error('runGraphqlBench needs a Redis URL, e.g. redis://127.0.0.1:6379');
  const result = await measureGraphqlBench(redisUrl, overrides);
  for (const line of formatGraphqlBench(result)) console.log(line);
  console.log('');
  for (const line of formatTargets(result.targets)) console.log(line);
  console.log(`BENCH_JSON ${JSON.stringify({ graphql: result })}`);
  return result;
}
