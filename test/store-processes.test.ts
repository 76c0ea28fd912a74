// Several OS processes spending from one Redis bucket at the same moment never
// get more than its capacity admitted between them: the Lua script is the
// only place a token is read and spent. Each process is
// test/support/hammer.ts; buckets refill at Rate.perHour(1), so what they
// hold at the end is what was taken.
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { Rate } from '../src/rate.js';
import { RedisStore } from '../src/stores/redis-store.js';
import { TokenBucket } from '../src/token-bucket.js';
import { clusterClient, redisClient, uniquePrefix } from './support/clients.js';
import type { HammerResult } from './support/hammer.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const HAMMER = join('test', 'support', 'hammer.ts');
const PROCESSES = 4;
const ATTEMPTS = 300;

interface Hammer {
  ready: Promise<void>;
  result: Promise<HammerResult>;
  go(): void;
  kill(): void;
}

function startHammer(args: readonly string[]): Hammer {
  const child = spawn(process.execPath, ['--import', 'tsx', HAMMER, ...args], { cwd: ROOT, stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (text: string) => (stderr = (stderr + text).slice(-4_000)));
  const lines = createInterface({ input: child.stdout });
  const output: string[] = [];
  let onLine: (() => void) | undefined;
  lines.on('line', (line) => {
    output.push(line);
    onLine?.();
  });
  const exited = new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve(code));
  });
  const failure = (what: string, code: number | null) =>
    new Error(`hammer pid ${child.pid} ${what} (exit ${code}):\n${output.join('\n')}\n${stderr}`);

  const ready = new Promise<void>((resolve, reject) => {
    onLine = () => {
      if (output.includes('ready')) resolve();
    };
    exited.then((code) => reject(failure('exited before it was ready', code)), reject);
  });
  const result = exited.then((code) => {
    const last = output.at(-1);
    if (code !== 0 || last === undefined || !last.startsWith('{')) throw failure('failed', code);
    return JSON.parse(last) as HammerResult;
  });
  ready.catch(() => undefined); // reported through `result` as well
  return {
    ready,
    result,
    go: () => child.stdin.end('go\n'),
    kill: () => {
      if (child.exitCode === null) child.kill('SIGKILL');
    },
  };
}

/** Starts the processes, lets them loose together, and returns how many each had admitted. */
async function hammer(target: readonly string[], prefix: string, requests: readonly string[]): Promise<HammerResult[]> {
  const hammers = Array.from({ length: PROCESSES }, () => startHammer([...target, prefix, String(ATTEMPTS), ...requests]));
  try {
    await Promise.all(hammers.map((h) => h.ready));
    for (const h of hammers) h.go();
    return await Promise.all(hammers.map((h) => h.result));
  } finally {
    for (const h of hammers) h.kill();
  }
}

function sum(results: readonly HammerResult[]): { admitted: number; denied: number } {
  return {
    admitted: results.reduce((n, r) => n + r.admitted, 0),
    denied: results.reduce((n, r) => n + r.denied, 0),
  };
}

const clients: (Redis | Cluster)[] = [];
afterAll(async () => {
  await Promise.all(clients.map((c) => c.quit().catch(() => undefined)));
});

type Target = 'Redis' | 'Redis Cluster';

function connect(kind: Target): { client: Redis | Cluster; args: string[] } {
  if (kind === 'Redis') {
    const url = inject('redisUrl');
    const client = redisClient(url);
    clients.push(client);
    return { client, args: [url] };
  }
  const nodes = inject('redisClusterNodes');
  const client = clusterClient(nodes);
  clients.push(client);
  return { client, args: ['--cluster', (nodes ?? []).map((n) => `${n.host}:${n.port}`).join(',')] };
}

/** What a bucket holds now, read without taking anything (a cost-0 acquire). */
async function holds(store: RedisStore, bucket: TokenBucket, key: string): Promise<number> {
  const answer = await store.acquire(bucket, key, 0);
  if (!answer.allowed) throw new Error('a cost-0 acquire is always admitted');
  return answer.remaining;
}

describe(`${PROCESSES} processes × ${ATTEMPTS} concurrent acquires`, () => {
  it('on Redis, one bucket of 200: exactly 200 admitted in all', async () => {
    const { client, args } = connect('Redis');
    const prefix = uniquePrefix('processes one');
    const results = await hammer(args, prefix, ['api/200/shared/1']);
    expect(sum(results)).toEqual({ admitted: 200, denied: PROCESSES * ATTEMPTS - 200 });

    const store = new RedisStore(client, { prefix });
    const bucket = new TokenBucket('api', 200, Rate.perHour(1));
    expect(await holds(store, bucket, 'shared')).toBe(0);
    const next = await store.acquire(bucket, 'shared');
    expect(next.allowed).toBe(false);
    if (!next.allowed) expect(next.retryAfterMs).toBeGreaterThan(3_500_000);
  }, 30_000);

  describe.each(['Redis', 'Redis Cluster'] as const)('on %s, all or nothing', (kind) => {
    it('two buckets of one identity (200 and 300, cost 1 each): exactly 200 admitted, both charged 200', async () => {
      const { client, args } = connect(kind);
      const prefix = uniquePrefix(`processes pair ${kind}`);
      const results = await hammer(args, prefix, ['small/200/shared/1', 'large/300/shared/1']);
      expect(sum(results)).toEqual({ admitted: 200, denied: PROCESSES * ATTEMPTS - 200 });

      const store = new RedisStore(client, { prefix });
      expect(await holds(store, new TokenBucket('small', 200, Rate.perHour(1)), 'shared')).toBe(0);
      expect(await holds(store, new TokenBucket('large', 300, Rate.perHour(1)), 'shared')).toBe(100);
    }, 30_000);
  });

  // On a Cluster, buckets of different identities live in different hash slots:
  // the store takes one slot's buckets, then the next, and gives back what it
  // took when a later one denies. Listing the larger bucket first makes every
  // denial after the smaller one runs dry a take-and-give-back.
  it('on Redis Cluster, two identities in different slots: nothing is lost or minted by the give-backs', async () => {
    const { client, args } = connect('Redis Cluster');
    const prefix = uniquePrefix('processes slots');
    const results = await hammer(args, prefix, ['large/300/bob/1', 'small/200/alice/1']);
    const { admitted, denied } = sum(results);
    expect(admitted + denied).toBe(PROCESSES * ATTEMPTS);
    expect(admitted).toBeLessThanOrEqual(200);

    const store = new RedisStore(client, { prefix });
    expect(await holds(store, new TokenBucket('small', 200, Rate.perHour(1)), 'alice')).toBe(200 - admitted);
    // A give-back is bounded by its take's own refill: it gives back what refilled while its
    // operation ran (a few ms of one token an hour) less than was taken, never more. Together less than a token.
    const large = await holds(store, new TokenBucket('large', 300, Rate.perHour(1)), 'bob');
    expect(large).toBeLessThanOrEqual(300 - admitted);
    expect(large).toBeGreaterThanOrEqual(300 - admitted - 1);
    // At least 300 calls get past the large bucket (holds are only ever given back), so all
    // 200 of the small one's tokens go: a give-back never costs an admission here.
    expect(admitted).toBe(200);
  }, 30_000);

  // Refunds race with other processes' acquires: whatever the interleaving,
  // no token is minted or lost. This process takes 5 and gives them back,
  // again and again, while the others spend the bucket down.
  describe.each(['Redis', 'Redis Cluster'] as const)('on %s, refunds among acquires', (kind) => {
    it('mint and lose nothing: what the others admitted plus what is left is the capacity', async () => {
      const { client, args } = connect(kind);
      const prefix = uniquePrefix(`processes refunds ${kind}`);
      const store = new RedisStore(client, { prefix });
      const bucket = new TokenBucket('api', 300, Rate.perHour(1));
      let ours = 0;
      let stop = false;
      const refunding = (async () => {
        while (!stop) {
          const taken = await store.acquire(bucket, 'shared', 5);
          if (!taken.allowed) {
            await new Promise((resolve) => setImmediate(resolve));
            continue;
          }
          ours++;
          await store.refund(bucket, 'shared', 5);
        }
      })();
      let results: HammerResult[];
      try {
        results = await hammer(args, prefix, ['api/300/shared/1']);
      } finally {
        stop = true;
        await refunding;
      }
      const { admitted } = sum(results);
      expect(ours).toBeGreaterThan(0);
      expect(admitted).toBeLessThanOrEqual(300);
      expect(admitted + (await holds(store, bucket, 'shared'))).toBe(300);
    }, 30_000);
  });
});
