import { afterAll, describe, expect, inject, it } from 'vitest';
import type { Redis } from 'ioredis';
import { clusterClient, redisClient, uniquePrefix } from './support/clients.js';
import { startRedisServer } from './support/redis-server.js';
import type { RedisServerProcess } from './support/redis-server.js';

const TOTAL_SLOTS = 16_384;

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('the Redis provided by the global setup', () => {
  it('answers PING and reports its version', async () => {
    const client = redisClient(inject('redisUrl'));
    try {
      expect(await client.ping()).toBe('PONG');
      expect(await client.info('server')).toMatch(/redis_version:\d+\.\d+\.\d+/);
    } finally {
      client.disconnect();
    }
  });

  it('is a Redis Cluster of 3 masters covering all 16384 slots', async () => {
    const cluster = clusterClient(inject('redisClusterNodes'));
    try {
      const prefix = uniquePrefix('redis setup');
      // Keys spread over many slots, so every master serves some.
      const keys = Array.from({ length: 30 }, (_, i) => `${prefix}${i}`);
      await Promise.all(keys.map((key) => cluster.set(key, key, 'EX', 60)));
      expect(await Promise.all(keys.map((key) => cluster.get(key)))).toEqual(keys);

      expect(cluster.nodes('master')).toHaveLength(3);
      const slots = (await cluster.cluster('SLOTS')) as [number, number, ...unknown[]][];
      expect(slots).toHaveLength(3);
      const covered = slots.reduce((sum, [first, last]) => sum + last - first + 1, 0);
      expect(covered).toBe(TOTAL_SLOTS);
      for (const node of cluster.nodes('master')) {
        const info = String(await node.cluster('INFO'));
        expect(info).toContain('cluster_state:ok');
        expect(info).toContain(`cluster_slots_ok:${TOTAL_SLOTS}`);
      }
    } finally {
      cluster.disconnect();
    }
  });
});

describe('startRedisServer', () => {
  let server: RedisServerProcess | undefined;
  let client: Redis | undefined;
  afterAll(async () => {
    client?.disconnect();
    await server?.stop();
  });

  it('starts on a free port and can be crashed, restarted, paused and resumed', async () => {
    server = await startRedisServer();
    expect(server.url).toBe(`redis://127.0.0.1:${server.port}`);
    client = redisClient(server.url);
    client.on('error', () => {}); // the crash below is on purpose
    await client.set('k', 'v');
    expect(await client.get('k')).toBe('v');

    const crashed = server.pid;
    await server.kill();
    expect(isAlive(crashed)).toBe(false);

    await server.restart();
    expect(server.pid).not.toBe(crashed);
    // Same port, so the same client reconnects by itself; the data is gone.
    expect(await client.get('k')).toBeNull();

    await server.pause();
    const pong = client.ping();
    const first = await Promise.race([pong, new Promise((resolve) => setTimeout(() => resolve('no answer'), 300))]);
    expect(first).toBe('no answer');
    await server.resume();
    expect(await pong).toBe('PONG');

    const pid = server.pid;
    await server.stop();
    expect(isAlive(pid)).toBe(false);
    await server.stop(); // idempotent
  });

  it('stops a paused server', async () => {
    const paused = await startRedisServer({ args: ['--maxmemory', '10mb'] });
    const pid = paused.pid;
    try {
      await paused.pause();
    } finally {
      await paused.stop();
    }
    expect(isAlive(pid)).toBe(false);
  });
});

describe('clusterClient', () => {
  it('fails with instructions when there is no cluster', () => {
    expect(() => clusterClient(null)).toThrow(/REDIS_CLUSTER_NODES/);
  });
});

describe('uniquePrefix', () => {
  it('is unique and uses only letters, digits and colons', () => {
    const prefixes = new Set(Array.from({ length: 100 }, () => uniquePrefix('a {weird} label!')));
    expect(prefixes.size).toBe(100);
    for (const prefix of prefixes) expect(prefix).toMatch(/^[A-Za-z0-9:]+$/);
  });
});
