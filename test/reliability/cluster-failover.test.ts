// A manual failover (CLUSTER FAILOVER on a replica) of the master that holds
// the loaded identity's slot, under load. The limiter must keep answering
// within its bound, mint no tokens, and be exact again once the cluster and
// the clients have settled on the new master.
import { Redis } from 'ioredis';
import type { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Rate, RedisStore, TokenBucket } from '../../src/index.js';
import { clusterClient, uniquePrefix } from '../support/clients.js';
import { startRedisCluster } from '../support/redis-server.js';
import type { RedisClusterProcess } from '../support/redis-server.js';
import { BOOK_QUERY, EXACT_SEARCH_BURST, burst, exactBurst, searchBurst } from './support/burst.js';
import { kinds, loadFigures, round } from './support/figures.js';
import { now } from './support/http.js';
import { STORE_FAILED, startLoad, startReplicas, stopAll } from './support/processes.js';
import type { Replica } from './support/processes.js';

const CAPACITY = 50;
const RATE_PER_SECOND = 100;
const STORE_TIMEOUT_MS = 500;
const BOUND_MS = STORE_TIMEOUT_MS + 250;
const PREFIX = uniquePrefix('failover');
const api = new TokenBucket('api', CAPACITY, Rate.perSecond(RATE_PER_SECOND));

let cluster: RedisClusterProcess | undefined;
let client: Cluster | undefined;
let replicas: Replica[] = [];

beforeAll(async () => {
  cluster = await startRedisCluster({ masters: 3, replicasPerMaster: 1 });
  client = clusterClient(cluster.nodes);
  replicas = await startReplicas(2, {
    REDIS_CLUSTER_NODES: cluster.nodes.map((n) => `${n.host}:${n.port}`).join(','),
    PREFIX,
    CAPACITY,
    RATE_PER_SECOND,
    ON_STORE_ERROR: 'deny', // a store failure shows as a 503 instead of hiding as an admission
    STORE_TIMEOUT_MS,
  });
  for (const replica of replicas) expect(await burst([replica.url], `warm-up-${replica.pid}`, 3)).toEqual(exactBurst(3, 0));
});

afterAll(async () => {
  await stopAll(replicas);
  client?.disconnect();
  await cluster?.stop();
});

/**
 * Master and replicas serving `slot`, as one node sees it. Replicas come from
 * CLUSTER REPLICAS: Redis 7.0 leaves out of CLUSTER SLOTS a replica whose
 * replication offset is still 0.
 */
async function owners(node: Redis, slot: number): Promise<{ master: string; replicas: { host: string; port: number }[]; range: [number, number] }> {
  const ranges = await node.cluster('SLOTS');
  const range = ranges.find(([from, to]) => from <= slot && slot <= to);
  if (range === undefined || range[2] === undefined) throw new Error(`no node serves slot ${slot}`);
  const [from, to, [host, port, id]] = range;
  const lines = (await node.call('CLUSTER', 'REPLICAS', id)) as string[];
  const replicas = lines.map((line) => {
    const [, address = ''] = line.split(' ');
    const match = /^(.+):(\d+)@/.exec(address);
    if (match === null) throw new Error(`unexpected CLUSTER REPLICAS line: ${line}`);
    return { host: match[1]!, port: Number(match[2]) };
  });
  return { master: `${host}:${port}`, replicas, range: [from, to] };
}

async function waitFor<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

describe('Redis Cluster failover under load', () => {
  it('keeps answering within the bound, mints nothing, and is exact once settled', async () => {
    const store = new RedisStore(client!, { prefix: PREFIX });
    const identity = 'failover-load';
    const slot = Number(await client!.cluster('KEYSLOT', store.keyFor(api, identity)));
    const seed = new Redis(cluster!.nodes[0]!);
    const before = await owners(seed, slot);
    const promoted = before.replicas[0];
    if (promoted === undefined) throw new Error(`master ${before.master} has no replica`);
    const promotedAddress = `${promoted.host}:${promoted.port}`;

    const load = startLoad({
      targets: replicas.map((r) => r.url),
      concurrency: 3,
      durationMs: 7_000,
      maxRequests: 200_000,
      requestTimeoutMs: 10_000,
      query: BOOK_QUERY,
      headers: { 'x-user-id': identity },
    });
    await load.started;
    await new Promise((resolve) => setTimeout(resolve, 1_500));

    const replicaNode = new Redis(promoted);
    const failoverAt = now();
    try {
      expect(await replicaNode.cluster('FAILOVER')).toBe('OK');
      await waitFor('the replica to become master', 10_000, async () => ((await replicaNode.role())[0] === 'master' ? true : undefined));
      const promotedAt = now();
      // Every node agrees on the new owner of the slot.
      await waitFor('all nodes to agree on the new master', 10_000, async () => {
        for (const node of cluster!.nodes) {
          const view = new Redis({ ...node, maxRetriesPerRequest: 0 });
          try {
            if ((await owners(view, slot)).master !== promotedAddress) return undefined;
          } finally {
            view.disconnect();
          }
        }
        return true;
      });
      const agreedAt = now();

      const records = await load.records;
      const figures = loadFigures(records);
      const admitted = figures.byKind['data'] ?? 0;
      const expected = CAPACITY + RATE_PER_SECOND * (figures.windowMs / 1000);
      const unavailable = records.filter((r) => r[4] === 'unavailable');
      const lastUnavailable = unavailable.length === 0 ? null : Math.max(...unavailable.map((r) => r[2]));
      const around = records.filter((r) => r[1] >= failoverAt - 50 && r[1] <= agreedAt + 1_000);
      const aroundFigures = loadFigures(around);

      // Settled: a fresh identity in the failed-over slot range gets exactly its burst.
      let fresh = '';
      for (let i = 0; i < 10_000 && fresh === ''; i++) {
        const slotOf = Number(await client!.cluster('KEYSLOT', store.keyFor(api, `failover-fresh-${i}`)));
        if (slotOf >= before.range[0] && slotOf <= before.range[1]) fresh = `failover-fresh-${i}`;
      }
      const settled = await searchBurst(replicas.map((r) => r.url), fresh);

      console.log(
        `[failover] slot ${slot} moved from ${before.master} to ${promotedAddress}: promoted ${round(promotedAt - failoverAt)} ms, ` +
          `all nodes agreed ${round(agreedAt - failoverAt)} ms after CLUSTER FAILOVER; ` +
          `${figures.requests} requests (${kinds(figures)}), ${unavailable.length} answered 503` +
          (lastUnavailable === null ? '' : ` (last ${round(lastUnavailable - failoverAt)} ms after the failover)`) +
          `; around the failover: ${aroundFigures.requests} requests, worst ${aroundFigures.maxMs} ms, p99 ${aroundFigures.p99Ms} ms; ` +
          `worst overall ${figures.maxMs} ms (bound ${BOUND_MS} ms); admitted ${admitted} ≤ expected ${round(expected)} ` +
          `(${round((100 * admitted) / expected, 2)}%); fresh identity ${fresh} after settling: ` +
          `${settled.filter((k) => k === 'data').length} of ${settled.length} searches admitted (exactly 4 expected); ` +
          `"store failed" log lines ${replicas.map((r) => r.count(STORE_FAILED)).join('/')}`,
      );

      expect(Object.keys(figures.byKind).filter((k) => !['data', 'limited', 'unavailable'].includes(k))).toEqual([]);
      expect(figures.maxMs).toBeLessThanOrEqual(BOUND_MS);
      expect(admitted).toBeLessThanOrEqual(expected + 1);
      expect(fresh).not.toBe('');
      expect(settled).toEqual(EXACT_SEARCH_BURST);
      for (const replica of replicas) {
        expect(replica.alive()).toBe(true);
        expect(replica.markers).toEqual([]);
      }
    } finally {
      replicaNode.disconnect();
      seed.disconnect();
    }
  });
});
