// Every `<!-- run: SETUP -->` block of the manual, run as a reader runs it
// (bash, in the repository's root) against the server SETUP names, and what
// it prints compared with the block that follows it. The blocks of one page
// and setup share one server and run in the page's order, as a reader types
// them. `localhost:4000` in a command is the server started here, and
// GRAPHQL_URL is its URL.
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { buckets, startExampleServer } from '../examples/app.js';
import { startSubgraphs } from '../examples/federation/subgraphs.js';
import { MemoryStore } from '../src/index.js';
import { redisClient } from './support/clients.js';
import { codeBlocks, manualPages, outputDifference } from './support/docs-blocks.js';
import type { CodeBlock } from './support/docs-blocks.js';
import { ROOT, freePort, startExample } from './support/example-process.js';

const run = promisify(execFile);

interface Server {
  port: number;
  /** More `from → to` replacements in the commands (another port the server listens on). */
  replace?: Record<string, string>;
  stop(): Promise<void>;
}

const silent = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} };

/** The servers a block may run against, by the name its mark gives. */
const SETUPS: Record<string, () => Promise<Server>> = {
  // `METRICS_PORT=9464 npm start`: the example server and its Prometheus metrics.
  'example-server-metrics': async () => {
    const metricsPort = await freePort();
    const example = await startExample('examples/server.ts', { REDIS_URL: '', METRICS_PORT: String(metricsPort) });
    try {
      await example.waitFor(/metrics for Prometheus at/);
    } catch (error) {
      await example.stop();
      throw error;
    }
    return { port: example.port, replace: { 'localhost:9464': `localhost:${metricsPort}` }, stop: () => example.stop() };
  },
  // No server: the block runs a program on its own.
  none: () => Promise.resolve({ port: 4000, stop: () => Promise.resolve() }),
  // The README's quick start as it tells a reader to start it.
  'quick-start': () => spawned('examples/quick-start.ts', { NODE_ENV: 'production' }),
  'measure-mode': () => spawned('examples/measure-mode.ts'),
  rules: () => spawned('examples/rules.ts'),
  'code-first': () => spawned('examples/code-first.ts'),
  pothos: () => spawned('examples/pothos.ts'),
  // docs/getting-started.md's server on this suite's Redis, its user's bucket emptied first.
  'apollo-server': async () => {
    const redisUrl = inject('redisUrl');
    const redis = redisClient(redisUrl);
    await redis.del('tb:{ann}search');
    redis.disconnect();
    const example = await startExample('examples/apollo-server.ts', { NODE_ENV: 'production', REDIS_URL: redisUrl });
    await example.waitFor(/ready at http:\/\/localhost:\d+\//);
    return example;
  },
  // The federation examples: the subgraphs, then a gateway over them (a user's bucket emptied first).
  'apollo-gateway': () => gateway('examples/apollo-gateway.ts', 'ann', /gateway ready at http:\/\/localhost:\d+\//),
  'hive-gateway': () => gateway('examples/hive-gateway.ts', 'bob', /gateway ready at http:\/\/localhost:\d+\/graphql/, true),
  // `npm start`'s server, on a clock that stands still: commands run back to
  // back, so a bucket that refills 17 tokens a second shows the same numbers
  // however slow this machine is.
  'example-server': async () => {
    const now = Date.now();
    const example = await startExampleServer({ store: new MemoryStore({ now: () => now }), port: 0, logger: silent });
    return { port: Number(new URL(example.url).port), stop: () => example.stop() };
  },
  // `npm start`'s server on the real clock, for clients that wait out a refusal.
  'example-server-live': async () => {
    const example = await startExampleServer({ store: new MemoryStore(), port: 0, logger: silent });
    return { port: Number(new URL(example.url).port), stop: () => example.stop() };
  },
};

/** An example that prints `ready at http://localhost:<port>/` once it serves. */
async function spawned(file: string, env: Record<string, string> = {}): Promise<Server> {
  const example = await startExample(file, env);
  try {
    await example.waitFor(/ready at http:\/\/localhost:\d+\//);
  } catch (error) {
    await example.stop();
    throw error;
  }
  return example;
}

async function gateway(file: string, user: string, ready: RegExp, composed = false): Promise<Server> {
  const subgraphs = await startSubgraphs({ products: 0, reviews: 0, inventory: 0 });
  const env: Record<string, string> = {
    REDIS_URL: inject('redisUrl'),
    PRODUCTS_URL: subgraphs.urls.products,
    REVIEWS_URL: subgraphs.urls.reviews,
    INVENTORY_URL: subgraphs.urls.inventory,
  };
  if (composed) {
    // As the page says: `npx tsx examples/federation/supergraph.ts > supergraph.graphql`.
    const { stdout } = await run(process.execPath, ['--import', 'tsx', 'examples/federation/supergraph.ts'], { cwd: ROOT, env: { ...process.env, ...env } });
    const file = join(mkdtempSync(join(tmpdir(), 'supergraph-')), 'supergraph.graphql');
    writeFileSync(file, stdout);
    env.SUPERGRAPH = file;
  }
  const redis = redisClient(env.REDIS_URL ?? '');
  await redis.del(`tb:{${user}}api`);
  redis.disconnect();
  const example = await startExample(file, env);
  try {
    await example.waitFor(ready);
  } catch (error) {
    await Promise.all([example.stop(), subgraphs.stop()]);
    throw error;
  }
  return { port: example.port, stop: async () => void (await Promise.all([example.stop(), subgraphs.stop()])) };
}

interface Scenario {
  page: string;
  setup: string;
  steps: { command: CodeBlock; output: CodeBlock }[];
}

const scenarios = new Map<string, Scenario>();
for (const page of manualPages(ROOT)) {
  const list = codeBlocks(ROOT, page);
  list.forEach((block, i) => {
    const output = list[i + 1];
    if (block.mark?.kind !== 'run' || output === undefined) return;
    const setup = block.mark.value;
    const key = `${page} (${setup})`;
    const scenario = scenarios.get(key) ?? { page, setup, steps: [] };
    scenario.steps.push({ command: block, output });
    scenarios.set(key, scenario);
  });
}

const running: Server[] = [];
afterAll(async () => {
  await Promise.all(running.map((server) => server.stop()));
});

describe.concurrent('what the manual says its commands print', () => {
  it.each([...scenarios.entries()])('%s', async (_, scenario) => {
    const start = SETUPS[scenario.setup];
    expect(start, `${scenario.page}: no setup named "${scenario.setup}" in test/docs-output.test.ts`).toBeDefined();
    const server = await start!();
    running.push(server);
    try {
      for (const { command, output } of scenario.steps) {
        let script = command.text.replaceAll('localhost:4000', `localhost:${server.port}`);
        for (const [from, to] of Object.entries(server.replace ?? {})) script = script.replaceAll(from, to);
        const started = performance.now();
        const { stdout } = await run('bash', ['-c', script], {
          cwd: ROOT,
          env: { ...process.env, GRAPHQL_URL: `http://localhost:${server.port}/` },
          timeout: 90_000,
        });
        const difference = outputDifference(output.text, stdout, (performance.now() - started) / 1000);
        expect(difference, `${command.page}:${command.line} printed something else than ${output.page}:${output.line} shows, at ${difference ?? ''}\n--- printed:\n${stdout}`).toBeUndefined();
      }
    } finally {
      await server.stop();
    }
  }, 400_000);
});

// The example's buckets are the ones the manual's numbers assume.
it('the example server keeps the buckets the manual describes', () => {
  expect(Object.fromEntries(Object.entries(buckets).map(([name, b]) => [name, [b.capacity, b.rate.tokens, b.rate.periodMs]]))).toEqual({
    api: [1000, 1000, 60_000],
    search: [20, 1, 3000],
    export: [500, 500, 60_000],
    login: [5, 5, 60_000],
    live: [10, 10, 60_000],
  });
});
