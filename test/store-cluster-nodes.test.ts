// On a Cluster, the operations of one tick bound for one master share a
// script call whatever their hash slots (Redis 7's allow-cross-slot-keys
// flag), each keeping its own decision, checked against the exact model
// operation by operation: with a slot moved to another master behind the
// client's back, a slot half moved (IMPORTING / MIGRATING, its keys moved or
// not), and a master paused. An operation the node cannot decide is run
// alone, once. On a cluster of this file's own, every client library.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Rate } from '../src/rate.js';
import type { AcquireRequest, Admission, BatchAdmission } from '../src/stores/bucket-store.js';
import { clusterSlot } from '../src/stores/cluster-slot.js';
import { RedisStore } from '../src/stores/redis-store.js';
import { TokenBucket } from '../src/token-bucket.js';
import { CLIENT_FAMILIES, openClient } from './support/client-families.js';
import type { OpenedClient } from './support/client-families.js';
import { uniquePrefix } from './support/clients.js';
import type { SlotMover } from './support/cluster-slots.js';
import { slotMover } from './support/cluster-slots.js';
import { ReferenceBucket } from './support/reference-bucket.js';
import type { RedisClusterProcess } from './support/redis-server.js';
import { startRedisCluster } from './support/redis-server.js';

const MASTERS = 3;

let cluster: RedisClusterProcess;
let admins: Redis[];
let mover: SlotMover;

beforeAll(async () => {
  cluster = await startRedisCluster({ masters: MASTERS, nodeTimeoutMs: 15_000 });
  admins = cluster.nodes.slice(0, MASTERS).map(({ host, port }) => new Redis(port, host));
  mover = slotMover(cluster.nodes.slice(0, MASTERS));
}, 60_000);

afterAll(async () => {
  mover?.close();
  for (const a of admins ?? []) a.disconnect();
  await cluster?.stop();
});

// A token an hour: what an operation decides does not depend on when in the test it runs, only its wait does.
const a = new TokenBucket('a', 5, Rate.perHour(5));
const b = new TokenBucket('b', 3, Rate.perHour(3));
const holder = new TokenBucket('holder', 10, Rate.perHour(1));

type Op = { key: string; bucket: TokenBucket; cost: number } | { key: string; requests: AcquireRequest[] };

/** A tick's operations on one identity: takes, a denial between takes, more than the capacity, two buckets at once. */
function opsOn(key: string): Op[] {
  return [
    { key, bucket: a, cost: 3 },
    { key, bucket: a, cost: 3 }, // short by one: takes nothing
    { key, bucket: a, cost: 1 },
    { key, bucket: b, cost: 4 }, // more than the capacity
    { key, requests: [{ bucket: a, key, cost: 1 }, { bucket: b, key, cost: 3 }] },
    { key, requests: [{ bucket: a, key, cost: 1 }, { bucket: b, key, cost: 1 }] }, // b short: a not taken
  ];
}

function run(store: RedisStore, op: Op): Promise<Admission | BatchAdmission> {
  return 'bucket' in op ? store.acquire(op.bucket, op.key, op.cost) : store.acquireAll(op.requests);
}

/** Redis TIME in ms, on master 2 (never paused here). */
async function redisNow(): Promise<number> {
  const [seconds, micros] = (await admins[2]!.time()).map(Number);
  return seconds! * 1000 + micros! / 1000;
}

/**
 * Each operation's answer against the exact model, in the order issued, all at one time: decisions
 * and whole tokens exactly (a token an hour). A wait counts from the take that made it: operations
 * run in separate calls between t0 and t1 (ms), so it may be shorter by as much as that.
 */
function expectModel(ops: readonly Op[], answers: readonly (Admission | BatchAdmission)[], t0: number, t1: number): void {
  const model = new ReferenceBucket();
  ops.forEach((op, i) => {
    const expected = 'bucket' in op ? toBatch(model.acquire(op.bucket, op.key, op.cost, t0)) : model.acquireAll(op.requests, t0);
    const got = toBatch(answers[i]!);
    expect({ i, allowed: got.allowed, remaining: got.remaining }).toEqual({ i, allowed: expected.allowed, remaining: expected.remaining });
    if (got.allowed || expected.allowed) return;
    if (expected.retryAfterMs === null) expect(got.retryAfterMs, `operation ${i}`).toBeNull();
    else {
      expect(got.retryAfterMs, `operation ${i}`).toBeLessThanOrEqual(expected.retryAfterMs);
      expect(got.retryAfterMs, `operation ${i}`).toBeGreaterThanOrEqual(expected.retryAfterMs - Math.ceil(t1 - t0));
    }
  });
}

function toBatch(answer: Admission | BatchAdmission): BatchAdmission {
  if ('denied' in answer || ('remaining' in answer && Array.isArray(answer.remaining))) return answer as BatchAdmission;
  const one = answer as Admission;
  return one.allowed ? { allowed: true, remaining: [one.remaining] } : { allowed: false, retryAfterMs: one.retryAfterMs, denied: [{ index: 0, retryAfterMs: one.retryAfterMs }], remaining: [0] };
}

/** Script calls each master ran since the last `resetStats`. */
async function scriptCalls(): Promise<number[]> {
  return Promise.all(
    admins.map(async (admin) => {
      const info = await admin.info('commandstats');
      let calls = 0;
      for (const match of info.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)) calls += Number(match[1]);
      return calls;
    }),
  );
}

const resetStats = (): Promise<unknown> => Promise.all(admins.map((admin) => admin.call('CONFIG', 'RESETSTAT')));

describe.each(CLIENT_FAMILIES)('%s', (family) => {
  let opened: OpenedClient;
  beforeAll(async () => {
    opened = openClient(family, { kind: 'cluster', nodes: cluster.nodes.slice(0, MASTERS) });
    await opened.connect();
  });
  afterAll(() => opened.close().catch(() => undefined));

  /** Per store, an identity on master 2, whose acquire keeps the store busy while a tick is issued. */
  const holders = new Map<RedisStore, string>();

  /** A store with its connection open and its scripts loaded on every master. */
  async function readyStore(label: string): Promise<RedisStore> {
    const store = new RedisStore(opened.client, { prefix: uniquePrefix(`nodes-${label}-${family}`) });
    const owner = await mover.owners();
    const warm = [0, 1, 2].map((m) => identities(store, owner, m, 2, 'warm'));
    holders.set(store, identities(store, owner, 2, 1, 'holder')[0]!);
    await store.acquire(holder, holders.get(store)!, 0);
    // each master: a shared call (two slots), an acquire alone, a reset
    await busy(store, () => warm.flat().map((key) => store.acquire(a, key, 0)));
    await Promise.all(warm.flat().map((key) => store.acquire(a, key, 0)));
    await Promise.all(warm.flat().map((key) => store.reset(a, key)));
    return store;
  }

  /** `count` identities (starting `label`) served by master `m`, each in a slot of its own. */
  function identities(store: RedisStore, owner: readonly number[], m: number, count: number, label: string): string[] {
    const found: string[] = [];
    const slots = new Set<number>();
    for (let i = 0; found.length < count; i++) {
      const key = `${label}${i}`;
      const slot = clusterSlot(store.keyFor(a, key));
      if (owner[slot] === m && !slots.has(slot)) {
        found.push(key);
        slots.add(slot);
      }
    }
    return found;
  }

  /** The operations `issue` starts, while an acquire on master 2 is in flight: they wait for the tick's end and share calls. */
  async function busy<T>(store: RedisStore, issue: () => Promise<T>[]): Promise<T[]> {
    const held = store.acquire(holder, holders.get(store)!, 0);
    const answers = await Promise.all(issue());
    await held;
    return answers;
  }

  async function tick(store: RedisStore, ops: readonly Op[]): Promise<{ answers: (Admission | BatchAdmission)[]; t0: number; t1: number }> {
    const t0 = await redisNow();
    const answers = await busy(store, () => ops.map((op) => run(store, op)));
    return { answers, t0, t1: await redisNow() };
  }

  /** What the store holds of every pair the ops name, against the model after them (each applied once). */
  async function expectHeld(store: RedisStore, ops: readonly Op[]): Promise<void> {
    const model = new ReferenceBucket();
    const now = await redisNow();
    for (const op of ops) model.acquireAll('bucket' in op ? [{ bucket: op.bucket, key: op.key, cost: op.cost }] : op.requests, now);
    for (const key of new Set(ops.map((op) => op.key))) {
      for (const bucket of [a, b]) {
        const expected = model.acquire(bucket, key, 0, now);
        expect({ key, bucket: bucket.name, held: await store.acquire(bucket, key, 0) }).toEqual({ key, bucket: bucket.name, held: expected });
      }
    }
  }

  it('one tick\'s operations bound for one master, in several slots, share one call, each decided as the exact model decides it', async () => {
    const store = await readyStore('share');
    const owner = await mover.owners();
    const [u1, u2, u3] = identities(store, owner, 0, 3, 'u');
    const [v1] = identities(store, owner, 1, 1, 'v');
    const ops = [...opsOn(u1!), ...opsOn(u2!), ...opsOn(v1!), ...opsOn(u3!)];
    await resetStats();
    const { answers, t0, t1 } = await tick(store, ops);
    expectModel(ops, answers, t0, t1);
    // master 0: one call for three slots' 18 operations; master 1: one for its 6; master 2: the acquire in flight
    expect(await scriptCalls()).toEqual([1, 1, 1]);
    await expectHeld(store, ops);
    await store.close();
  });

  it('a slot moved to another master behind the client\'s back: its operations run alone, once; the rest are shared as before', async () => {
    const store = await readyStore('moved');
    const owner = await mover.owners();
    const [u1, u2, u3] = identities(store, owner, 0, 3, 'u');
    await mover.move(store.keyFor(a, u2!), 1);
    try {
      const ops = [...opsOn(u1!), ...opsOn(u2!), ...opsOn(u3!)];
      const { answers, t0, t1 } = await tick(store, ops);
      expectModel(ops, answers, t0, t1);
      await expectHeld(store, ops);
      expect(await mover.masterOf(store.keyFor(a, u2!))).toBe(1);
    } finally {
      await mover.move(store.keyFor(a, u2!), 0);
      await store.close();
    }
  });

  it('the first operation\'s slot moved: the master runs nothing of the call, and every operation runs alone, once', async () => {
    const store = await readyStore('first-moved');
    const owner = await mover.owners();
    const [u1, u2, u3] = identities(store, owner, 0, 3, 'u');
    await mover.move(store.keyFor(a, u1!), 2);
    try {
      const ops = [...opsOn(u1!), ...opsOn(u2!), ...opsOn(u3!)];
      const { answers, t0, t1 } = await tick(store, ops);
      expectModel(ops, answers, t0, t1);
      await expectHeld(store, ops);
    } finally {
      await mover.move(store.keyFor(a, u1!), 0);
      await store.close();
    }
  });

  it.each(['importing', 'migrated'] as const)(
    'a slot half moved (%s): operations on keys still there are decided in the call; keys gone run alone (ASK), once',
    async (until) => {
      const store = await readyStore(`half-${until}`);
      const owner = await mover.owners();
      const [u1, u2, u3] = identities(store, owner, 0, 3, 'u');
      // both of u2's buckets hold a state, so that its keys are all on one side (a call naming keys of a
      // slot on both sides is answered TRYAGAIN until the move ends, for any client)
      const first: Op = { key: u2!, requests: [{ bucket: a, key: u2!, cost: 1 }, { bucket: b, key: u2!, cost: 1 }] };
      const t0 = await redisNow();
      const before = await run(store, first);
      await mover.move(store.keyFor(a, u2!), 1, until);
      try {
        const ops = [...opsOn(u1!), ...opsOn(u2!), ...opsOn(u3!)];
        const { answers, t1 } = await tick(store, ops);
        const model = [first, ...ops];
        expectModel(model, [before, ...answers], t0, t1);
        await mover.finish(store.keyFor(a, u2!));
        await expectHeld(store, model);
      } finally {
        await mover.move(store.keyFor(a, u2!), 0);
        await store.close();
      }
    },
  );

  it('a master paused: the other masters\' operations are answered meanwhile, its own once it resumes, each once', async () => {
    const store = await readyStore('paused');
    const owner = await mover.owners();
    const [u1, u2] = identities(store, owner, 0, 2, 'u');
    const [v1, v2] = identities(store, owner, 1, 2, 'v');
    const onPaused = [...opsOn(u1!), ...opsOn(u2!)];
    const onOther = [...opsOn(v1!), ...opsOn(v2!)];
    const t0 = await redisNow();
    await cluster.servers[0]!.pause();
    let resumed = false;
    try {
      const held = store.acquire(holder, holders.get(store)!, 0);
      const paused = Promise.all(onPaused.map((op) => run(store, op)));
      const other = await Promise.all(onOther.map((op) => run(store, op)));
      await held;
      expectModel(onOther, other, t0, await redisNow());
      await cluster.servers[0]!.resume();
      resumed = true;
      expectModel(onPaused, await paused, t0, await redisNow());
      await expectHeld(store, [...onPaused, ...onOther]);
    } finally {
      if (!resumed) await cluster.servers[0]!.resume();
      await cluster.waitUntilHealthy();
      await store.close();
    }
  });

  it('slots moving between masters while ticks run: every operation is applied exactly once', async () => {
    const store = await readyStore('churn');
    const keys = Array.from({ length: 24 }, (_, i) => `c${i}`);
    const taken = new Map<string, number>();
    let moving = true;
    const churn = (async () => {
      for (let i = 0; moving; i++) {
        const key = store.keyFor(a, keys[(i * 7) % keys.length]!);
        const to = ((await mover.masterOf(key)) + 1) % MASTERS;
        await mover.move(key, to, i % 3 === 0 ? 'migrated' : 'moved');
        if (i % 3 === 0) await mover.finish(key);
      }
    })();
    try {
      for (let round = 0; round < 12; round++) {
        const ops = keys.map((key, i) => ({ key, bucket: i % 2 === 0 ? a : b, cost: 1 + ((round + i) % 2) }));
        const answers = await busy(store, () => ops.map((op) => store.acquire(op.bucket, op.key, op.cost)));
        answers.forEach((answer, i) => {
          const { key, bucket, cost } = ops[i]!;
          if (answer.allowed) taken.set(`${bucket.name}/${key}`, (taken.get(`${bucket.name}/${key}`) ?? 0) + cost);
        });
      }
    } finally {
      moving = false;
      await churn;
    }
    for (const key of keys) {
      for (const bucket of [a, b]) {
        const held = await store.acquire(bucket, key, 0);
        expect({ key, bucket: bucket.name, held }).toEqual({ key, bucket: bucket.name, held: { allowed: true, remaining: bucket.capacity - (taken.get(`${bucket.name}/${key}`) ?? 0) } });
      }
    }
    await store.close();
  }, 60_000);
});
