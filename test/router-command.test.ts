// The graphql-token-bucket-router command, started as a child process as a
// team without Node code of its own runs it: its start-up line, health
// endpoint, a request, SIGTERM, and a clear error for every bad way to call
// or configure it.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { Rate, RedisStore, TokenBucket } from '../src/index.js';
import { redisClient } from './support/clients.js';
import { EXAMPLE_QUERY, compose, subgraphTypeDefs } from './support/federation.js';
import { waitFor } from './support/graphql.js';
import { supergraphRequestPayload, supergraphResponsePayload } from './support/router.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const CLI = join(root, 'src/router/cli.ts');
const redisUrl = inject('redisUrl');
const redis = redisClient(redisUrl);
const SDL = compose(subgraphTypeDefs(), { products: 'http://products:4001', reviews: 'http://reviews:4002', inventory: 'http://inventory:4003' });
const dir = mkdtempSync(join(tmpdir(), 'router-command-'));
const children: ChildProcess[] = [];

afterAll(() => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  redis.disconnect();
});

function config(name: string, source: string): string {
  const file = join(dir, name);
  writeFileSync(file, source);
  return file;
}

const LIMITS = config(
  'limits.mjs',
  `export default ({ TokenBucket, Rate }) => ({
    buckets: [new TokenBucket('api', 1000, Rate.perHour(1))],
    identify: async (request) => {
      // A request that names a delay holds its answer that long: a request in flight at shutdown.
      const wait = Number(request.headers['x-hold-ms']?.[0] ?? 0);
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      return request.headers['x-user-id']?.[0] ?? 'anonymous';
    },
    reportCost: true,
    refundUnusedCost: true,
  });`,
);

interface Command {
  child: ChildProcess;
  out: () => string;
  err: () => string;
  exited: Promise<number | null>;
}

function run(args: string[], env: Record<string, string | undefined> = {}): Command {
  const child = spawn(process.execPath, ['--import', 'tsx', CLI, ...args], {
    cwd: root,
    env: { ...process.env, REDIS_URL: undefined, GRAPHQL_TOKEN_BUCKET_SECRET: undefined, ...env } as NodeJS.ProcessEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let out = '';
  let err = '';
  child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (err += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, out: () => out, err: () => err, exited };
}

/** Starts the command on a free port; its URL once its start-up line is out. */
async function serve(env: Record<string, string | undefined> = {}): Promise<Command & { url: string }> {
  const command = run(['--config', LIMITS, '--port', '0'], env);
  await waitFor('the start-up line', 30_000, () => / on http:\/\/127\.0\.0\.1:\d+\//.test(command.out()) || command.child.exitCode !== null);
  const match = / on (http:\/\/127\.0\.0\.1:\d+\/)/.exec(command.out());
  if (!match) throw new Error(`the command did not start: ${command.err()}`);
  return { ...command, url: match[1]! };
}

async function post(url: string, payload: unknown): Promise<Record<string, unknown>> {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(payload) });
  expect(response.status).toBe(200);
  return (await response.json()) as Record<string, unknown>;
}

describe('graphql-token-bucket-router', () => {
  it('serves on RedisStore with REDIS_URL: start-up line, health, a request at both stages, SIGTERM', async () => {
    const user = `command-user-${process.pid}-${Date.now()}`;
    // A Redis without a password takes one it does not need (ioredis warns); the line must not show it.
    const withPassword = new URL(redisUrl);
    withPassword.password = 'never-shown';
    const command = await serve({ REDIS_URL: withPassword.toString() });
    expect(command.out()).not.toContain('never-shown');
    expect(command.out()).toMatch(
      new RegExp(`^graphql-token-bucket-router: serving Apollo Router's coprocessor protocol \\(version 1\\) on http://127\\.0\\.0\\.1:\\d+/ \\(health: GET /health\\), store: RedisStore at redis://127\\.0\\.0\\.1:\\d+/?\\S*, buckets: api \\(1000, 1 per 3600000 ms\\)\\n$`),
    );
    expect(command.err()).not.toContain('never-shown');
    const health = await fetch(`${command.url}health`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: 'ok' });

    const request = supergraphRequestPayload({ query: EXAMPLE_QUERY, headers: { 'x-user-id': user } }, SDL);
    const admitted = await post(command.url, request);
    expect(admitted['control']).toBe('continue');
    const check = await new RedisStore(redis).checkAll([{ bucket: new TokenBucket('api', 1000, Rate.perHour(1)), key: user, cost: 1 }]);
    expect(check.remaining).toEqual([931]);
    const entries = (admitted['context'] as { entries: Record<string, unknown> }).entries;
    const response = await post(command.url, supergraphResponsePayload(request['id'] as string, { data: { products: [] } }, entries));
    expect((response['body'] as Record<string, unknown>)['extensions']).toEqual({ rateLimit: { api: { cost: 69, actualCost: 0, remaining: 1000, capacity: 1000 } } });

    command.child.kill('SIGTERM');
    expect(await command.exited).toBe(0);
    expect(command.out()).toContain('graphql-token-bucket-router: SIGTERM: finishing the requests in flight, then closing the store\ngraphql-token-bucket-router: stopped\n');
  });

  it('without REDIS_URL serves on MemoryStore, saying so, and finishes a request in flight at SIGTERM', async () => {
    const command = await serve();
    expect(command.out()).toContain('store: MemoryStore (this process only)');
    expect(command.err()).toContain("REDIS_URL is not set, so tokens are kept in this process's memory (MemoryStore)");
    const held = post(command.url, supergraphRequestPayload({ query: EXAMPLE_QUERY, headers: { 'x-user-id': 'held', 'x-hold-ms': '700' } }, SDL));
    await new Promise((resolve) => setTimeout(resolve, 200));
    command.child.kill('SIGTERM');
    expect((await held)['control']).toBe('continue');
    expect(await command.exited).toBe(0);
  });

  it('prints its usage with --help', async () => {
    const command = run(['--help']);
    expect(await command.exited).toBe(0);
    expect(command.out()).toMatch(/^Usage: graphql-token-bucket-router --config <module> \[--port <port>\] \[--host <address>\]/);
  });

  it.each([
    [['--port', '8081'], 2, /--config is required/],
    [['--config', LIMITS, '--port', 'eighty'], 2, /--port must be a port number \(0-65535\), got "eighty"/],
    [['--config', LIMITS, '--verbose'], 2, /Unknown option '--verbose'/],
    [['--config', join(dir, 'missing.mjs')], 1, /cannot load the config .*missing\.mjs/],
    [['--config', config('typo.mjs', 'export default { buckets: [], identify: () => 1, refundUnusedCosts: true }')], 1, /routerCoprocessor has no option "refundUnusedCosts"/],
    [['--config', config('store.mjs', 'export default { store: {}, buckets: [], identify: () => 1 }')], 1, /sets "store": the command makes it/],
    [['--config', config('nothing.mjs', 'export const limits = {}')], 1, /must export default the coprocessor's options .* got undefined/],
    [['--config', config('buckets.mjs', "export default { buckets: [{ name: 'api' }], identify: () => 1 }")], 1, /option "buckets" must hold only TokenBucket instances/],
  ])('refuses %j with exit code %i and a clear error', async (args, code, message) => {
    const command = run(args as string[]);
    expect(await command.exited).toBe(code);
    expect(command.err()).toMatch(new RegExp(`^graphql-token-bucket-router: (.* )?${(message as RegExp).source}`));
    expect(command.err()).not.toMatch(/\n\s+at /);
  });

  it('exits 1 with a clear error when its port is taken', async () => {
    const first = await serve();
    const port = new URL(first.url).port;
    const second = run(['--config', LIMITS, '--port', port]);
    expect(await second.exited).toBe(1);
    expect(second.err()).toMatch(new RegExp(`graphql-token-bucket-router: cannot listen on 127\\.0\\.0\\.1:${port}: listen EADDRINUSE`));
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
  });
});
