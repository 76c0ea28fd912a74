// The store's own connection (ioredis, iovalkey) reconnects with the client's
// options as they are then, not as they were when it first opened. Credentials
// rotated the way ioredis supports (the server's password changed, then the
// client's `options.password` set, and its connection reconnecting with it)
// reach the store's connection too: it used to reconnect with the password it
// opened with and answer every call WRONGPASS for as long as the process ran,
// while the client itself worked.
import { Redis } from 'ioredis';
import { Redis as ValkeyRedis } from 'iovalkey';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { Rate } from '../src/rate.js';
import { RedisStore } from '../src/stores/redis-store.js';
import { TokenBucket } from '../src/token-bucket.js';
import { uniquePrefix } from './support/clients.js';

const url = new URL(inject('redisUrl'));
const bucket = new TokenBucket('credentials', 10, Rate.perHour(1));
const admin = new Redis(url.href);
afterAll(() => admin.disconnect());

type Options = { host: string; port: number; username: string; password: string };
const families = {
  ioredis: (options: Options) => new Redis(options),
  iovalkey: (options: Options) => new ValkeyRedis(options),
} as const;

/** Resolves with the next event `name` of `emitter`. */
const next = (emitter: { once(name: string, listener: () => void): unknown }, name: string): Promise<void> =>
  new Promise((resolve) => emitter.once(name, () => resolve()));

describe.each(Object.keys(families) as (keyof typeof families)[])('%s', (family) => {
  it('a password rotated on the server and in the client options reaches the store once its connection reconnects', async () => {
    const user = uniquePrefix(`rotated-${family}`).replace(/\W/g, '');
    await admin.call('ACL', 'SETUSER', user, 'on', '>before', '~*', '&*', '+@all');
    const client = families[family]({ host: url.hostname, port: Number(url.port), username: user, password: 'before' });
    const store = new RedisStore(client, { prefix: uniquePrefix(`rotated-${family}`) });
    try {
      expect(await store.acquire(bucket, 'k', 1)).toEqual({ allowed: true, remaining: 9 });
      // rotated: the new password on the server, in the client's options, and every connection of the user dropped
      await admin.call('ACL', 'SETUSER', user, 'resetpass', '>after');
      client.options.password = 'after';
      const ready = next(client, 'ready');
      await admin.call('CLIENT', 'KILL', 'USER', user);
      await ready;
      expect(await client.ping()).toBe('PONG');
      expect(await store.acquire(bucket, 'k', 1)).toEqual({ allowed: true, remaining: 8 });
      expect(await store.acquire(bucket, 'k', 1)).toEqual({ allowed: true, remaining: 7 });
    } finally {
      await store.close();
      client.disconnect();
      await admin.call('ACL', 'DELUSER', user);
    }
  });
});
