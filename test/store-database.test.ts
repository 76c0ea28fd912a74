// The store keeps its buckets in the database its client uses now: the one
// the client was opened on, or the last it was switched to with SELECT,
// before or after the store was made. 0.3 ran its scripts on a duplicate of
// an ioredis client opened on the client's configured database, so a client
// switched with SELECT 5 kept its buckets in db 0, and a process configured
// with db 5 kept another bucket for the same identity (10 more admitted of 10).
import { Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { Rate } from '../src/rate.js';
import type { RedisStoreClient } from '../src/stores/redis-client.js';
import { RedisStore } from '../src/stores/redis-store.js';
import { TokenBucket } from '../src/token-bucket.js';
import { CLIENT_FAMILIES, openClient } from './support/client-families.js';
import type { ClientFamily, OpenedClient } from './support/client-families.js';
import { uniquePrefix } from './support/clients.js';

const url = inject('redisUrl');
const bucket = new TokenBucket('db', 10, Rate.perHour(1));

const admins = new Map<number, Redis>();
/** What `key` holds in database `db`. */
function inDb(db: number, key: string): Promise<string | null> {
  let admin = admins.get(db);
  if (admin === undefined) admins.set(db, (admin = new Redis(`${url}/${db}`)));
  return admin.get(key);
}

const opened: OpenedClient[] = [];
afterAll(async () => {
  await Promise.all(opened.map((o) => o.close().catch(() => undefined)));
  for (const admin of admins.values()) admin.disconnect();
});

async function connected(family: ClientFamily, db?: number): Promise<RedisStoreClient> {
  const client = openClient(family, { kind: 'redis', url: db === undefined ? url : `${url}/${db}` });
  opened.push(client);
  await client.connect();
  return client.client;
}

/** SELECT on the client, as the application would. */
async function select(client: RedisStoreClient, db: number): Promise<void> {
  const c = client as unknown as { select?: (db: number) => Promise<unknown>; SELECT?: (db: number) => Promise<unknown> };
  await (c.select ?? c.SELECT)!.call(client, db);
}

describe.each(CLIENT_FAMILIES)('%s', (family) => {
  it('a client switched with SELECT before the store is made keeps its buckets there', async () => {
    const client = await connected(family);
    await select(client, 5);
    const store = new RedisStore(client, { prefix: uniquePrefix(`db-before-${family}`) });
    expect(await store.acquire(bucket, 'k', 3)).toEqual({ allowed: true, remaining: 7 });
    const key = store.keyFor(bucket, 'k');
    expect(await inDb(5, key)).not.toBeNull();
    expect(await inDb(0, key)).toBeNull();
    await store.close();
  });

  it('a SELECT after the store is in use moves the calls made after it; those made before stay', async () => {
    const client = await connected(family);
    const store = new RedisStore(client, { prefix: uniquePrefix(`db-after-${family}`) });
    expect(await store.acquire(bucket, 'before', 1)).toEqual({ allowed: true, remaining: 9 });
    await select(client, 6);
    expect(await store.acquire(bucket, 'after', 1)).toEqual({ allowed: true, remaining: 9 });
    expect(await store.reset(bucket, 'before')).toBe(false); // in db 6, 'before' was never used
    expect([await inDb(0, store.keyFor(bucket, 'before')), await inDb(6, store.keyFor(bucket, 'before'))]).toEqual([expect.any(String), null]);
    expect([await inDb(0, store.keyFor(bucket, 'after')), await inDb(6, store.keyFor(bucket, 'after'))]).toEqual([null, expect.any(String)]);
    await store.close();
  });

  it('a process switched with SELECT 5 and one configured with db 5 share one bucket per identity', async () => {
    const prefix = uniquePrefix(`db-shared-${family}`);
    const switched = await connected(family);
    await select(switched, 5);
    const configured = await connected(family, 5);
    const one = new RedisStore(switched, { prefix });
    const other = new RedisStore(configured, { prefix });
    expect(await one.acquire(bucket, 'k', 6)).toEqual({ allowed: true, remaining: 4 });
    expect(await other.acquire(bucket, 'k', 4)).toEqual({ allowed: true, remaining: 0 });
    expect(await one.acquire(bucket, 'k', 1)).toMatchObject({ allowed: false });
    await Promise.all([one.close(), other.close()]);
  });
});
