import type { Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { redisClient } from './clients.js';
import { startRedisServer } from './redis-server.js';
import type { RedisServerProcess } from './redis-server.js';

/** A Redis server of one test file's own: INFO commandstats then counts only the calls that file's stores make. */
export interface OwnRedis {
  /** The client to build stores on. */
  readonly client: Redis;
  /** Calls per command since the last `resetStats`, the counting's own (INFO, CONFIG) left out; commands a script runs inside Redis count too. */
  commandCalls(): Promise<Record<string, number>>;
  /** EVALSHA and EVAL calls since the last reset: only these tell round trips apart. */
  scriptCalls(): Promise<{ evalsha: number; eval: number }>;
  /** EVALSHA + EVAL calls since the last reset: one per store call. */
  roundTrips(): Promise<number>;
  resetStats(): Promise<void>;
}

/** Starts the server before the file's tests (call it at the top level) and stops it after them. */
export function ownRedis(): OwnRedis {
  let server: RedisServerProcess | undefined;
  let client: Redis | undefined;
  let admin: Redis | undefined;

  beforeAll(async () => {
    server = await startRedisServer();
    client = redisClient(server.url);
    admin = redisClient(server.url);
    await Promise.all([client.ping(), admin.ping()]);
  });

  afterAll(async () => {
    client?.disconnect();
    admin?.disconnect();
    await server?.stop();
  });

  const started = (redis: Redis | undefined): Redis => {
    if (redis === undefined) throw new Error('ownRedis() is used before its beforeAll has started the server');
    return redis;
  };

  const commandCalls = async (): Promise<Record<string, number>> => {
    const info = await started(admin).info('commandstats');
    const calls: Record<string, number> = {};
    for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
      if (!/^(info|config)\b/.test(match[1]!)) calls[match[1]!] = Number(match[2]);
    }
    return calls;
  };

  const scriptCalls = async (): Promise<{ evalsha: number; eval: number }> => {
    const calls = await commandCalls();
    return { evalsha: calls['evalsha'] ?? 0, eval: calls['eval'] ?? 0 };
  };

  return {
    get client() {
      return started(client);
    },
    commandCalls,
    scriptCalls,
    roundTrips: async () => {
      const calls = await scriptCalls();
      return calls.evalsha + calls.eval;
    },
    resetStats: async () => {
      await started(admin).config('RESETSTAT');
    },
  };
}
