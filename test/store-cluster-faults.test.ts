// An operation whose buckets span several Redis Cluster hash slots is taken
// slot by slot; when a later slot denies or fails, the slots already taken
// are given back, each at most once, whatever fails and when. Here a later
// slot's master is paused (SIGSTOP), on a cluster of this file's own so that
// no other test feels it.
import type { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Rate } from '../src/rate.js';
import { RedisStore } from '../src/stores/redis-store.js';
import { TokenBucket } from '../src/token-bucket.js';
import { clusterClient, uniquePrefix } from './support/clients.js';
import type { RedisClusterProcess } from './support/redis-server.js';
import { startRedisCluster } from './support/redis-server.js';

const MASTERS = 3;
const SLOTS = 16_384;

let cluster: RedisClusterProcess;
let client: Cluster;

beforeAll(async () => {
  cluster = await startRedisCluster({ masters: MASTERS, nodeTimeoutMs: 15_000 });
  // Fail fast: a paused master costs a call 300 ms, not the test timeout.
  client = clusterClient(cluster.nodes, { redisOptions: { commandTimeout: 300, maxRetriesPerRequest: 0 } });
}, 60_000);

afterAll(async () => {
  await client?.quit().catch(() => undefined);
  await cluster?.stop();
});

/** Index of the master serving `key`: the cluster splits the slots evenly, in order. */
async function masterOf(key: string): Promise<number> {
  const slot = Number(await client.call('CLUSTER', 'KEYSLOT', key));
  return Math.floor((slot * MASTERS) / SLOTS);
}

/** One identity per master, so that each sits in a slot of its own master. */
async function identitiesOnEachMaster(store: RedisStore, bucket: TokenBucket): Promise<string[]> {
  const found = new Map<number, string>();
  for (let i = 0; found.size < MASTERS; i++) {
    const id = `user-${i}`;
    const master = await masterOf(store.keyFor(bucket, id));
    if (!found.has(master)) found.set(master, id);
  }
  return [...found.entries()].sort(([a], [b]) => a - b).map(([, id]) => id);
}

describe('RedisStore on a Redis Cluster whose master hangs', () => {
  const api = new TokenBucket('api', 10, Rate.perHour(1));

  async function holds(store: RedisStore, key: string): Promise<number> {
    const answer = await store.acquire(api, key, 0);
    return answer.allowed ? answer.remaining : -1;
  }

  async function whilePaused<T>(master: number, work: () => Promise<T>): Promise<T> {
    await cluster.servers[master]!.pause();
    try {
      return await work();
    } finally {
      await cluster.servers[master]!.resume();
      await cluster.waitUntilHealthy();
    }
  }

  it('gives the slots taken back once when a later slot times out', async () => {
    const store = new RedisStore(client, { prefix: uniquePrefix('paused take') });
    const [alice, bob, carol] = await identitiesOnEachMaster(store, api);
    await store.acquire(api, alice!, 4); // 6 left
    await store.acquire(api, bob!, 1); // 9 left
    const failed = await whilePaused(2, () =>
      store
        .acquireAll([
          { bucket: api, key: alice!, cost: 3 },
          { bucket: api, key: bob!, cost: 3 },
          { bucket: api, key: carol!, cost: 1 },
        ])
        .then(
          () => null,
          (error: unknown) => error,
        ),
    );
    expect(String(failed)).toMatch(/timed out/i);
    // Once the master answers again, its late take may land; the others were given back exactly once.
    expect(await holds(store, alice!)).toBe(6);
    expect(await holds(store, bob!)).toBe(9);
    expect(await holds(store, carol!)).toBeGreaterThanOrEqual(9);
  }, 30_000);

  // 0.2 bounded the give-back by alice's full-at time right after the take: the tokens the reset
  // gave back came back again (alice held 3 or 4 where 0 is right).
  it.each(['another store', 'the same store'] as const)(
    'gives nothing back across a reset made by %s while a later slot hangs',
    async (by) => {
      const prefix = uniquePrefix(`paused reset ${by}`);
      const store = new RedisStore(client, { prefix });
      const other = by === 'the same store' ? store : new RedisStore(client, { prefix });
      const [alice, bob] = await identitiesOnEachMaster(store, api);
      const bobsMaster = await masterOf(store.keyFor(api, bob!));
      // both stores' own connections open (and their slots known) before a master hangs
      expect(await holds(other, alice!)).toBe(10);
      expect(await holds(store, bob!)).toBe(10);
      const failed = await whilePaused(bobsMaster, async () => {
        const operation = store.acquireAll([
          { bucket: api, key: alice!, cost: 4 },
          { bucket: api, key: bob!, cost: 1 },
        ]);
        // alice's slot is taken, bob's hangs: meanwhile alice is reset and spent
        const deadline = Date.now() + 5_000;
        while ((await holds(other, alice!)) !== 6) {
          if (Date.now() > deadline) throw new Error('alice was never taken');
        }
        expect(await other.reset(api, alice!)).toBe(true);
        expect(await other.acquire(api, alice!, 10)).toEqual({ allowed: true, remaining: 0 });
        return operation.then(
          () => null,
          (error: unknown) => error,
        );
      });
      expect(String(failed)).toMatch(/timed out/i);
      expect(await holds(store, alice!)).toBe(0);
    },
    30_000,
  );

  it('gives a slot back once when a later slot denies and the next one times out (0.1 gave it back twice)', async () => {
    const store = new RedisStore(client, { prefix: uniquePrefix('paused check') });
    const [alice, bob, carol] = await identitiesOnEachMaster(store, api);
    await store.acquire(api, alice!, 4); // 6 left
    await store.acquire(api, bob!, 10); // empty
    const answer = await whilePaused(2, () =>
      store.acquireAll([
        { bucket: api, key: alice!, cost: 3 },
        { bucket: api, key: bob!, cost: 2 },
        { bucket: api, key: carol!, cost: 1 },
      ]),
    );
    // Denied by bob; carol's master could not be asked which of its requests were short.
    expect(answer).toMatchObject({ allowed: false, denied: [{ index: 1 }] });
    expect(await holds(store, alice!)).toBe(6);
    expect(await holds(store, carol!)).toBe(10);
  }, 30_000);

  it('gives measured requests back once when a measured one is short in another slot', async () => {
    const store = new RedisStore(client, { prefix: uniquePrefix('measured slots') });
    const meter = new TokenBucket('meter', 10, Rate.perHour(1));
    const [alice, bob] = await identitiesOnEachMaster(store, api);
    await store.acquire(meter, bob!, 9); // 1 left
    const answer = await store.acquireAll([
      { bucket: api, key: alice!, cost: 2 },
      { bucket: meter, key: alice!, cost: 3, measure: true }, // fits, taken with alice's slot, then given back
      { bucket: meter, key: bob!, cost: 5, measure: true }, // short
    ]);
    expect(answer).toEqual({ allowed: true, remaining: [8, 10, 1], wouldDeny: [{ index: 2, retryAfterMs: expect.any(Number) as number }] });
    expect(await holds(store, alice!)).toBe(8);
    const meterOf = async (key: string) => {
      const held = await store.acquire(meter, key, 0);
      return held.allowed ? held.remaining : -1;
    };
    expect(await meterOf(alice!)).toBe(10);
    expect(await meterOf(bob!)).toBe(1);
    // and when every measured request fits, all are taken, in every slot
    expect(await store.acquireAll([
      { bucket: api, key: alice!, cost: 1 },
      { bucket: meter, key: alice!, cost: 3, measure: true },
      { bucket: meter, key: bob!, cost: 1, measure: true },
    ])).toEqual({ allowed: true, remaining: [7, 7, 0] });
  });
});
