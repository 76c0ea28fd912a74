import type { TokenBucket } from '../token-bucket.js';
import type { AcquireRequest, Admission, BatchAdmission, BatchCheck, BucketKey, BucketStore, DeniedRequest } from './bucket-store.js';
import type { BucketTerms } from './bucket-terms.js';
import { termsOf, timeOf } from './bucket-terms.js';
import type { FullAt } from './full-at.js';
import { formatFullAt, parseFullAt } from './full-at.js';
import { LuaScript } from './lua-script.js';
import type { SharedAnswer, SharedRequest } from './coalescer.js';
import { ALONE, Coalescer } from './coalescer.js';
import type { RedisStoreClient, ScriptClient } from './redis-client.js';
import { NotRun, scriptClient } from './redis-client.js';
import { DEFAULT_MAX_RECEIPTS, ReceiptBook } from './receipts.js';
import { tokensReturned } from './returns.js';
import type { SlotReply, Taken } from './slots.js';
import { acquireAcrossSlots, NEVER, NOT_SHORT, parseAcquireReply, takenOfSlot } from './slots.js';
import { DEFAULT_PREFIX, identityTag, redisKey, validatePrefix } from './redis-keys.js';
import {
  acquireOne,
  assertBucket,
  assertCost,
  checked,
  denial,
  keyString,
  measuredLast,
  pairKey,
  refundPairs,
  validateRequests,
} from './validate.js';

export interface RedisStoreOptions {
  /** Prefix of every key the store writes. Default `DEFAULT_PREFIX` (`"tb:"`). No braces. */
  prefix?: string;
  /**
   * How many (bucket, key) pairs the store remembers its takes of, so that
   * `refund` can give them back. Default `DEFAULT_MAX_RECEIPTS` (10,000); 0
   * turns refunds off.
   */
  maxReceipts?: number;
}

/** No time at all. */
const NONE: FullAt = { at: 0, num: 0, den: 1 };


/** Starts a shared call's group that is a Cluster node (its address follows); a slot's group starts with `{`. */
const NODE = '@';

/** Appended to a bucket's key, its reset mark's (lua/reset.lua): bucket names cannot hold `!`. */
const RESET_MARK = '!reset';

let acquireScript: LuaScript | undefined;
let acquireEachScript: LuaScript | undefined;
let acquireOnNodeScript: LuaScript | undefined;
let refundScript: LuaScript | undefined;
let resetScript: LuaScript | undefined;

/**
 * Token buckets in Redis or Redis Cluster, through ioredis, iovalkey or
 * node-redis 5 or 6. Each acquire is one Lua script call that reads Redis
 * `TIME`, so every process sharing the Redis spends from the same buckets
 * and no token is spent twice.
 */
export class RedisStore<Client extends RedisStoreClient = RedisStoreClient> implements BucketStore {
  /** The client the store was given. */
  readonly client: Client;
  readonly prefix: string;
  private readonly acquireLua: LuaScript;
  private readonly acquireEachLua: LuaScript;
  /** lua/acquire-each.lua for one Cluster node's keys of several slots: Redis 7's flag lets it reach them. */
  private readonly acquireOnNodeLua: LuaScript;
  private readonly refundLua: LuaScript;
  private readonly resetLua: LuaScript;
  private readonly receipts: ReceiptBook;
  /** Every script call goes through it; on ioredis and iovalkey, on a connection of the store's own, which never sends a call twice. */
  private readonly redis: ScriptClient;
  /** Acquires sent (or waiting to share a call) and not answered: while there are any, a new one waits for its tick's end to share a call. */
  private inFlight = 0;
  /** Acquires of one tick bound for one node, issued while another is in flight, share a script call. */
  private readonly coalescer: Coalescer;
  /**
   * On a Cluster, whether a shared call may serve a node's keys of several slots: until a node
   * cannot read the script's flags line (Redis 6.2), after which calls are shared per hash slot.
   */
  private perNode = true;
  /**
   * On a client whose connections may reach Redis out of order (a node-redis
   * pool): the calls sent and not answered, and the latest reset, which waits
   * for them and which every later call waits for. So Redis runs a reset
   * after everything sent before it and before everything sent after it, as
   * on one connection (`notResetSince`).
   */
  private readonly unanswered = new Set<Promise<unknown>>();
  private barrier: Promise<unknown> | undefined;

  /**
   * @param client An ioredis or iovalkey `Redis` or `Cluster`, or a connected
   *   node-redis 5 or 6 client, pool or cluster (`store.client` is this object);
   *   anything else is a `TypeError`. Give it the fail-fast options of
   *   docs/redis.md.
   * @param options `prefix` (default `"tb:"`) and `maxReceipts` (default 10,000).
   */
  constructor(client: Client, options: RedisStoreOptions = {}) {
    const maxReceipts = options.maxReceipts ?? DEFAULT_MAX_RECEIPTS;
    if (!Number.isSafeInteger(maxReceipts) || maxReceipts < 0) {
      throw new RangeError(`RedisStore option "maxReceipts" must be a non-negative integer, got ${String(maxReceipts)}`);
    }
    this.client = client;
    this.prefix = validatePrefix(options.prefix ?? DEFAULT_PREFIX);
    acquireScript ??= new LuaScript('acquire.lua');
    acquireEachScript ??= new LuaScript('acquire-each.lua', { shared: true });
    acquireOnNodeScript ??= new LuaScript('acquire-each.lua', { shared: true, header: '#!lua flags=allow-cross-slot-keys' });
    refundScript ??= new LuaScript('refund.lua');
    // A reset goes by source: answered NOSCRIPT (after SCRIPT FLUSH) and sent again, it would run
    // after calls made after it, and take back what they took.
    resetScript ??= new LuaScript('reset.lua', { bySource: true });
    this.acquireLua = acquireScript;
    this.acquireEachLua = acquireEachScript;
    this.acquireOnNodeLua = acquireOnNodeScript;
    this.refundLua = refundScript;
    this.resetLua = resetScript;
    this.receipts = new ReceiptBook(maxReceipts, { afterTurn: true });
    // It opens a connection, which nothing before it may leave behind by throwing.
    this.redis = scriptClient(client);
    this.coalescer = new Coalescer(
      (group, keys, args) => (group.startsWith(NODE) ? this.runOnNode(group.slice(NODE.length), keys, args) : this.run(this.acquireEachLua, keys, args)),
      this.redis.sharedKeys,
      this.redis.firstSharedKeys,
    );
  }

  /** The Redis key of one (bucket, key) pair. */
  keyFor(bucket: TokenBucket, key: BucketKey): string {
    return redisKey(this.prefix, identityTag(keyString(key)), bucket);
  }

  /** Takes `cost` (default 1) tokens from the key's bucket, or nothing when it holds fewer: one script call. */
  async acquire(bucket: TokenBucket, key: BucketKey, cost = 1): Promise<Admission> {
    return this.operation(() => this.acquireNow(bucket, key, cost));
  }

  private async acquireNow(bucket: TokenBucket, key: BucketKey, cost = 1): Promise<Admission> {
    assertBucket(bucket);
    assertCost(cost, bucket);
    const terms = termsOf(bucket);
    if (terms.huge) return acquireOne(this, bucket, key, cost);
    const tag = identityTag(keyString(key));
    const redisKeyOf = redisKey(this.prefix, tag, bucket);
    // Sent at once when no other acquire is in flight (a quiet store adds nothing to its latency);
    // else at the tick's end, to share a call with the tick's others.
    const busy = this.inFlight > 0;
    this.inFlight += 1;
    try {
      const shared = busy ? await this.coalescer.submit(this.groupOf(tag, redisKeyOf), [{ key: redisKeyOf, terms, cost }]) : ALONE;
      if (shared !== ALONE) {
        const whole = shared.remaining[0]!;
        if (!shared.taken) return { allowed: false, retryAfterMs: shared.waits[0] === NEVER ? null : shared.waits[0]! };
        if (cost > 0) this.remember(redisKeyOf, terms, cost, shared.takenAt, whole === terms.capacity - cost);
        return { allowed: true, remaining: whole };
      }
      const args = terms.tokens === 1 ? [terms.capacity, terms.period, cost] : [terms.capacity, terms.tokens, terms.period, cost];
      const reply = await this.run(this.acquireLua, [redisKeyOf], args);
      if (!Array.isArray(reply) || reply.length !== 3) parseAcquireReply(reply, 1, false, false);
      const [flag, whole, third] = reply as [number, number | string, number];
      if (flag === 1) {
        if (cost > 0) this.remember(redisKeyOf, terms, cost, third, Number(whole) === terms.capacity - cost);
        return { allowed: true, remaining: Number(whole) };
      }
      if (flag !== 0) parseAcquireReply(reply, 1, false, false);
      return { allowed: false, retryAfterMs: third === NEVER ? null : Number(third) };
    } finally {
      this.inFlight -= 1;
    }
  }

  /**
   * Takes every enforced request's tokens, or none when one of them is
   * short; measured requests (`measure: true`) are taken too when every
   * request would be admitted, and reported in `wouldDeny` otherwise. One
   * script call when every key shares a hash slot (always, on a single Redis).
   */
  async acquireAll(requests: readonly AcquireRequest[]): Promise<BatchAdmission> {
    return this.operation(() => this.acquireAllNow(requests));
  }

  private async acquireAllNow(requests: readonly AcquireRequest[]): Promise<BatchAdmission> {
    const keys = validateRequests(requests);
    if (requests.length === 0) return { allowed: true, remaining: [] };
    const tags = keys.map(identityTag);
    const ids = requests.map(({ bucket }, i) => redisKey(this.prefix, tags[i]!, bucket));
    const busy = this.inFlight > 0; // as in `acquire`
    this.inFlight += 1;
    try {
      let taken: Taken | undefined;
      const shareable = busy && this.oneSlot(tags) ? sharedRequests(requests, ids, this.coalescer.maxKeys) : undefined;
      if (shareable !== undefined) {
        const shared = await this.coalescer.submit(this.groupOf(tags[0]!, ids[0]!), shareable);
        if (shared !== ALONE) taken = takenOf(shared);
      }
      taken ??= this.oneSlot(tags)
        ? await this.acquireSlot(requests, tags, requests.map((_, i) => i))
        : await this.acquireAcrossSlots(requests, tags);
      const { admission, takenAt } = taken;
      if (admission.allowed) {
        const twice = requests.length > 1 ? repeated(ids) : undefined;
        takenAt.forEach((at, i) => {
          const { bucket, cost } = requests[i]!;
          const id = ids[i]!;
          // From a full bucket: it left the capacity less this request (unknown for a pair asked for twice).
          const fromFull = admission.remaining[i] === bucket.capacity - cost && twice?.has(id) !== true;
          if (at !== null && cost > 0) this.remember(id, termsOf(bucket), cost, at, fromFull);
        });
      }
      return admission;
    } finally {
      this.inFlight -= 1;
    }
  }

  /**
   * Where an operation of the identity `tag`, whose first key is `key`, may share a call: one group on
   * a single Redis; on a Cluster, the node serving its slot (`NODE` and its address), or the slot itself
   * while no node is known or calls cannot serve several slots.
   */
  private groupOf(tag: string, key: string): string {
    if (!this.redis.cluster) return '';
    const node = this.perNode ? this.redis.nodes?.of(key) : undefined;
    return node === undefined ? tag : NODE + node;
  }

  /**
   * A shared call on the Cluster node at `address`, its keys in ARGV (lua/acquire-each.lua's -m): ALONE
   * when the node ran nothing of it (its first key moved, say), so that each operation runs alone.
   */
  private async runOnNode(address: string, keys: readonly string[], args: readonly number[]): Promise<unknown> {
    const argv: (string | number)[] = [-args[0]!, ...args.slice(1)];
    try {
      // the keys follow in ARGV, written as the client writes keys (an ioredis keyPrefix before each)
      return await this.redis.nodes!.runScript(address, this.acquireOnNodeLua, [keys[0]!], argv, keys);
    } catch (error) {
      if (!(error instanceof NotRun)) throw error;
      if (error.unreadable) this.perNode = false; // Redis 6.2: shared per slot from now on
      return ALONE;
    }
  }

  /**
   * Notes `cost` tokens taken from the key `id` at `at` µs (Redis TIME), from a full bucket or not, for a
   * refund. A take made at or before a reset of the key that this store has seen answered is not noted
   * (`ReceiptBook.forget`): however late its reply comes, the reset gave its tokens back.
   */
  private remember(id: string, terms: BucketTerms, cost: number, at: number, fromFull: boolean): void {
    if (!Number.isSafeInteger(at)) throw new Error(`token bucket script returned an unexpected time: ${String(at)}`);
    this.receipts.record(id, terms, cost, at, fromFull);
  }

  /** What `acquireAll` would answer now; nothing is written. */
  async checkAll(requests: readonly AcquireRequest[]): Promise<BatchCheck> {
    return this.operation(() => this.checkAllNow(requests));
  }

  private async checkAllNow(requests: readonly AcquireRequest[]): Promise<BatchCheck> {
    const keys = validateRequests(requests, 'checkAll');
    if (requests.length === 0) return checked([], []);
    const tags = keys.map(identityTag);
    const remaining = new Array<number>(requests.length).fill(0);
    const denied: DeniedRequest[] = [];
    await Promise.all(
      this.slots(tags).map(async (indexes) => {
        const reply = await this.runAcquire(requests, tags, indexes, true);
        indexes.forEach((index, position) => {
          remaining[index] = reply.remaining[position]!;
          const w = reply.waits[position]!;
          if (w !== NOT_SHORT) denied.push({ index, retryAfterMs: w === NEVER ? null : w });
        });
      }),
    );
    return checked(denied.sort((a, b) => a.index - b.index), remaining);
  }

  /** Gives back up to `tokens` this store took from the key's bucket (see `refundAll`). */
  async refund(bucket: TokenBucket, key: BucketKey, tokens: number): Promise<void> {
    assertBucket(bucket);
    assertCost(tokens, bucket);
    await this.refundAll([{ bucket, key, cost: tokens }]);
  }

  /**
   * Gives back up to `cost` tokens per request, of those this store took
   * (it remembers up to `maxReceipts` pairs): never more than is still
   * outstanding of them, so tokens that have refilled since are not given
   * twice, and never above capacity. One script call per hash slot; resolves
   * to the whole tokens each request's bucket holds after it.
   */
  async refundAll(requests: readonly AcquireRequest[]): Promise<number[]> {
    return this.operation(() => this.refundAllNow(requests));
  }

  private async refundAllNow(requests: readonly AcquireRequest[]): Promise<number[]> {
    const keys = validateRequests(requests, 'refundAll');
    if (requests.length === 0) return [];
    const pairs = refundPairs(requests, keys).map((pair) => {
      const tag = identityTag(pair.key);
      const receipt = redisKey(this.prefix, tag, pair.bucket);
      const claim = this.receipts.claim(receipt, termsOf(pair.bucket), pair.tokens);
      const bound = claim === undefined ? '0' : claim.bound.map(({ end, share, takenAt }) => `${formatFullAt(end)};${formatFullAt(share)};${takenAt}`).join(',');
      return { ...pair, receipt, tag, tokens: claim === undefined ? 0 : pair.tokens, bound, claim, remaining: 0 };
    });
    const slots = this.slots(pairs.map((p) => p.tag));
    await Promise.all(
      slots.map(async (indexes) => {
        const group = indexes.map((i) => pairs[i]!);
        let left: number[] | undefined;
        try {
          ({ remaining: left } = await this.runRefund(group.map((p) => ({ ...p, key: p.receipt }))));
          group.forEach((pair, j) => (pair.remaining = left![j]!));
        } finally {
          // A call that failed may still have given its tokens back (its claim stays drawn).
          tokensReturned(
            this,
            group.map((pair, j) => ({ bucket: pair.bucket, key: pair.key, left: left?.[j] })),
          );
        }
      }),
    );
    const byPair = new Map(pairs.map((p) => [p.id, p.remaining]));
    return requests.map(({ bucket }, i) => byPair.get(pairKey(bucket, keys[i]!)) ?? 0);
  }

  async reset(bucket: TokenBucket, key: BucketKey): Promise<boolean> {
    return this.operation(() => this.resetNow(bucket, key));
  }

  private async resetNow(bucket: TokenBucket, key: BucketKey): Promise<boolean> {
    assertBucket(bucket);
    const id = this.keyFor(bucket, key);
    const terms = termsOf(bucket);
    // Whatever this store took before the reset comes back with it. Its receipts are dropped now, and
    // again once the reset's Redis TIME is known, with every take made at or before it: so are takes
    // whose replies arrive after it was sent, however late (`remember`). lua/reset.lua's mark voids
    // what any process took before it, for every refund Redis runs after it.
    this.receipts.forget(id);
    try {
      const reply = await this.run(this.resetLua, [id, id + RESET_MARK], [terms.tokens, terms.refillUs]);
      const [used, at] = Array.isArray(reply) ? (reply as unknown[]) : [];
      if (!(used === 0 || used === 1) || !Number.isSafeInteger(at)) {
        throw new Error(`token bucket reset script returned an unexpected reply: ${JSON.stringify(reply)}`);
      }
      this.receipts.forget(id, at as number);
      return used === 1;
    } finally {
      tokensReturned(this, [{ bucket, key }]);
    }
  }

  /**
   * Runs one of the store's operations, begun now: on a connection of the store's own, refused once
   * the client has begun to close, and finished on it when begun before (`ScriptClient.operation`).
   */
  private operation<T>(run: () => Promise<T>): Promise<T> {
    return this.redis.operation === undefined ? run() : this.redis.operation(run);
  }

  /**
   * Closes the store's own connection (the client stays open; ending the
   * client closes it too). A later call opens it again.
   */
  async close(): Promise<void> {
    // Acquires issued before it in its tick go out first (they wait for the tick's end to share a
    // call, and one alone is sent once its answer is in): sent after, they would open it again.
    if (!this.coalescer.idle) await new Promise((resolve) => setImmediate(resolve));
    this.redis.close();
  }

  private oneSlot(tags: readonly string[]): boolean {
    return !this.redis.cluster || tags.every((t) => t === tags[0]);
  }

  /** Request indexes grouped by hash slot (identity), in first-seen order; one group on a single Redis. */
  private slots(tags: readonly string[]): number[][] {
    if (this.oneSlot(tags)) return [tags.map((_, i) => i)];
    const groups = new Map<string, number[]>();
    tags.forEach((tag, i) => {
      const group = groups.get(tag);
      if (group) group.push(i);
      else groups.set(tag, [i]);
    });
    return [...groups.values()];
  }

  /** One script call for requests sharing a slot, mapped back to request indexes. */
  private async acquireSlot(
    requests: readonly AcquireRequest[],
    tags: readonly string[],
    indexes: readonly number[],
    withFullAt = false,
  ): Promise<Taken> {
    return takenOfSlot(requests, indexes, await this.runAcquire(requests, tags, indexes, false, withFullAt));
  }

  /** On a Cluster, requests of several hash slots: each slot's in turn (slots.ts). */
  private acquireAcrossSlots(requests: readonly AcquireRequest[], tags: readonly string[]): Promise<Taken> {
    return acquireAcrossSlots(
      {
        store: this,
        prefix: this.prefix,
        slots: (t) => this.slots(t),
        acquireSlot: (r, t, i) => this.acquireSlot(r, t, i, true),
        check: (r, t, i) => this.runAcquire(r, t, i, true),
        refund: (pairs) => this.runRefund(pairs),
      },
      requests,
      tags,
    );
  }

  /**
   * Runs lua/acquire.lua for requests sharing one slot: enforced first (a check: all, in order).
   * `withFullAt` keeps the mode argument, so that the reply carries each key's full-at time.
   */
  private async runAcquire(
    requests: readonly AcquireRequest[],
    tags: readonly string[],
    indexes: readonly number[],
    check: boolean,
    withFullAt = false,
  ): Promise<SlotReply> {
    const order = check ? indexes : measuredLast(indexes.map((i) => requests[i]!)).map((p) => indexes[p]!);
    const enforced = check ? order.length : order.filter((i) => requests[i]!.measure !== true).length;
    const args: (string | number)[] = [check ? 'check' : enforced];
    const tail: number[] = [];
    const keys: string[] = [];
    for (const i of order) {
      const { bucket, cost } = requests[i]!;
      const terms = termsOf(bucket);
      args.push(terms.capacity, terms.tokens, terms.period, cost);
      if (terms.huge) tail.push(...terms.fullTime, ...timeOf(cost, terms));
      keys.push(redisKey(this.prefix, tags[i]!, bucket));
    }
    // Every request enforced, no key twice, no huge bucket: the script's common case, without a mode
    // argument, and without T when every token is a whole number of µs.
    const moded = check || withFullAt || enforced < order.length || tail.length > 0 || (keys.length > 1 && new Set(keys).size < keys.length);
    if (!moded) {
      args.shift();
      if (args.every((_, j) => j % 4 !== 1 || args[j] === 1)) {
        const three: (string | number)[] = [];
        for (let j = 0; j < args.length; j += 4) three.push(args[j]!, args[j + 2]!, args[j + 3]!);
        args.splice(0, args.length, ...three);
      }
    }
    const reply = await this.run(this.acquireLua, keys, tail.length > 0 ? args.concat(tail) : args);
    const parsed = parseAcquireReply(reply, order.length, check, moded);
    // back from the order sent to the order of `indexes`
    const position = new Map(order.map((i, p) => [i, p]));
    const pick = <T>(values: T[]): T[] => indexes.map((i) => values[position.get(i)!]!);
    return {
      flag: parsed.flag,
      remaining: pick(parsed.remaining),
      waits: pick(parsed.waits),
      takenAt: parsed.takenAt,
      fullAt: parsed.fullAt && pick(parsed.fullAt),
    };
  }

  /**
   * Runs lua/refund.lua for pairs sharing one slot. `bound` is its X: the
   * takes drawn from (`end;share;takenAt,…`), or '0'.
   */
  private async runRefund(
    pairs: readonly { bucket: TokenBucket; key: string; tokens: number; bound: string }[],
  ): Promise<{ remaining: number[]; given: FullAt[] }> {
    const args: (string | number)[] = [];
    const tail: number[] = [];
    for (const { bucket, tokens, bound } of pairs) {
      const terms = termsOf(bucket);
      const asked = bound === '0' ? 0 : tokens;
      args.push(terms.capacity, terms.tokens, terms.period, asked, bound);
      if (terms.huge) tail.push(...terms.fullTime, ...timeOf(asked, terms));
    }
    const reply = await this.run(
      this.refundLua,
      pairs.flatMap((p) => [p.key, p.key + RESET_MARK]),
      tail.length > 0 ? args.concat(tail) : args,
    );
    const n = pairs.length;
    if (!Array.isArray(reply) || reply.length !== 2 * n) {
      throw new Error(`token bucket refund script returned an unexpected reply: ${JSON.stringify(reply)}`);
    }
    const given = reply.slice(n).map((g) => (g === 0 ? NONE : parseFullAt(g)));
    if (given.some((g) => g === null)) throw new Error(`token bucket refund script returned an unexpected reply: ${JSON.stringify(reply)}`);
    return { remaining: reply.slice(0, n).map(Number), given: given as FullAt[] };
  }

  /**
   * Runs a script call. On a client whose connections may reach Redis out of order (a pool), a reset
   * waits for whole calls and calls wait for whole resets: Redis runs a reset where it was issued among
   * the store's calls, as on one connection.
   */
  private run(script: LuaScript, keys: readonly string[], args: readonly (string | number)[]): Promise<unknown> {
    if (this.redis.ordered) return this.send(script, keys, args);
    if (script === this.resetLua) {
      const before = [...this.unanswered];
      const previous = this.barrier;
      const reset = (async () => {
        await Promise.allSettled(previous === undefined ? before : [previous, ...before]);
        return this.send(script, keys, args);
      })();
      this.barrier = reset;
      const settled = (): void => {
        if (this.barrier === reset) this.barrier = undefined;
      };
      reset.then(settled, settled);
      return reset;
    }
    // after the latest reset sent before it (which runs after every earlier one), never a later one
    const barrier = this.barrier;
    const call = (async () => {
      if (barrier !== undefined) await barrier.catch(() => undefined);
      return this.send(script, keys, args);
    })();
    this.unanswered.add(call);
    const answered = (): void => void this.unanswered.delete(call);
    call.then(answered, answered);
    return call;
  }

  private async send(script: LuaScript, keys: readonly string[], args: readonly (string | number)[]): Promise<unknown> {
    try {
      return await script.run(this.redis, keys, args);
    } catch (error) {
      if (error instanceof Error && /syntax error/i.test(error.message)) {
        error.message = `${error.message} (RedisStore needs Redis 6.2 or later, for SET … PXAT)`;
      }
      throw error;
    }
  }
}

/**
 * The requests of an acquireAll that may share a script call with other
 * operations (lua/acquire-each.lua): every one enforced, none huge, no key
 * twice, few enough; undefined otherwise.
 */
function sharedRequests(requests: readonly AcquireRequest[], ids: readonly string[], maxKeys: number): SharedRequest[] | undefined {
  if (requests.length > maxKeys) return undefined;
  const shared: SharedRequest[] = [];
  for (const [i, { bucket, cost, measure }] of requests.entries()) {
    const terms = termsOf(bucket);
    if (measure === true || terms.huge) return undefined;
    shared.push({ key: ids[i]!, terms, cost });
  }
  return requests.length > 1 && new Set(ids).size < ids.length ? undefined : shared;
}

/** An acquireAll's answer from a shared call. */
function takenOf(shared: SharedAnswer): Taken {
  const { remaining } = shared;
  if (shared.taken) return { admission: { allowed: true, remaining }, takenAt: remaining.map(() => shared.takenAt), fullAt: [] };
  const short: DeniedRequest[] = [];
  shared.waits.forEach((w, index) => {
    if (w !== NOT_SHORT) short.push({ index, retryAfterMs: w === NEVER ? null : w });
  });
  return { admission: denial(short, remaining), takenAt: remaining.map(() => null), fullAt: [] };
}

/** The ids that appear more than once. */
function repeated(ids: readonly string[]): Set<string> {
  const seen = new Set<string>();
  const twice = new Set<string>();
  for (const id of ids) (seen.has(id) ? twice : seen).add(id);
  return twice;
}
