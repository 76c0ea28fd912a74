import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import type { Benchmark, BenchReport, TargetCheck } from './benchmark.js';
import { formatTable, formatTargets } from './benchmark.js';

/*
 * Apollo Gateway over the same three subgraphs, without a limiter and with
 * tokenBucketPlugin (RedisStore, priced from the supergraph), each gateway
 * (and its subgraphs) in its own process, under load from this one. Short
 * runs alternate the two, and each pair of runs gives a ratio, so drift on a
 * busy machine hits both sides of a ratio alike; the median ratio is the
 * figure. The CPU time each process spends per request (Linux) is the
 * steadier one on a loaded machine: capacity is its inverse.
 */

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const SERVER_SCRIPT = join(ROOT, 'bench', 'federation-server.ts');
const QUERY = '{ products(first: 3) { id name price reviews { body author } shippingEstimate } }';
const VARIANTS = ['none', 'ours'] as const;
type FederationVariant = (typeof VARIANTS)[number];

/** Throughput with the plugin against without it, at least. */
export const TARGET_GATEWAY_RATIO = 0.9;
const CONNECTIONS = 10;
const SECONDS = 2;
const WARMUP_SECONDS = 2;
const PAIRS = 9;

/** User + system CPU time of a process in µs, from /proc (NaN elsewhere). */
function cpuUs(pid: number | undefined): number {
  try {
    const fields = readFileSync(`/proc/${String(pid)}/stat`, 'utf8').replace(/^.*\) /s, '').split(' ');
    // utime and stime are fields 14 and 15 of stat, 12 and 13 after the command name.
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / 100;
  } catch {
    return Number.NaN;
  }
}

interface Gateway {
  variant: FederationVariant;
  url: string;
  child: ChildProcess;
}

async function startGateway(variant: FederationVariant, redisUrl: string): Promise<Gateway> {
  const child = spawn(process.execPath, ['--import', 'tsx', SERVER_SCRIPT, variant, redisUrl], {
    cwd: ROOT,
    env: { ...process.env, NODE_ENV: 'production' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let log = '';
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the ${variant} gateway did not start in 60 s:\n${log}`)), 60_000);
    const onData = (chunk: Buffer): void => {
      log = (log + chunk.toString('utf8')).slice(-4000);
      const match = /^READY (\S+)$/m.exec(log);
      if (match?.[1]) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the ${variant} gateway exited with code ${String(code)}:\n${log}`));
    });
  });
  return { variant, url, child };
}

async function stopGateway({ child }: Gateway): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.stdin?.end();
  child.kill('SIGTERM');
  await exited;
}

function load(url: string, seconds: number): Promise<autocannon.Result> {
  return autocannon({
    url,
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-user-id': 'bench-user' },
    body: JSON.stringify({ query: QUERY }),
    connections: CONNECTIONS,
    pipelining: 1,
    duration: seconds,
  });
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}

export const federationBenchmark: Benchmark = {
  name: 'federation',
  description: 'Apollo Gateway over three subgraphs: with tokenBucketPlugin against without a limiter',
  async run({ redisUrl }): Promise<BenchReport> {
    const gateways: Gateway[] = [];
    try {
      for (const variant of VARIANTS) gateways.push(await startGateway(variant, redisUrl));
      const rps: Record<FederationVariant, number[]> = { none: [], ours: [] };
      const cpu: Record<FederationVariant, number[]> = { none: [], ours: [] };
      const bad: Record<FederationVariant, number> = { none: 0, ours: 0 };
      const ratios: number[] = [];
      for (const gateway of gateways) await load(gateway.url, WARMUP_SECONDS);
      for (let pair = 0; pair < PAIRS; pair++) {
        for (const gateway of pair % 2 === 0 ? gateways : [...gateways].reverse()) {
          const before = cpuUs(gateway.child.pid);
          const result = await load(gateway.url, SECONDS);
          rps[gateway.variant].push(result.requests.average);
          cpu[gateway.variant].push((cpuUs(gateway.child.pid) - before) / Math.max(1, result.requests.total));
          bad[gateway.variant] += result.non2xx + result.errors + result.timeouts;
        }
        ratios.push((rps.ours[pair] ?? 0) / (rps.none[pair] ?? 1));
      }
      const ratio = median(ratios);
      const cpuRatio = median(cpu.none) / median(cpu.ours);
      const targets: TargetCheck[] = [
        {
          label: `gateway with the plugin ≥ ${TARGET_GATEWAY_RATIO}× without (median of paired runs)`,
          pass: ratio >= TARGET_GATEWAY_RATIO && bad.ours + bad.none === 0,
          detail: `${ratio.toFixed(3)}× (${median(rps.ours).toFixed(0)} vs ${median(rps.none).toFixed(0)} req/s; ${bad.ours + bad.none} bad answers)`,
        },
        {
          label: `capacity with the plugin ≥ ${TARGET_GATEWAY_RATIO}× without (CPU per request)`,
          pass: !(cpuRatio < TARGET_GATEWAY_RATIO),
          detail: `${cpuRatio.toFixed(3)}× (${median(cpu.ours).toFixed(0)} vs ${median(cpu.none).toFixed(0)} µs per request)`,
        },
      ];
      const lines = [
        ...formatTable(
          ['variant', 'req/s (median)', 'CPU µs/request (median)', 'runs (req/s)'],
          VARIANTS.map((v) => [v, median(rps[v]).toFixed(0), median(cpu[v]).toFixed(0), rps[v].map((r) => r.toFixed(0)).join(' ')]),
        ),
        '',
        ...formatTargets(targets),
      ];
      return { lines, targets, figures: { rps, cpu, ratios, ratio, cpuRatio, bad } };
    } finally {
      await Promise.all(gateways.map(stopGateway));
    }
  },
};
