import type { Cluster, Redis } from 'ioredis';
import type { TokenBucket } from '../token-bucket.js';
import type {
  AcquireRequest,
  Admission,
  BatchAdmission,
  BucketKey,
  BucketStore,
  DeniedRequest,
} from './bucket-store.js';
import { LuaScript } from './lua-script.js';
import { DEFAULT_PREFIX, identityTag, redisKey, validatePrefix } from './redis-keys.js';
import { acquireOne, assertBucket, denial, keyString, validateRequests } from './validate.js';

export interface RedisStoreOptions {
  /** Prefix of every key the store writes. Default `DEFAULT_PREFIX` (`"tb:"`). No braces. */
  prefix?: string;
}

const NOT_SHORT = -2;
const NEVER = -1;

let acquireScript: LuaScript | undefined;
let refundScript: LuaScript | undefined;

/**
 * Token buckets in Redis or Redis Cluster (ioredis). Each acquire is one
 * Lua script call that reads Redis `TIME`, so every process sharing the
 * Redis spends from the same buckets and no token is spent twice.
 */
export class RedisStore implements BucketStore {
  readonly client: Redis | Cluster;
  readonly prefix: string;
  private readonly acquireLua: LuaScript;
  private readonly refundLua: LuaScript;

  constructor(client: Redis | Cluster, options: RedisStoreOptions = {}) {
    if (client === null || typeof client !== 'object' || typeof client.evalsha !== 'function') {
      throw new TypeError('RedisStore needs an ioredis Redis or Cluster client');
    }
    this.client = client;
    this.prefix = validatePrefix(options.prefix ?? DEFAULT_PREFIX);
    acquireScript ??= new LuaScript('acquire.lua');
    refundScript ??= new LuaScript('refund.lua');
    this.acquireLua = acquireScript;
    this.refundLua = refundScript;
  }

  /** The Redis key of one (bucket, key) pair. */
  keyFor(bucket: TokenBucket, key: BucketKey): string {
    return redisKey(this.prefix, identityTag(keyString(key)), bucket);
  }

  acquire(bucket: TokenBucket, key: BucketKey, cost = 1): Promise<Admission> {
    return acquireOne(this, bucket, key, cost);
  }

  async acquireAll(requests: readonly AcquireRequest[]): Promise<BatchAdmission> {
    validateRequests(requests);
    if (requests.length === 0) return { allowed: true, remaining: [] };
    const tags = requests.map((r) => identityTag(keyString(r.key)));
    if (!this.client.isCluster || tags.every((t) => t === tags[0])) {
      return this.acquireGroup(requests, tags, requests.map((_, i) => i));
    }
    return this.acquireAcrossSlots(requests, tags);
  }

  async reset(bucket: TokenBucket, key: BucketKey): Promise<boolean> {
    assertBucket(bucket);
    return (await this.client.del(this.keyFor(bucket, key))) > 0;
  }

  private async acquireGroup(
    requests: readonly AcquireRequest[],
    tags: readonly string[],
    indexes: readonly number[],
    checkOnly = false,
  ): Promise<BatchAdmission> {
    const args = scriptArgs(requests, indexes);
    if (checkOnly) args.push('check');
    const reply = await this.acquireLua.run(this.client, this.keysOf(requests, tags, indexes), args);
    return parseReply(reply, indexes.length);
  }

  /**
   * On a Cluster, buckets of different identities can live in different hash
   * slots, which one script cannot reach. Each identity's group is acquired
   * in turn; when one is denied, the groups already taken are refunded and
   * the rest are only checked, so the denial still names every short request.
   */
  private async acquireAcrossSlots(requests: readonly AcquireRequest[], tags: readonly string[]): Promise<BatchAdmission> {
    const groups = new Map<string, number[]>();
    tags.forEach((tag, i) => {
      const group = groups.get(tag);
      if (group) group.push(i);
      else groups.set(tag, [i]);
    });
    const remaining: number[] = new Array<number>(requests.length).fill(0);
    const taken: number[][] = [];
    const denied: DeniedRequest[] = [];
    for (const indexes of groups.values()) {
      let result: BatchAdmission;
      try {
        result = await this.acquireGroup(requests, tags, indexes, denied.length > 0);
      } catch (error) {
        await this.refund(requests, tags, taken);
        throw error;
      }
      if (!result.allowed) {
        if (denied.length === 0) await this.refund(requests, tags, taken);
        for (const d of result.denied) denied.push({ index: indexes[d.index]!, retryAfterMs: d.retryAfterMs });
      } else if (denied.length === 0) {
        result.remaining.forEach((left, j) => (remaining[indexes[j]!] = left));
        taken.push(indexes);
      }
    }
    if (denied.length > 0) return denial(denied.sort((a, b) => a.index - b.index));
    return { allowed: true, remaining };
  }

  private async refund(requests: readonly AcquireRequest[], tags: readonly string[], taken: number[][]): Promise<void> {
    await Promise.all(
      taken.map((indexes) => this.refundLua.run(this.client, this.keysOf(requests, tags, indexes), scriptArgs(requests, indexes))),
    );
  }

  private keysOf(requests: readonly AcquireRequest[], tags: readonly string[], indexes: readonly number[]): string[] {
    return indexes.map((i) => redisKey(this.prefix, tags[i] ?? '', requests[i]!.bucket));
  }
}

function scriptArgs(requests: readonly AcquireRequest[], indexes: readonly number[]): (string | number)[] {
  const args: (string | number)[] = [];
  for (const i of indexes) {
    const { bucket, cost } = requests[i]!;
    args.push(bucket.capacity, bucket.rate.tokens, bucket.rate.periodUs, cost);
  }
  return args;
}

function parseReply(reply: unknown, count: number): BatchAdmission {
  if (!Array.isArray(reply) || reply.length !== count + 1) {
    throw new Error(`token bucket script returned an unexpected reply: ${JSON.stringify(reply)}`);
  }
  const values = reply.map(Number);
  if (values[0] === 1) return { allowed: true, remaining: values.slice(1) };
  const denied: DeniedRequest[] = [];
  values.slice(1).forEach((v, index) => {
    if (v !== NOT_SHORT) denied.push({ index, retryAfterMs: v === NEVER ? null : v });
  });
  return denial(denied);
}
