// Identities an attacker controls (a user name, an API key, a header) must
// never let two of them share a bucket, nor blow up Redis keys: braces (hash
// tags), colons (key namespaces), newlines, 10 kB strings, any Unicode
// including lone surrogates. Each gets its own full burst, and every key
// stays within prefix + 42 + bucket name characters, on Redis, Redis Cluster
// and in a MemoryStore.
import fc from 'fast-check';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { MemoryStore, Rate, RedisStore, TokenBucket } from '../../src/index.js';
import { clusterClient, redisClient, uniquePrefix } from '../support/clients.js';
import { round } from './support/figures.js';

/** Documented bound: a Redis key is at most prefix + 42 + bucket name characters. */
const IDENTITY_PART = 42;
const short = new TokenBucket('id', 3, Rate.perHour(1));
const long = new TokenBucket('b'.repeat(64), 2, Rate.perHour(1));
const CONCURRENT = 50;

function corpus(): string[] {
  const seed = 20_240_601;
  const hostileUnit = fc.constantFrom('{', '}', ':', '\n', '\r', '#', '*', '?', '[', ']', '\\', ' ', '\u0000', 'a', 'é', '😀');
  const loneSurrogate = fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c));
  const arbitraries = [
    fc.string({ unit: 'binary', maxLength: 60 }),
    fc.string({ unit: 'grapheme', maxLength: 20 }),
    fc.string({ unit: hostileUnit, maxLength: 40 }),
    fc.string({ unit: fc.oneof(loneSurrogate, fc.constantFrom('a', '{', '}')), minLength: 1, maxLength: 6 }),
    // Plain-looking identities right around the 40-character limit of the readable form.
    fc.stringMatching(/^[A-Za-z0-9._:@/+=-]{38,42}$/),
    fc.string({ unit: 'binary', minLength: 10_000, maxLength: 10_240 }),
  ];
  const generated = arbitraries.flatMap((arbitrary, i) => fc.sample(arbitrary, { numRuns: i === arbitraries.length - 1 ? 8 : 80, seed: seed + i }));
  const big = 'x'.repeat(10_239);
  const crafted = [
    '', ' ', '{', '}', '{}', '}{', '{a}', 'a}b{c', '{user}', 'user', 'user}', '{user', 'a:b', 'a::b', 'a\nb', 'a\r\nb',
    `${big}a`, `${big}b`, `a${big}`, // 10 kB, differing in one character
    'a'.repeat(40), 'a'.repeat(41), // readable form vs digest at the boundary
    '#', '#abc', `#${'A'.repeat(22)}`, '{#AAAAAAAAAAAAAAAAAAAAAA}', // shaped like a digest tag
    '\ud800', '\udc00', '\ud800\udc00', '\u{10000}', // lone surrogates vs the pair they would make
    'É', 'E\u0301', // the same text, composed and decomposed
    '1', '01', '1.0', '-0', '0',
  ];
  return [...new Set([...crafted, ...generated])];
}

interface Outcome {
  /** identities that did not get exactly their own burst */
  shared: string[];
  ms: number;
}

/** Per identity: one all-or-nothing acquire of both buckets, then each bucket drained; exactly capacity admitted. */
async function drainEach(store: RedisStore | MemoryStore, identities: readonly string[]): Promise<Outcome> {
  const started = performance.now();
  const shared: string[] = [];
  const one = async (id: string): Promise<void> => {
    const both = await store.acquireAll([
      { bucket: short, key: id, cost: 1 },
      { bucket: long, key: id, cost: 1 },
    ]);
    const got = [
      both.allowed ? both.remaining.join(',') : 'denied',
      ...(await Promise.all([store.acquire(short, id), store.acquire(short, id)]).then((rs) => rs.map((r) => r.allowed))),
      (await store.acquire(short, id)).allowed,
      (await store.acquire(long, id)).allowed,
      (await store.acquire(long, id)).allowed,
    ];
    if (JSON.stringify(got) !== JSON.stringify(['2,1', true, true, false, true, false])) shared.push(id);
  };
  for (let from = 0; from < identities.length; from += CONCURRENT) {
    await Promise.all(identities.slice(from, from + CONCURRENT).map(one));
  }
  return { shared, ms: performance.now() - started };
}

async function scanAll(nodes: readonly Redis[], prefix: string): Promise<string[]> {
  const keys = new Set<string>();
  for (const node of nodes) {
    let cursor = '0';
    let rounds = 0;
    do {
      const [next, batch] = await node.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1_000);
      cursor = next;
      for (const key of batch) keys.add(key);
      rounds += 1;
    } while (cursor !== '0' && rounds < 10_000);
  }
  return [...keys];
}

const identities = corpus();
let redis: Redis | undefined;
let cluster: Cluster | undefined;

beforeAll(() => {
  redis = redisClient(inject('redisUrl'));
  cluster = clusterClient(inject('redisClusterNodes'));
});

afterAll(() => {
  redis?.disconnect();
  cluster?.disconnect();
});

describe('hostile identities', () => {
  it.each(['redis', 'cluster'] as const)('never share a bucket and keep keys short on %s', async (where) => {
    const client = where === 'redis' ? redis! : cluster!;
    const prefix = uniquePrefix(`identities ${where}`);
    const store = new RedisStore(client, { prefix });

    const keys = identities.flatMap((id) => [store.keyFor(short, id), store.keyFor(long, id)]);
    const outcome = await drainEach(store, identities);
    const nodes = where === 'redis' ? [redis!] : cluster!.nodes('master');
    const stored = await scanAll(nodes, prefix);
    const longest = Math.max(...stored.map((key) => key.length));
    const longestBytes = Math.max(...stored.map((key) => Buffer.byteLength(key)));
    const maxChars = Math.max(...identities.map((id) => id.length));
    const tooLong = stored.filter((key) => {
      const bucket = key.endsWith(long.name) ? long : short;
      return key.length > prefix.length + IDENTITY_PART + bucket.name.length;
    });

    console.log(
      `[identities/${where}] ${identities.length} distinct identities (up to ${maxChars} UTF-16 units) × 2 buckets in ${round(outcome.ms, 0)} ms: ` +
        `${identities.length - outcome.shared.length} got exactly their own burst, ${outcome.shared.length} did not; ` +
        `${new Set(keys).size} distinct key names for ${keys.length} (identity, bucket) pairs, ${stored.length} keys in Redis; ` +
        `longest key ${longest} chars / ${longestBytes} bytes (bound ${prefix.length} + ${IDENTITY_PART} + ${long.name.length} = ${prefix.length + IDENTITY_PART + long.name.length})`,
    );

    expect(outcome.shared.map((id) => JSON.stringify(id.slice(0, 50)))).toEqual([]);
    expect(new Set(keys).size).toBe(keys.length);
    expect(stored.sort()).toEqual([...keys].sort());
    expect(tooLong).toEqual([]);
    expect(longestBytes).toBe(longest); // ASCII only: nothing of the identity leaks in raw
  });

  it('never share a bucket in a MemoryStore', async () => {
    const store = new MemoryStore();
    const outcome = await drainEach(store, identities);
    await store.close();
    console.log(`[identities/memory] ${identities.length} identities: ${outcome.shared.length} did not get exactly their own burst (${round(outcome.ms, 0)} ms)`);
    expect(outcome.shared).toEqual([]);
  });
});
