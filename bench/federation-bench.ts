import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import type { Benchmark, BenchReport, TargetCheck } from './benchmark.js';
import { formatTable, formatTargets } from './benchmark.js';

/*
 * Apollo Gateway over the same three subgraphs, without a limiter and with
 * tokenBucketPlugin (RedisStore, priced from the supergraph), each gateway in
 * its own process, under load from this one. Rounds alternate the two so
 * drift on a busy machine hits both alike; the ratio of medians is the figure.
 */

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const SERVER_SCRIPT = join(ROOT, 'bench', 'federation-server.ts');
const QUERY = '{ products(first: 3) { id name price reviews { body author } shippingEstimate } }';
const VARIANTS = ['none', 'ours'] as const;
type FederationVariant = (typeof VARIANTS)[number];

/** Throughput with the plugin against without it, at least. */
export const TARGET_GATEWAY_RATIO = 0.9;
const CONNECTIONS = 20;
const SECONDS = 4;
const WARMUP_SECONDS = 1;
const ROUNDS = 5;

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
      const bad: Record<FederationVariant, number> = { none: 0, ours: 0 };
      for (let round = 0; round < ROUNDS; round++) {
        for (const gateway of round % 2 === 0 ? gateways : [...gateways].reverse()) {
          await load(gateway.url, WARMUP_SECONDS);
          const result = await load(gateway.url, SECONDS);
          rps[gateway.variant].push(result.requests.average);
          bad[gateway.variant] += result.non2xx + result.errors + result.timeouts;
        }
      }
      const none = median(rps.none);
      const ours = median(rps.ours);
      const ratio = ours / none;
      const targets: TargetCheck[] = [
        { label: `gateway with the plugin ≥ ${TARGET_GATEWAY_RATIO}× without`, pass: ratio >= TARGET_GATEWAY_RATIO && bad.ours + bad.none === 0, detail: `${ratio.toFixed(3)}× (${ours.toFixed(0)} vs ${none.toFixed(0)} req/s; ${bad.ours + bad.none} bad answers)` },
      ];
      const lines = [
        ...formatTable(
          ['variant', 'req/s (median)', 'rounds'],
          VARIANTS.map((v) => [v, median(rps[v]).toFixed(0), rps[v].map((r) => r.toFixed(0)).join(' / ')]),
        ),
        '',
        ...formatTargets(targets),
      ];
      return { lines, targets, figures: { rps, ratio, bad } };
    } finally {
      await Promise.all(gateways.map(stopGateway));
    }
  },
};
