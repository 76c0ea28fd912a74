// Operations of one process issued in one tick and bound for one node (a
// Cluster: one hash slot) share a script call. Each keeps its own decision,
// reply and refund bookkeeping: checked against the exact model operation by
// operation, with a foreign value at one key, a lost reply, and a reset in
// the same tick, on every client library.
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { Rate } from '../src/rate.js';
import type { AcquireRequest, Admission, BatchAdmission } from '../src/stores/bucket-store.js';
import { SHARED_KEYS_WRITTEN_AT_ONCE } from '../src/stores/redis-client.js';
import { RedisStore } from '../src/stores/redis-store.js';
import { TokenBucket } from '../src/token-bucket.js';
import { CLIENT_FAMILIES, familyClient, isNodeRedis, openClient, sharedTarget } from './support/client-families.js';
import type { ClientFamily, OpenedClient } from './support/client-families.js';
import { uniquePrefix } from './support/clients.js';
import type { FaultProxy } from './support/fault-proxy.js';
import { startFaultProxy } from './support/fault-proxy.js';
import { ReferenceBucket } from './support/reference-bucket.js';
import type { RedisServerProcess } from './support/redis-server.js';
import { startRedisServer } from './support/redis-server.js';

/** Issued first in a tick, on an identity of its own: with it in flight, the tick's other operations wait for the tick's end and share calls. */
const holder = new TokenBucket('holder', 10, Rate.perHour(1));

/**
 * The operations `issue` starts, issued while the store is busy. An acquire
 * that finds nothing else in flight is sent at once (it has nothing to share
 * a call with); so the tick opens with one on an identity of its own.
 */
async function whileBusy<T>(store: RedisStore, issue: () => Promise<T>[]): Promise<T[]> {
  const held = store.acquire(holder, 'holder', 0);
  const answers = await Promise.all(issue());
  await held;
  return answers;
}

/** Takes one token of a fresh bucket first in each identity's call: the key it writes tells the call's Redis TIME. */
const probe = new TokenBucket('probe', 10, Rate.perSecond(1));
/** Whole µs per token (the 3-argument layout). */
const wholeRates = [new TokenBucket('a', 5, Rate.perHour(1)), new TokenBucket('b', 3, Rate.perMinute(2))];
/** Fractional µs per token (4 arguments per request). */
const mixedRates = [new TokenBucket('a', 5, Rate.perHour(1)), new TokenBucket('c', 4, new Rate(3, 10_000))];

/** Real magnitudes: ten million tokens a second (refilled within the call's µs), a capacity near 2^53 (replies as strings), odd µs periods. */
const hugeRates = [new TokenBucket('f', 5, Rate.perSecond(10_000_000)), new TokenBucket('w', 2 ** 53 - 2, new Rate(1000, 0.001))];
const oddRates = [new TokenBucket('o', 5, new Rate(7, 3.333)), new TokenBucket('p', 3, new Rate(1_000_003, 7_777_777))];

type Op = { kind: 'one'; bucket: TokenBucket; key: string; cost: number } | { kind: 'all'; requests: AcquireRequest[] };

/** A tick's operations on a few identities: takes, a denial between takes, a cost above capacity, several buckets at once. */
function scenario(buckets: readonly TokenBucket[]): Op[] {
  const [x, y] = buckets as [TokenBucket, TokenBucket];
  const ops: Op[] = [];
  for (const id of ['u1', 'u2', 'u3']) ops.push({ kind: 'one', bucket: probe, key: id, cost: 1 });
  ops.push(
    { kind: 'one', bucket: x, key: 'u1', cost: 3 },
    { kind: 'one', bucket: x, key: 'u1', cost: 3 }, // short by one: takes nothing
    { kind: 'one', bucket: x, key: 'u1', cost: 2 }, // its neighbour still fits
    { kind: 'one', bucket: x, key: 'u1', cost: 0 },
    { kind: 'one', bucket: x, key: 'u2', cost: 6 }, // more than the capacity
    { kind: 'all', requests: [{ bucket: x, key: 'u2', cost: 1 }, { bucket: y, key: 'u2', cost: 2 }] },
    { kind: 'all', requests: [{ bucket: x, key: 'u2', cost: 1 }, { bucket: y, key: 'u2', cost: 2 }] }, // y short: x not taken
    { kind: 'all', requests: [{ bucket: x, key: 'u2', cost: 4 }, { bucket: y, key: 'u2', cost: 1 }] },
    { kind: 'one', bucket: y, key: 'u3', cost: 1 },
    { kind: 'all', requests: [{ bucket: x, key: 'u3', cost: 5 }, { bucket: y, key: 'u3', cost: 2 }] },
    { kind: 'one', bucket: y, key: 'u3', cost: 1 },
  );
  return ops;
}

function run(store: RedisStore, op: Op): Promise<Admission | BatchAdmission> {
  return op.kind === 'one' ? store.acquire(op.bucket, op.key, op.cost) : store.acquireAll(op.requests);
}

/** The identity an operation belongs to (every request of one operation here has one). */
const identityOf = (op: Op): string => (op.kind === 'one' ? op.key : String(op.requests[0]!.key));

describe.each(CLIENT_FAMILIES)('%s', (family: ClientFamily) => {
  describe.each(['redis', 'cluster'] as const)('%s: one tick', (kind) => {
    const client = familyClient(family, sharedTarget(kind));
    // ioredis, straight to the keys
    const reader = kind === 'redis' ? new Redis(inject('redisUrl')) : new Cluster(inject('redisClusterNodes')!);
    afterAll(() => reader.disconnect());

    it.each([
      ['whole µs per token', wholeRates],
      ['fractional µs per token', mixedRates],
      ['fast rates and capacities near 2^53', hugeRates],
      ['odd periods', oddRates],
    ])('each operation its own decision, as the exact model decides it in order (%s)', async (_label, buckets) => {
      const store = new RedisStore(client, { prefix: uniquePrefix(`coalesce-${family}-${kind}`) });
      const ops = scenario(buckets);
      const answers = await whileBusy(store, () => ops.map((op) => run(store, op)));

      // Each identity's call ran at one Redis TIME: its probe's key holds it plus one token's refill.
      const nowOf = new Map<string, number>();
      for (const id of ['u1', 'u2', 'u3']) nowOf.set(id, Number(await reader.get(store.keyFor(probe, id))) - probe.rate.periodUs);
      // On one Redis, every identity shared one call.
      if (kind === 'redis') expect(new Set(nowOf.values()).size).toBe(1);

      const model = new ReferenceBucket();
      ops.forEach((op, i) => {
        const nowMs = nowOf.get(identityOf(op))! / 1000;
        const expected = op.kind === 'one' ? model.acquire(op.bucket, op.key, op.cost, nowMs) : model.acquireAll(op.requests, nowMs);
        expect({ i, answer: answers[i] }).toEqual({ i, answer: expected });
      });
      await store.close();
    });

    it('a foreign value at one request\'s key fails that operation alone, naming the key; nothing is overwritten', async () => {
      const store = new RedisStore(client, { prefix: uniquePrefix(`coalesce-foreign-${family}-${kind}`) });
      // one identity: one hash slot, so one shared call on a Cluster too
      const [before, hash, text, far, after] = ['before', 'hash', 'text', 'far', 'after'].map((name) => new TokenBucket(name, 5, Rate.perHour(1))) as [
        TokenBucket, TokenBucket, TokenBucket, TokenBucket, TokenBucket,
      ];
      await reader.hset(store.keyFor(hash, 'k'), 'f', 'v');
      await reader.set(store.keyFor(text, 'k'), 'not a bucket');
      // beyond a full refill from now: read as an empty bucket and rewritten as one
      await reader.set(store.keyFor(far, 'k'), String(Date.now() * 1000 + 10 ** 15));
      const settle = <T>(p: Promise<T>): Promise<PromiseSettledResult<T>> => p.then((value) => ({ status: 'fulfilled' as const, value }), (reason: unknown) => ({ status: 'rejected' as const, reason }));
      const results = await whileBusy(store, () => [
        settle<Admission | BatchAdmission>(store.acquire(before, 'k', 1)),
        settle(store.acquire(hash, 'k', 1)),
        settle(store.acquireAll([{ bucket: after, key: 'k', cost: 1 }, { bucket: text, key: 'k', cost: 1 }])),
        settle(store.acquireAll([{ bucket: far, key: 'k', cost: 1 }])),
        settle(store.acquire(after, 'k', 2)),
      ]);
      expect(results[0]).toEqual({ status: 'fulfilled', value: { allowed: true, remaining: 4 } });
      expect(results[1]).toMatchObject({ status: 'rejected', reason: { message: expect.stringContaining(store.keyFor(hash, 'k')) as unknown } });
      expect(results[2]).toMatchObject({ status: 'rejected', reason: { message: expect.stringContaining(store.keyFor(text, 'k')) as unknown } });
      expect(results[3]).toMatchObject({ status: 'fulfilled', value: { allowed: false } });
      expect(results[4]).toEqual({ status: 'fulfilled', value: { allowed: true, remaining: 3 } });
      expect(await reader.hgetall(store.keyFor(hash, 'k'))).toEqual({ f: 'v' });
      expect(await reader.get(store.keyFor(text, 'k'))).toBe('not a bucket');
      // the operation that failed took nothing of its other bucket
      expect(await store.acquire(after, 'k', 0)).toEqual({ allowed: true, remaining: 3 });
      await store.close();
    });

    it('takes that shared calls make are refunded exactly, each from its own receipt', async () => {
      const store = new RedisStore(client, { prefix: uniquePrefix(`coalesce-refund-${family}-${kind}`) });
      const bucket = new TokenBucket('r', 20, Rate.perHour(1));
      const takes = await whileBusy(store, () => Array.from({ length: 8 }, (_, i) => store.acquire(bucket, i % 2 === 0 ? 'even' : 'odd', 2)));
      expect(takes.map((t) => (t.allowed ? t.remaining : -1))).toEqual([18, 18, 16, 16, 14, 14, 12, 12]);
      // refunds of one tick, concurrently: every token comes back once, and no more
      await Promise.all([store.refund(bucket, 'even', 3), store.refund(bucket, 'even', 5), store.refund(bucket, 'odd', 8), store.refund(bucket, 'odd', 1)]);
      expect(await store.acquireAll([{ bucket, key: 'even', cost: 0 }, { bucket, key: 'odd', cost: 0 }])).toEqual({ allowed: true, remaining: [20, 20] });
      await store.close();
    });

    it('a reset in the tick of a shared take voids it only when sent after the take', async () => {
      const store = new RedisStore(client, { prefix: uniquePrefix(`coalesce-reset-${family}-${kind}`) });
      const other = new RedisStore(client, { prefix: store.prefix });
      const [x] = wholeRates as [TokenBucket];
      // Every script loaded where it runs (one sent again after NOSCRIPT runs after what was sent meanwhile),
      // once the store's connection is ready (on a Cluster, shared calls go per node from then on).
      await store.acquire(x, 'warm', 0);
      await whileBusy(store, () => [store.acquire(x, 'k', 0), store.acquire(x, 'k', 0), store.acquire(x, 'j', 0), store.acquire(x, 'j', 0)]);
      await Promise.all([store.reset(x, 'k'), store.reset(x, 'j')]);
      // Sent before the shared call (which goes out at the end of the tick): the take is after it, and refundable.
      const before = whileBusy<Admission | boolean>(store, () => [store.acquire(x, 'k', 3), store.acquire(x, 'k', 1), store.reset(x, 'k')]);
      expect((await before).slice(0, 2)).toEqual([{ allowed: true, remaining: 2 }, { allowed: true, remaining: 1 }]);
      await store.refund(x, 'k', 4);
      expect(await other.acquire(x, 'k', 0)).toEqual({ allowed: true, remaining: 5 });

      // Sent after it: the take came back with the reset; someone takes again; the refund gives nothing.
      const takes = whileBusy(store, () => [store.acquire(x, 'j', 3), store.acquire(x, 'j', 1)]);
      await new Promise((resolve) => process.nextTick(resolve));
      await store.reset(x, 'j');
      await takes;
      expect(await other.acquire(x, 'j', 2)).toEqual({ allowed: true, remaining: 3 });
      await store.refund(x, 'j', 4);
      expect(await other.acquire(x, 'j', 0)).toEqual({ allowed: true, remaining: 3 });
      await Promise.all([store.close(), other.close()]);
    });

    it('an acquire issued while nothing is in flight is sent at once: a reset later in its tick runs after it', async () => {
      const store = new RedisStore(client, { prefix: uniquePrefix(`coalesce-idle-${family}-${kind}`) });
      const other = new RedisStore(client, { prefix: store.prefix });
      const [x] = wholeRates as [TokenBucket];
      // The first is sent at once; the second waits for the tick's end (it may share a call), after the reset.
      const [first, second] = await Promise.all([store.acquire(x, 'k', 3), store.acquire(x, 'k', 1), store.reset(x, 'k')]);
      expect([first, second]).toEqual([{ allowed: true, remaining: 2 }, { allowed: true, remaining: 4 }]);
      // The reset gave back the first take, so a refund can only give back the second.
      await store.refund(x, 'k', 4);
      expect(await other.acquire(x, 'k', 0)).toEqual({ allowed: true, remaining: 5 });
      await Promise.all([store.close(), other.close()]);
    });
  });
});

describe('script calls and faults, on a Redis of the file\'s own', () => {
  let server: RedisServerProcess;
  let proxy: FaultProxy;
  let admin: Redis;
  const bucket = new TokenBucket('api', 10, Rate.perHour(1));

  beforeAll(async () => {
    server = await startRedisServer();
    proxy = await startFaultProxy(server);
    admin = new Redis(server.url);
    await admin.ping();
  }, 30_000);

  afterAll(async () => {
    admin.disconnect();
    await proxy.close();
    await server.stop();
  });

  const scriptCalls = async (): Promise<number> => {
    const info = await admin.info('commandstats');
    let calls = 0;
    for (const match of info.matchAll(/^cmdstat_(evalsha|eval):calls=(\d+)/gm)) calls += Number(match[2]);
    return calls;
  };

  describe.each(CLIENT_FAMILIES)('%s', (family) => {
    let opened: OpenedClient;
    let proxied: OpenedClient;
    beforeAll(async () => {
      opened = openClient(family, { kind: 'redis', url: server.url });
      proxied = openClient(family, { kind: 'redis', url: proxy.url });
      await Promise.all([opened.connect(), proxied.connect()]);
    });
    afterAll(async () => {
      await Promise.allSettled([opened.close(), proxied.close()]);
    });

    it('50 operations in one tick make two script calls from idle (the first at once, 49 shared), one while busy; one alone makes one', async () => {
      const store = new RedisStore(opened.client, { prefix: uniquePrefix(`calls-${family}`) });
      await store.acquire(bucket, 'warm'); // loads the scripts
      await whileBusy(store, () => [store.acquire(bucket, 'warm'), store.acquire(bucket, 'warm')]);
      await admin.config('RESETSTAT');
      let answers = await Promise.all(Array.from({ length: 50 }, (_, i) => store.acquire(bucket, `id-${i % 20}`, 1)));
      expect(await scriptCalls()).toBe(2);
      expect(answers.filter((a) => a.allowed)).toHaveLength(50);
      await admin.config('RESETSTAT');
      answers = await whileBusy(store, () => Array.from({ length: 50 }, (_, i) => store.acquire(bucket, `id-${i % 20}`, 1)));
      expect(await scriptCalls()).toBe(2); // the holder's, and one for the 50
      expect(answers.filter((a) => a.allowed)).toHaveLength(50);
      await admin.config('RESETSTAT');
      expect(await store.acquire(bucket, 'alone')).toEqual({ allowed: true, remaining: 9 });
      expect(await scriptCalls()).toBe(1);
      await store.close();
    });

    // Calls of 128 let Redis run one while the store reads the answer to the one before (ioredis and
    // iovalkey write each at once). node-redis writes a turn of the event loop's commands together: there
    // a tick's first call (of 128 at most) goes at once, the rest in calls of up to 512 in the next turn.
    const max = SHARED_KEYS_WRITTEN_AT_ONCE;
    const calls = isNodeRedis(family) ? 2 : 3; // shared, for 2 × max + 1 keys
    it(`a tick of more than ${max} keys is split into ${calls} calls, the first of at most ${max}, each operation whole in one`, async () => {
      const store = new RedisStore(opened.client, { prefix: uniquePrefix(`split-${family}`) });
      const pair = [bucket, new TokenBucket('pair', 10, Rate.perHour(1))];
      await store.acquire(bucket, 'warm'); // loads the scripts
      await whileBusy(store, () => [store.acquire(bucket, 'warm'), store.acquire(bucket, 'warm')]);
      await admin.config('RESETSTAT');
      // 2 × max + 1 keys: single acquires, with a two-bucket operation at each boundary (the last one then alone)
      const ids = (i: number): string => `id-${i % 250}`;
      const held = store.acquire(holder, 'holder', 0);
      const ops: Promise<Admission | BatchAdmission>[] = [];
      for (let i = 0; i < 2 * max - 3; i++) ops.push(store.acquire(bucket, ids(i), 1));
      const twoBuckets = (key: string) => store.acquireAll(pair.map((b) => ({ bucket: b, key, cost: 2 })));
      ops.splice(max - 1, 0, twoBuckets('edge-1'));
      ops.push(twoBuckets('edge-2'));
      const answers = await Promise.all(ops);
      await held;
      expect(await scriptCalls()).toBe(1 + calls); // the holder's, and the shared ones
      expect(answers[max - 1]).toEqual({ allowed: true, remaining: [8, 8] });
      expect(answers.at(-1)).toEqual({ allowed: true, remaining: [8, 8] });
      expect(answers.every((answer) => answer.allowed)).toBe(true);
      const taken = new Map<string, number>();
      for (let i = 0; i < 2 * max - 3; i++) taken.set(ids(i), (taken.get(ids(i)) ?? 0) + 1);
      for (const [id, count] of taken) expect(await store.acquire(bucket, id, 0)).toEqual({ allowed: true, remaining: 10 - count });
      await store.close();
    });

    // On node-redis the calls after a tick's first go out in the next turn: a reset asked after the tick must
    // wait behind them. Run before the last call's take, the reset would leave that take standing, and the
    // store, counting the take as sent before the reset, would keep no receipt to give it back by.
    it('a reset asked after a tick split into calls runs after every one of them', async () => {
      const store = new RedisStore(opened.client, { prefix: uniquePrefix(`split-reset-${family}`) });
      await store.acquire(bucket, 'warm'); // loads the scripts
      await whileBusy<Admission | boolean>(store, () => [store.acquire(bucket, 'warm'), store.acquire(bucket, 'warm'), store.reset(bucket, 'warm')]);
      await admin.config('RESETSTAT');
      const ops = Array.from({ length: 2 * max + 1 }, (_, i) => store.acquire(bucket, i === 2 * max ? 'last' : `id-${i % 250}`, 3));
      await new Promise((resolve) => process.nextTick(resolve)); // the tick's calls are asked for
      const reset = store.reset(bucket, 'last');
      expect((await Promise.all(ops)).every((answer) => answer.allowed)).toBe(true);
      expect(await reset).toBe(true);
      expect(await scriptCalls()).toBe(4); // the first alone (sent at once), two shared, the reset

      expect(await store.acquire(bucket, 'last', 0)).toEqual({ allowed: true, remaining: 10 });
      await store.close();
    });

    it(`an operation of more than ${max} keys is not shared: it is one call of its own`, async () => {
      const store = new RedisStore(opened.client, { prefix: uniquePrefix(`wide-${family}`) });
      const wide = Array.from({ length: max + 1 }, (_, i) => ({ bucket: new TokenBucket(`w${i}`, 3, Rate.perHour(1)), key: 'k', cost: 1 }));
      await store.acquire(bucket, 'warm');
      await whileBusy(store, () => [store.acquire(bucket, 'warm'), store.acquire(bucket, 'warm')]);
      await admin.config('RESETSTAT');
      const [one, two, all] = await whileBusy<Admission | BatchAdmission>(store, () => [store.acquire(bucket, 'a'), store.acquire(bucket, 'b'), store.acquireAll(wide)]);
      expect(await scriptCalls()).toBe(3); // the holder's, the two shared, the wide one
      expect([one, two]).toEqual([{ allowed: true, remaining: 9 }, { allowed: true, remaining: 9 }]);
      expect(all).toEqual({ allowed: true, remaining: wide.map(() => 2) });
      await store.close();
    });

    // ioredis and iovalkey: the store's calls go on a connection of its own, which close() closes
    // (on node-redis it opens none: the store uses the client itself).
    if (!isNodeRedis(family)) it('a close in the tick of acquires closes the store\'s connection: they do not open it again', async () => {
      const connections = async (): Promise<number> => (await admin.client('LIST') as string).trim().split('\n').length;
      /** Polls until `done` holds of the connection count (Redis notes a closed connection within a few ms), for 3 s at most. */
      const until = async (done: (count: number) => boolean): Promise<number> => {
        const deadline = Date.now() + 3000;
        let count = await connections();
        while (!done(count) && Date.now() < deadline) {
          await new Promise((resolve) => setTimeout(resolve, 20));
          count = await connections();
        }
        return count;
      };
      const store = new RedisStore(opened.client, { prefix: uniquePrefix(`close-${family}`) });
      await store.acquire(bucket, 'warm');
      const open = await connections();
      await store.close();
      const closed = await until((count) => count < open);
      expect(closed).toBe(open - 1);
      await store.acquire(bucket, 'warm'); // opens it again
      expect(await until((count) => count === open)).toBe(open);
      const results = await Promise.allSettled([store.acquire(bucket, 'a'), store.acquire(bucket, 'b'), store.acquireAll([{ bucket, key: 'c', cost: 1 }]), store.close()]);
      expect(results[3]).toEqual({ status: 'fulfilled', value: undefined });
      expect(await until((count) => count <= closed)).toBe(closed);
    });

    it('after SCRIPT FLUSH a shared call loads its script by itself', async () => {
      const store = new RedisStore(opened.client, { prefix: uniquePrefix(`flush-${family}`) });
      await whileBusy(store, () => [store.acquire(bucket, 'a'), store.acquire(bucket, 'b')]);
      await admin.script('FLUSH');
      await admin.config('RESETSTAT');
      const answers = await whileBusy(store, () => Array.from({ length: 10 }, (_, i) => store.acquire(bucket, i < 5 ? 'a' : 'b', 1)));
      expect(answers.map((a) => (a.allowed ? a.remaining : -1))).toEqual([8, 7, 6, 5, 4, 8, 7, 6, 5, 4]);
      expect(await scriptCalls()).toBe(4); // per call (the holder's, the shared one), EVALSHA answered NOSCRIPT (nothing ran), then EVAL
      await store.close();
    });

    it('a shared call whose reply is lost fails every operation in it, and each was applied once', async () => {
      const prefix = uniquePrefix(`lost-${family}`);
      const store = new RedisStore(proxied.client, { prefix });
      const check = new RedisStore(opened.client, { prefix });
      await store.acquire(bucket, 'warm');
      await whileBusy(store, () => [store.acquire(bucket, 'warm'), store.acquire(bucket, 'warm')]);
      proxy.hold();
      // the first is sent at once, alone; the other three share a call
      const calls = [store.acquire(bucket, 'p', 2), store.acquire(bucket, 'q', 3), store.acquire(bucket, 'p', 1), store.acquireAll([{ bucket, key: 'r', cost: 4 }])];
      await proxy.held();
      proxy.dropHeld();
      const results = await Promise.allSettled(calls);
      expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected', 'rejected']);
      // once the client has reconnected (and anything it would re-send has been), each took its cost once
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(await store.acquire(bucket, 'warm', 0)).toMatchObject({ allowed: true });
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(await check.acquireAll(['p', 'q', 'r'].map((key) => ({ bucket, key, cost: 0 })))).toEqual({ allowed: true, remaining: [7, 7, 6] });
      // nothing refundable is owed for a lost reply: the refund gives back nothing
      await store.refund(bucket, 'p', 3);
      expect(await check.acquire(bucket, 'p', 0)).toEqual({ allowed: true, remaining: 7 });
      await Promise.all([store.close(), check.close()]);
    });
  });
});
