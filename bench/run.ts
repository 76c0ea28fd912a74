/**
 * Runs the benchmarks against `REDIS_URL`, or a throwaway redis-server when
 * it is unset, prints a table per benchmark and a final `BENCH_JSON` line.
 *
 *   npm run bench                 # builds, then runs every benchmark
 *   npm run bench -- --only store
 *   npm run bench -- --only cost  # the cost analysis alone
 *   npm run bench -- --only flood
 *   npm run bench -- --only federation  # Apollo Gateway with the plugin against without
 *   npm run bench -- --only router  # the Apollo Router coprocessor against an echo coprocessor
 *   npm run bench -- --only clients  # node-redis and iovalkey vs ioredis, and the sizing figures
 */
import { Redis } from 'ioredis';
import type { Benchmark, BenchReport } from './benchmark.js';
import { formatTargets } from './benchmark.js';
import type { RedisServer } from './redis-server.js';
import { startRedisServer } from './redis-server.js';
import { floodBenchmark } from './flood-bench.js';
import { clientBenchmark } from './client-bench.js';
import { costBenchmark } from './graphql-cost.js';
import { federationBenchmark } from './federation-bench.js';
import { routerBenchmark } from './router-bench.js';
import { graphqlBenchmark } from './graphql-bench.js';
import { storeBenchmark } from './store-bench.js';

/** A mistake in how the benchmarks were invoked: reported without a stack. */
class UsageError extends Error {}

/** Every benchmark, in run order. Add new ones here (e.g. `graphqlBenchmark` from './graphql-bench.js'). */
const BENCHMARKS: readonly Benchmark[] = [storeBenchmark, clientBenchmark, graphqlBenchmark, costBenchmark, floodBenchmark, federationBenchmark, routerBenchmark];

function selected(argv: readonly string[]): readonly Benchmark[] {
  const only: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    if (arg === '--only') only.push(...(argv[++i] ?? '').split(','));
    else if (arg.startsWith('--only=')) only.push(...arg.slice('--only='.length).split(','));
    else throw new UsageError(`unknown argument ${JSON.stringify(arg)}; usage: bench/run.ts [--only ${BENCHMARKS.map((b) => b.name).join('|')}]`);
  }
  if (only.length === 0) return BENCHMARKS;
  const unknown = only.filter((name) => !BENCHMARKS.some((b) => b.name === name));
  if (unknown.length > 0) {
    throw new UsageError(`unknown benchmark ${unknown.join(', ')}; choose from ${BENCHMARKS.map((b) => b.name).join(', ')}`);
  }
  return BENCHMARKS.filter((b) => only.includes(b.name));
}

/** Benchmarks flush their database, so a REDIS_URL database must start empty. */
async function withDatabase<T>(redisUrl: string, work: (admin: Redis) => Promise<T>): Promise<T> {
  const admin = new Redis(redisUrl);
  try {
    const keys = await admin.dbsize();
    if (keys > 0) {
      throw new UsageError(`the Redis database holds ${keys} keys; the benchmarks flush it, so give REDIS_URL an empty one (e.g. redis://host:6379/15)`);
    }
    return await work(admin);
  } finally {
    await admin.quit().catch(() => undefined);
  }
}

async function main(): Promise<void> {
  const benchmarks = selected(process.argv.slice(2));
  let server: RedisServer | undefined;
  const figures: Record<string, unknown> = {};
  let failed = 0;
  try {
    const external = process.env.REDIS_URL;
    if (!external) server = await startRedisServer();
    const redisUrl = external ?? server?.url ?? '';
    console.log(`Redis: ${external ? 'REDIS_URL' : `throwaway redis-server at ${redisUrl}`}`);
    await withDatabase(redisUrl, async (admin) => {
      for (const benchmark of benchmarks) {
        console.log(`\n== ${benchmark.name}: ${benchmark.description}\n`);
        const started = performance.now();
        let report: BenchReport;
        try {
          report = await benchmark.run({ redisUrl });
        } finally {
          await admin.flushdb('SYNC');
        }
        for (const line of report.lines) console.log(line);
        console.log('');
        for (const line of formatTargets(report.targets)) console.log(line);
        failed += report.targets.filter((t) => !t.pass).length;
        console.log(`(${((performance.now() - started) / 1000).toFixed(1)} s)`);
        figures[benchmark.name] = { ...(report.figures as object), targets: report.targets };
      }
    });
  } finally {
    await server?.stop();
  }
  console.log(`\n${failed === 0 ? 'all targets met' : `${failed} target(s) missed (reported, not fatal)`}`);
  console.log(`BENCH_JSON ${JSON.stringify(figures)}`);
}

const stopOnSignal = (signal: NodeJS.Signals): void => {
  console.error(`\n${signal}: stopping`);
  // The 'exit' handler of redis-server.ts kills a throwaway server.
  process.exit(130);
};
process.once('SIGINT', stopOnSignal);
process.once('SIGTERM', stopOnSignal);

main().then(
  () => process.exit(0),
  (error: unknown) => {
    if (error instanceof UsageError) {
      console.error(error.message);
      process.exit(2);
    }
    console.error(error instanceof Error ? (error.stack ?? error.message) : error);
    process.exit(1);
  },
);
