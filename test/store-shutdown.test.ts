// A service shutting down during a Redis outage disconnects its client while the client waits to
// reconnect. ioredis then emits no 'end', and the store's own connection, which closes with the client,
// went on reconnecting: the process never exited. It must exit as it would without the store (each
// scenario's process does, without one).
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Cluster as ValkeyCluster, Redis as ValkeyRedis } from 'iovalkey';
import { Cluster, Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { Rate } from '../src/rate.js';
import { RedisStore } from '../src/stores/redis-store.js';
import { TokenBucket } from '../src/token-bucket.js';
import { replyHoldingProxy } from './support/holding-proxy.js';

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

// A graceful quit() lets the calls in flight finish, the store's as the client's own: those whose replies
// are still on their way when the client has ended, and those made while the store's connection was
// still opening. Proxies hold the store's replies (or its connection's handshake) until the client's quit()
// has resolved, so each case is what it says every time. 0.3 closed the store's connection at the client's
// 'end', and every held call failed with "Connection is closed.".
describe.each(['ioredis', 'iovalkey'] as const)('%s: quit() with store calls in flight', (family) => {
  const answered = (call: Promise<unknown>): Promise<string> => call.then(() => 'ok', (error: Error) => `failed: ${error.message}`);
  const proxies: Awaited<ReturnType<typeof replyHoldingProxy>>[] = [];
  afterAll(async () => {
    await Promise.all(proxies.splice(0).map((p) => p.close()));
  });

  /** A client of `kind` through a reply-holding proxy per node, which holds a connection's replies from its first command naming `marker`. */
  async function throughProxies(kind: 'Redis' | 'Cluster', marker: string) {
    const targets = kind === 'Redis' ? [new URL(inject('redisUrl'))].map((u) => ({ host: u.hostname, port: Number(u.port) })) : inject('redisClusterNodes')!;
    const held = await Promise.all(targets.map((target) => replyHoldingProxy(target, marker)));
    proxies.push(...held);
    const addresses = held.map(({ url }) => new URL(url)).map((u) => ({ host: u.hostname, port: Number(u.port) }));
    const natMap = Object.fromEntries(targets.map((t, i) => [`${t.host}:${t.port}`, addresses[i]!]));
    const client: Redis | Cluster =
      kind === 'Redis'
        ? family === 'iovalkey'
          ? (new ValkeyRedis(held[0]!.url) as unknown as Redis)
          : new Redis(held[0]!.url)
        : family === 'iovalkey'
          ? (new ValkeyCluster(addresses, { natMap }) as unknown as Cluster)
          : new Cluster(addresses, { natMap });
    client.on('error', () => undefined);
    return { client, proxies: held };
  }

  /** The identities' buckets once more, through a client of their own: each call of `counts` was taken once. */
  async function expectTaken(kind: 'Redis' | 'Cluster', bucket: TokenBucket, counts: Map<string, number>): Promise<void> {
    const probe = kind === 'Redis' ? new Redis(inject('redisUrl')) : new Cluster(inject('redisClusterNodes')!);
    const store = new RedisStore(probe);
    for (const [key, taken] of counts) expect({ key, held: await store.acquire(bucket, key, 0) }).toEqual({ key, held: { allowed: true, remaining: bucket.capacity - taken } });
    await probe.quit();
  }

  it.each(['Redis', 'Cluster'] as const)('on a %s, the calls in flight are answered once the client has ended, and taken once', async (kind) => {
    const name = `quit-${family}-${kind}-${Date.now()}`;
    const bucket = new TokenBucket(name, 10_000, Rate.perHour(1));
    const { client, proxies: held } = await throughProxies(kind, name);
    const store = new RedisStore(client);
    const ids = Array.from({ length: 30 }, (_, i) => `id${i}`); // in every master's slots
    await Promise.all(ids.map((id) => store.acquire(bucket, id, 0))); // every connection open, the scripts loaded
    for (const proxy of held) proxy.arm();
    const calls = ids.flatMap((id) => [answered(store.acquire(bucket, id)), answered(store.acquire(bucket, id, 2))]);
    await Promise.all(held.map((proxy) => proxy.held())); // Redis ran them; their replies wait
    const own = Array.from({ length: 20 }, (_, i) => answered(client.get(`not-held-${i}`)));
    await client.quit(); // the client's own replies came: it has ended
    expect(await Promise.all(own)).toEqual(Array(20).fill('ok'));
    for (const proxy of held) proxy.release();
    expect(await Promise.all(calls)).toEqual(Array(calls.length).fill('ok'));
    await expectTaken(kind, bucket, new Map(ids.map((id) => [id, 3])));
  });

  it.each(['Redis', 'Cluster'] as const)('on a %s, calls made while the store\'s connection opens are answered, and taken once', async (kind) => {
    const name = `quit-open-${family}-${kind}-${Date.now()}`;
    const bucket = new TokenBucket(name, 10_000, Rate.perHour(1));
    // the client is connected; from now on the next connection's ready check (INFO) is held: the store's
    const { client, proxies: held } = await throughProxies(kind, 'info');
    await client.get('connected');
    for (const proxy of held) proxy.arm();
    const store = new RedisStore(client);
    const ids = Array.from({ length: 30 }, (_, i) => `id${i}`);
    const calls = ids.map((id) => answered(store.acquire(bucket, id)));
    if (kind === 'Redis') await held[0]!.held();
    await client.quit();
    for (const proxy of held) proxy.release();
    expect(await Promise.all(calls)).toEqual(Array(calls.length).fill('ok'));
    await expectTaken(kind, bucket, new Map(ids.map((id) => [id, 1])));
  });

  it('a call made after the client has ended fails at once, and takes nothing', async () => {
    const bucket = new TokenBucket(`quit-after-${family}`, 10, Rate.perHour(1));
    const { client } = await throughProxies('Redis', 'never');
    const store = new RedisStore(client);
    await store.acquire(bucket, 'k', 0);
    await client.quit();
    await expect(store.acquire(bucket, 'k', 1)).rejects.toThrow('Connection is closed.');
    await expectTaken('Redis', bucket, new Map([['k', 0]]));
  });
});
