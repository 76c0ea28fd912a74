import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import type { Benchmark, BenchReport, TargetCheck } from './benchmark.js';
import { formatTable } from './benchmark.js';
import { median, processCpuUs } from './graphql-bench.js';
import { EXAMPLE_QUERY, compose, subgraphTypeDefs } from '../test/support/federation.js';

/*
 * The Apollo Router coprocessor's cost per request: `routerCoprocessor` on a
 * RedisStore against a peer that does what any coprocessor must (read the
 * Router's SupergraphRequest payload, parse it, answer it back with
 * `control: "continue"`), each a Node process of its own (one core), under
 * the same load from this one: autocannon, 64 connections, the payloads the
 * Router sends for EXAMPLE_QUERY (supergraph SDL included) over 256
 * identities, every operation admitted. Interleaved over rounds.
 */

export interface RouterBenchOptions {
  connections: number;
  seconds: number;
  warmupSeconds: number;
  rounds: number;
}

export const DEFAULT_ROUTER_BENCH_OPTIONS: Readonly<RouterBenchOptions> = { connections: 64, seconds: 4, warmupSeconds: 1, rounds: 5 };

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SERVER_SCRIPT = join(ROOT, 'bench', 'router-server.ts');
const VARIANTS = ['echo', 'coprocessor', 'reported'] as const;
type Variant = (typeof VARIANTS)[number];
const IDENTITIES = 256;

interface Run {
  round: number;
  requestsPerSecond: number;
  /** Server process CPU (user + system) per request, µs. */
  cpuUsPerRequest: number;
  latencyP50Ms: number;
  latencyP99Ms: number;
  /** Non-2xx answers and connection errors: must be 0. */
  unexpected: number;
}

interface VariantFigures {
  runs: Run[];
  best: number;
  median: number;
  /** Lowest over the runs (the least disturbed by the machine's other work). */
  cpuUsPerRequest: number;
  cpuUsPerRequestMedian: number;
}

export interface RouterBenchResult {
  connections: number;
  seconds: number;
  rounds: number;
  payloadBytes: number;
  sdlBytes: number;
  variants: Record<Variant, VariantFigures>;
  /** Coprocessor CPU per request minus the peer's, µs: what limiting adds. */
  overheadUs: { coprocessor: number; reported: number; perRound: { round: number; coprocessor: number; reported: number }[] };
  ratios: { coprocessorToEcho: number; reportedToEcho: number };
}

interface Server {
  variant: Variant;
  url: string;
  child: ChildProcess;
}

async function startServer(variant: Variant, redisUrl: string): Promise<Server> {
  const child = spawn(process.execPath, ['--import', 'tsx', SERVER_SCRIPT, variant, redisUrl], { cwd: ROOT, env: { ...process.env, NODE_ENV: 'production' }, stdio: ['pipe', 'pipe', 'pipe'] });
  let log = '';
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the ${variant} server did not start: ${log}`)), 60_000);
    const onData = (chunk: Buffer): void => {
      log += chunk.toString('utf8');
      const match = /^READY (\S+)$/m.exec(log);
      if (match?.[1]) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', (code) => reject(new Error(`the ${variant} server exited (${String(code)}): ${log}`)));
  });
  return { variant, url, child };
}

function stopServer({ child }: Server): Promise<void> {
  if (child.exitCode !== null) return Promise.resolve();
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.stdin?.end();
  child.kill('SIGTERM');
  return exited;
}

function payloads(sdl: string): string[] {
  return Array.from({ length: IDENTITIES }, (_, i) =>
    JSON.stringify({
      version: 1,
      stage: 'SupergraphRequest',
      control: 'continue',
      id: `bench-${i}`,
      headers: { 'content-type': ['application/json'], 'x-user-id': [`user-${i}`] },
      body: { query: EXAMPLE_QUERY },
      context: { entries: { 'accepts-json': true } },
      sdl,
      method: 'POST',
    }),
  );
}

function load(url: string, bodies: string[], connections: number, seconds: number): Promise<autocannon.Result> {
  return autocannon({
    url,
    connections,
    pipelining: 1,
    duration: seconds,
    requests: bodies.map((body) => ({ method: 'POST' as const, headers: { 'content-type': 'application/json' }, body })),
  });
}

async function check(server: Server, body: string): Promise<void> {
  const response = await fetch(server.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  const answer = (await response.json()) as { control?: unknown };
  if (response.status !== 200 || answer.control !== 'continue') throw new Error(`the ${server.variant} server answered ${response.status}: ${JSON.stringify(answer).slice(0, 300)}`);
}

async function timedRun(server: Server, bodies: string[], round: number, options: RouterBenchOptions): Promise<Run> {
  await load(server.url, bodies, options.connections, options.warmupSeconds);
  const cpuBefore = await processCpuUs(server.child.pid);
  const result = await load(server.url, bodies, options.connections, options.seconds);
  const cpuAfter = await processCpuUs(server.child.pid);
  const seconds = (result.finish.getTime() - result.start.getTime()) / 1000;
  const requests = result.requests.total;
  return {
    round,
    requestsPerSecond: requests / seconds,
    cpuUsPerRequest: (cpuAfter - cpuBefore) / requests,
    latencyP50Ms: result.latency.p50,
    latencyP99Ms: result.latency.p99,
    unexpected: result.non2xx + result.errors + result.timeouts,
  };
}

function summarize(runs: Run[]): VariantFigures {
  const rps = runs.map((r) => r.requestsPerSecond);
  const cpu = runs.map((r) => r.cpuUsPerRequest);
  return { runs, best: Math.max(...rps), median: median(rps), cpuUsPerRequest: Math.min(...cpu), cpuUsPerRequestMedian: median(cpu) };
}

export async function runRouterBench(redisUrl: string, overrides: Partial<RouterBenchOptions> = {}): Promise<RouterBenchResult> {
  const options = { ...DEFAULT_ROUTER_BENCH_OPTIONS, ...overrides };
  const sdl = compose(subgraphTypeDefs(), { products: 'http://products:4001', reviews: 'http://reviews:4002', inventory: 'http://inventory:4003' });
  const bodies = payloads(sdl);
  const servers: Server[] = [];
  try {
    for (const variant of VARIANTS) servers.push(await startServer(variant, redisUrl));
    for (const server of servers) await check(server, bodies[0]!);
    const runs: Record<Variant, Run[]> = { echo: [], coprocessor: [], reported: [] };
    for (let round = 1; round <= options.rounds; round++) {
      for (const server of servers) {
        const run = await timedRun(server, bodies, round, options);
        if (run.unexpected > 0) throw new Error(`the ${server.variant} server gave ${run.unexpected} answers other than 200 in round ${round}`);
        runs[server.variant].push(run);
        process.stderr.write(`  router: round ${round} ${server.variant}: ${run.requestsPerSecond.toFixed(0)} req/s, ${run.cpuUsPerRequest.toFixed(1)} µs CPU/request\n`);
      }
    }
    const variants = { echo: summarize(runs.echo), coprocessor: summarize(runs.coprocessor), reported: summarize(runs.reported) };
    const perRound = runs.echo.map((echo, i) => ({
      round: echo.round,
      coprocessor: runs.coprocessor[i]!.cpuUsPerRequest - echo.cpuUsPerRequest,
      reported: runs.reported[i]!.cpuUsPerRequest - echo.cpuUsPerRequest,
    }));
    return {
      connections: options.connections,
      seconds: options.seconds,
      rounds: options.rounds,
      payloadBytes: Buffer.byteLength(bodies[0]!),
      sdlBytes: Buffer.byteLength(sdl),
      variants,
      overheadUs: {
        coprocessor: variants.coprocessor.cpuUsPerRequest - variants.echo.cpuUsPerRequest,
        reported: variants.reported.cpuUsPerRequest - variants.echo.cpuUsPerRequest,
        perRound,
      },
      ratios: { coprocessorToEcho: variants.coprocessor.best / variants.echo.best, reportedToEcho: variants.reported.best / variants.echo.best },
    };
  } finally {
    await Promise.all(servers.map(stopServer));
  }
}

export function formatRouterBench(result: RouterBenchResult): string[] {
  const rows = VARIANTS.map((variant) => {
    const figures = result.variants[variant];
    return [
      variant,
      figures.best.toFixed(0),
      figures.median.toFixed(0),
      figures.runs.map((r) => r.requestsPerSecond.toFixed(0)).join(' '),
      figures.cpuUsPerRequest.toFixed(1),
      figures.runs.map((r) => r.cpuUsPerRequest.toFixed(1)).join(' '),
      median(figures.runs.map((r) => r.latencyP99Ms)).toFixed(1),
    ];
  });
  const spread = (pick: (round: { coprocessor: number; reported: number }) => number): string => {
    const values = result.overheadUs.perRound.map(pick);
    return `${Math.min(...values).toFixed(1)}–${Math.max(...values).toFixed(1)}`;
  };
  return [
    `SupergraphRequest payloads of ${result.payloadBytes} bytes (supergraph SDL ${result.sdlBytes} bytes), ${IDENTITIES} identities, ${result.connections} connections, ${result.rounds} rounds of ${result.seconds} s`,
    '',
    ...formatTable(['server (one process)', 'req/s best', 'median', 'runs', 'CPU µs/req', 'runs', 'p99 ms'], rows),
    '',
    `overhead of limiting, CPU per request over the echo peer: coprocessor ${result.overheadUs.coprocessor.toFixed(1)} µs (per round ${spread((r) => r.coprocessor)}), with report and refund record ${result.overheadUs.reported.toFixed(1)} µs (per round ${spread((r) => r.reported)})`,
    `requests/s against the echo peer (best runs): coprocessor ${result.ratios.coprocessorToEcho.toFixed(2)}×, with report and refund record ${result.ratios.reportedToEcho.toFixed(2)}×`,
  ];
}

export const routerBenchmark: Benchmark = {
  name: 'router',
  description: 'the Apollo Router coprocessor against an echo coprocessor: CPU per request and requests/s, one process each, 64 connections',
  async run({ redisUrl }): Promise<BenchReport> {
    const result = await runRouterBench(redisUrl);
    const targets: TargetCheck[] = [];
    return { lines: formatRouterBench(result), targets, figures: result };
  },
};
