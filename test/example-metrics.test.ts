// The example server with METRICS_PORT set serves the limiter's metrics for
// Prometheus: run as a user runs it (`npm start`), scraped as Prometheus does.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { postJson } from './support/adapters.js';
import { waitFor } from './support/graphql.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
let child: ChildProcess | undefined;

afterEach(async () => {
  if (child && child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((resolve) => child?.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  }
  child = undefined;
});

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

describe('the example server with METRICS_PORT', () => {
  it('serves /metrics for Prometheus with the decisions, costs and store durations', async () => {
    const [port, metricsPort] = [await freePort(), await freePort()];
    let output = '';
    child = spawn(process.execPath, ['--import', 'tsx', 'examples/server.ts'], {
      cwd: ROOT,
      env: { ...process.env, PORT: String(port), METRICS_PORT: String(metricsPort), REDIS_URL: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout?.on('data', (chunk: Buffer) => void (output += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => void (output += chunk.toString()));
    await waitFor('the example to say where its metrics are', 20_000, () => output.includes(`metrics for Prometheus at http://localhost:${metricsPort}/metrics`));

    const search = { query: '{ search(term: "book", first: 2) { title } }' };
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await postJson(`http://127.0.0.1:${port}/`, search, { 'x-user-id': 'metrics-reader' })).status);
    expect(statuses).toEqual([200, 200, 200, 200, 429]);

    const scrape = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
    expect(scrape.status).toBe(200);
    const text = await scrape.text();
    const sample = (line: string): number | undefined => {
      const match = text.split('\n').find((l) => l.startsWith(`${line} `));
      return match === undefined ? undefined : Number(match.slice(line.length + 1));
    };
    const scope = 'otel_scope_name="graphql-token-bucket"';
    expect(sample(`graphql_token_bucket_decisions_total{graphql_token_bucket_bucket="search",graphql_token_bucket_result="allowed",${scope}}`)).toBe(4);
    expect(sample(`graphql_token_bucket_decisions_total{graphql_token_bucket_bucket="search",graphql_token_bucket_result="denied",${scope}}`)).toBe(1);
    expect(sample(`graphql_token_bucket_decisions_total{graphql_token_bucket_bucket="api",graphql_token_bucket_result="allowed",${scope}}`)).toBe(4);
    expect(sample(`graphql_token_bucket_cost_estimated_sum{graphql_token_bucket_bucket="search",${scope}}`)).toBe(25);
    expect(sample(`graphql_token_bucket_store_duration_count{${scope}}`)).toBe(5);
    expect(text).toContain('# TYPE graphql_token_bucket_store_duration histogram');
    expect(text).toContain('# UNIT graphql_token_bucket_store_duration s');
  });
});
