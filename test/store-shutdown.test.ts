// A service shutting down during a Redis outage disconnects its client while the client waits to
// reconnect. ioredis then emits no 'end', and the store's own connection, which closes with the client,
// went on reconnecting: the process never exited. It must exit as it would without the store (each
// scenario's process does, without one).
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Cluster as ValkeyCluster, Redis as ValkeyRedis } from 'iovalkey';
import { Cluster, Redis } from 'ioredis';
import { describe, expect, inject, it } from 'vitest';
import { Rate } from '../src/rate.js';
import { RedisStore } from '../src/stores/redis-store.js';
import { TokenBucket } from '../src/token-bucket.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const CHILD = join(ROOT, 'test', 'support', 'disconnect-child.ts');

/** Runs the child; resolves with its output once it exits, or says it did not within `ms` of shutting down. */
function runChild(args: readonly string[], ms: number): Promise<{ exited: boolean; output: string[] }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', CHILD, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    const output: string[] = [];
    let stderr = '';
    child.stderr.on('data', (text: Buffer) => (stderr += text.toString()));
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (text: string) => output.push(...text.split('\n').filter((line) => line !== '')));
    // a hang guard, started once the child has shut down
    let timer: NodeJS.Timeout | undefined;
    const guard = setInterval(() => {
      if (!output.includes('disconnected') || timer) return;
      timer = setTimeout(() => {
        child.kill('SIGKILL');
        resolve({ exited: false, output });
      }, ms);
    }, 20);
    child.on('exit', (code) => {
      clearInterval(guard);
      clearTimeout(timer);
      if (code !== 0 && code !== null) reject(new Error(`child exited ${code}: ${stderr}`));
      else resolve({ exited: true, output });
    });
  });
}

describe.each(['ioredis', 'iovalkey'] as const)('%s: a process whose client is disconnected while it waits to reconnect', (family) => {
  const key = (): string => `${family}-${Date.now()}`;

  it('exits, its store in use when Redis went away', async () => {
    const { exited, output } = await runChild([family, 'redis', inject('redisUrl'), key()], 8_000);
    expect(output).toEqual([JSON.stringify({ allowed: true, remaining: 4 }), 'disconnected']);
    expect(exited).toBe(true);
  }, 30_000);

  it('exits, its store made while the client waited to reconnect', async () => {
    const { exited, output } = await runChild([family, 'late', inject('redisUrl'), key()], 8_000);
    expect(output).toContain('disconnected');
    expect(exited).toBe(true);
  }, 30_000);

  it('exits on a Cluster, and a call made after the shutdown fails', async () => {
    const { exited, output } = await runChild([family, 'cluster', JSON.stringify(inject('redisClusterNodes')), key()], 8_000);
    expect(output.slice(0, 2)).toEqual([JSON.stringify({ allowed: true, remaining: 4 }), 'disconnected']);
    expect(output[2]).toMatch(/^a later call failed/);
    expect(exited).toBe(true);
  }, 30_000);
});

// A graceful quit() lets the calls in flight finish, the store's as the client's own.
describe.each(['ioredis', 'iovalkey'] as const)('%s: quit() with store calls in flight', (family) => {
  const bucket = new TokenBucket('quit', 10_000, Rate.perHour(1));
  const answered = (call: Promise<unknown>): Promise<string> => call.then(() => 'ok', (error: Error) => `failed: ${error.message}`);

  // (On a Cluster, and on a Redis whose store connection is still opening, calls in flight at quit() may
  // still fail: the store's connection closes at the client's 'end'.)
  it.each(['Redis'] as const)('on a %s, every call in flight is answered and taken once', async (kind) => {
    const nodes = inject('redisClusterNodes')!;
    const connect = (): Redis | Cluster => {
      const c =
        kind === 'Redis'
          ? family === 'iovalkey'
            ? (new ValkeyRedis(inject('redisUrl')) as unknown as Redis)
            : new Redis(inject('redisUrl'))
          : family === 'iovalkey'
            ? (new ValkeyCluster(nodes) as unknown as Cluster)
            : new Cluster(nodes);
      c.on('error', () => undefined);
      return c;
    };
    const client = connect();
    const store = new RedisStore(client);
    const key = `quit-${family}-${kind}-${Date.now()}`;
    await store.acquire(bucket, key); // the connections are open
    const own = Array.from({ length: 50 }, () => answered(client.get(store.keyFor(bucket, key))));
    const calls = Array.from({ length: 50 }, () => answered(store.acquire(bucket, key)));
    await client.quit();
    expect(await Promise.all(own)).toEqual(Array(50).fill('ok'));
    expect(await Promise.all(calls)).toEqual(Array(50).fill('ok'));
    const probe = connect();
    const probeStore = new RedisStore(probe);
    expect(await probeStore.acquire(bucket, key, 0)).toEqual({ allowed: true, remaining: 10_000 - 51 });
    await probe.quit();
  });
});
