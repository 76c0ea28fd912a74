import { createHash } from 'node:crypto';
import type { BucketKey } from '../stores/bucket-store.js';
import { sameDefinition } from '../stores/bucket-terms.js';
import { keyString } from '../stores/validate.js';
import type { TokenBucket } from '../token-bucket.js';

/** Default of `denyCache`: a replica remembers the store's denials until they expire. */
export const DEFAULT_DENY_CACHE = true;

/** The most (bucket, identity) pairs one limiter remembers; the least recently used goes first. */
export const DENY_CACHE_MAX_ENTRIES = 10_000;

/** Keys longer than this are remembered by their SHA-256, so 10,000 entries stay small whatever keys hold. */
const LONGEST_KEPT_KEY = 64;

/** One denial the store answered, in this replica's monotonic clock (`performance.now()`, ms). */
interface Entry {
  /** The bucket as it was charged: another plan's bucket of the same name does not match. */
  readonly bucket: TokenBucket;
  /** The cost the store denied. */
  readonly cost: number;
  /**
   * Until when a request for at least `cost` is surely denied: the moment the
   * call was sent plus the wait, less the millisecond the store's rounding up
   * may have added. The store decided at or after the send, so its bucket
   * cannot hold `cost` before then.
   */
  readonly deniedUntil: number;
  /**
   * When the bucket holds `cost` at the latest: the moment the answer arrived
   * plus the wait. The store decided at or before the answer, so a client
   * told to wait until then waits long enough.
   */
  readonly fitsBy: number;
}

/** What an admission left of a pair: `remaining` whole tokens at least, at `answeredAt`. */
interface Drained {
  readonly bucket: TokenBucket;
  readonly remaining: number;
  readonly answeredAt: number;
  /** When it would be full again, if nothing took any: the entry says nothing after that. */
  readonly fullBy: number;
}

/** What an admission's store call left of a pair: whole tokens, and when the call was sent and answered. */
export interface AdmissionLeft {
  readonly remaining: number;
  readonly sentAt: number;
  readonly answeredAt: number;
}

/** A store call under way for a pair, which later requests for it may wait for. */
export interface StoreCall {
  readonly bucket: TokenBucket;
  /** The cost it asks of the pair. */
  readonly cost: number;
  /** Settles with the call's result once it is answered and remembered (undefined if it failed). */
  readonly answered: Promise<unknown>;
  readonly sentAt: number;
  /** When the answer came; undefined until then. */
  answeredAt: number | undefined;
}

/** What `askedFor` and `asking` are given: an operation's charges. */
interface Request {
  readonly bucket: TokenBucket;
  readonly key: BucketKey;
  readonly cost: number;
  readonly measured: boolean;
}

/** A request the cache answers: its wait, in whole ms, rounded up, and the whole tokens the bucket holds. */
export interface CachedDenial {
  readonly retryAfterMs: number;
  /**
   * The whole tokens the bucket holds at least: what the store's wait says it
   * lacks of the denied cost, less what has refilled since (fewer when other
   * processes took some). Below the cost.
   */
  readonly remaining: number;
}

/**
 * What the store denied lately, per (bucket, identity), so a flood from one
 * identity costs the store one call per wait rather than one per request.
 *
 * It only ever denies what the store would deny: a bucket refills no faster
 * than its rate, so a bucket short of `cost` at the store's decision is still
 * short until the wait it gave has passed, unless tokens come back some other
 * way (a refund through this limiter drops the pair's entry; a `reset`
 * elsewhere reaches this replica only when the wait has passed).
 */
export class DenyCache {
  private readonly entries = new Map<string, Entry>();
  /** Store calls under way, by pair: the first one's cost, and when it has been answered and remembered. */
  private readonly pending = new Map<string, StoreCall>();
  /** Store calls under way, of every pair. */
  private inFlight = 0;
  /**
   * When tokens last came back to a pair while store calls were under way: a
   * denial sent before then may have been decided before the tokens came
   * back and answered after, so it is not remembered. Bounded like `entries`.
   */
  private readonly returns = new Map<string, number>();
  /**
   * What the latest admission of a pair left in it, when it was not full: an
   * operation denied for another bucket waits for these too, where they are
   * short of its cost (a remembered denial of the pair answers only costs at
   * least its own). Bounded like `entries`.
   */
  private readonly drained = new Map<string, Drained>();

  constructor(
    private readonly maxEntries = DENY_CACHE_MAX_ENTRIES,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Pairs remembered now (expired ones included until they are next looked up or pushed out). */
  get size(): number {
    return this.entries.size;
  }

  /** The store denied `cost` of the pair with `retryAfterMs`, asked at `sentAt` and answered at `answeredAt`. */
  remember(bucket: TokenBucket, key: BucketKey, cost: number, retryAfterMs: number, sentAt: number, answeredAt: number): void {
    const deniedUntil = sentAt + retryAfterMs - 1;
    if (!(deniedUntil > answeredAt)) return;
    const id = pairId(bucket, key);
    const returned = this.returns.get(id);
    if (returned !== undefined && returned >= sentAt) return;
    this.entries.delete(id);
    if (this.entries.size >= this.maxEntries) {
      const oldest = this.entries.keys().next();
      if (!oldest.done) this.entries.delete(oldest.value);
    }
    this.entries.set(id, { bucket, cost, deniedUntil, fitsBy: answeredAt + retryAfterMs });
  }

  /**
   * The wait of a request the store would surely deny now, or undefined when
   * it must go to the store: no denial remembered, a smaller cost than the
   * one denied, another plan's bucket, or the wait is over.
   */
  check(bucket: TokenBucket, key: BucketKey, cost: number): CachedDenial | undefined {
    if (this.entries.size === 0) return undefined;
    const id = pairId(bucket, key);
    const entry = this.entries.get(id);
    if (entry === undefined) return undefined;
    const now = this.now();
    if (!(now < entry.deniedUntil) || !sameDefinition(entry.bucket, bucket)) {
      this.entries.delete(id);
      return undefined;
    }
    if (cost < entry.cost) return undefined;
    // Most recently used last: a flooding identity is the last one pushed out.
    this.entries.delete(id);
    this.entries.set(id, entry);
    const extraMs = ((cost - entry.cost) * bucket.rate.periodUs) / bucket.rate.tokens / 1000;
    const tokensPerMs = (bucket.rate.tokens * 1000) / bucket.rate.periodUs;
    const lacking = (entry.fitsBy - now) * tokensPerMs;
    // A lower bound, floored: what a microsecond of the store's clock and the float error of two
    // large times refill is taken off first, or a bucket just short of a whole token reads as holding it.
    const slack = (0.001 + 4 * Number.EPSILON * Math.max(Math.abs(entry.fitsBy), Math.abs(now))) * tokensPerMs;
    const remaining = Math.min(entry.cost - 1, Math.max(0, Math.floor(entry.cost - lacking - slack)));
    return { retryAfterMs: Math.ceil(entry.fitsBy + extraMs - now), remaining };
  }

  /**
   * A store call under way whose denial would also deny one of these
   * requests: same pair, no more tokens asked.
   */
  askedFor(requests: readonly Request[]): StoreCall | undefined {
    if (this.pending.size === 0) return undefined;
    for (const { bucket, key, cost, measured } of requests) {
      if (measured) continue;
      const call = this.pending.get(pairId(bucket, key));
      if (call !== undefined && cost >= call.cost && sameDefinition(call.bucket, bucket)) return call;
    }
    return undefined;
  }

  /** A store call for these requests is under way until `answer` settles (after remembering its denials). */
  asking(requests: readonly Request[], answer: Promise<unknown>): void {
    const sentAt = this.now();
    let calls: StoreCall[] | undefined;
    this.inFlight += 1;
    const settled = (): void => {
      this.inFlight -= 1;
      if (this.inFlight === 0) this.returns.clear();
    };
    const answered = answer.then(
      (value) => {
        const answeredAt = this.now();
        for (const call of calls ?? []) call.answeredAt = answeredAt;
        return value;
      },
      () => undefined,
    );
    // After the answer's own continuation (which remembers its denials).
    void answered.then(settled);
    for (const { bucket, key, cost, measured } of requests) {
      if (measured) continue;
      const id = pairId(bucket, key);
      if (this.pending.has(id)) continue;
      const call: StoreCall = { bucket, cost, answered, sentAt, answeredAt: undefined };
      (calls ??= []).push(call);
      this.pending.set(id, call);
      void answered.then(() => {
        if (this.pending.get(id) === call) this.pending.delete(id);
      });
    }
  }

  /** Whether two keys are one identity of one bucket, as the store sees them. */
  static samePair(a: { bucket: TokenBucket; key: BucketKey }, b: { bucket: TokenBucket; key: BucketKey }): boolean {
    return a.bucket.name === b.bucket.name && keyString(a.key) === keyString(b.key);
  }

  /**
   * Tokens came back to the pair (a refund or a reset): a remembered denial
   * no longer holds. `left`, when the store said it, is the whole tokens the
   * bucket held after the refund: it replaces what an admission left (a
   * denial of another bucket still waits for this one's level), read as of
   * now, the latest the store can have read it.
   */
  forget(bucket: TokenBucket, key: BucketKey, left?: number): void {
    if (this.entries.size === 0 && this.drained.size === 0 && this.inFlight === 0) return;
    const id = pairId(bucket, key);
    this.entries.delete(id);
    const level = this.drained.get(id);
    this.drained.delete(id);
    if (left !== undefined && level !== undefined && left < bucket.capacity && sameDefinition(level.bucket, bucket)) {
      const answeredAt = this.now();
      const fullBy = answeredAt + ((bucket.capacity - left) * bucket.rate.periodUs) / bucket.rate.tokens / 1000;
      this.drained.set(id, { bucket, remaining: left, answeredAt, fullBy });
    }
    if (this.inFlight === 0) return;
    this.returns.delete(id);
    if (this.returns.size >= this.maxEntries) {
      const oldest = this.returns.keys().next();
      if (!oldest.done) this.returns.delete(oldest.value);
    }
    this.returns.set(id, this.now());
  }

  /**
   * The store admitted `cost` of the pair. A remembered denial of no more than
   * that is stale; one of more is still short, and later by the tokens just taken.
   * With `left`, what the admission left (unless the bucket is full) is kept
   * for `drainedWait`.
   */
  admitted(bucket: TokenBucket, key: BucketKey, cost: number, left?: AdmissionLeft): void {
    if (this.entries.size > 0 || this.drained.size > 0 || (left !== undefined && left.remaining < bucket.capacity)) this.admittedPair(pairId(bucket, key), bucket, cost, left);
  }

  private admittedPair(id: string, bucket: TokenBucket, cost: number, left: AdmissionLeft | undefined): void {
    // The latest admission says the most: an older one's level does not count the tokens taken since.
    this.drained.delete(id);
    const entry = this.entries.get(id);
    if (entry !== undefined) {
      if (cost < entry.cost && sameDefinition(entry.bucket, bucket)) {
        const takenMs = (cost * bucket.rate.periodUs) / bucket.rate.tokens / 1000;
        this.entries.set(id, { ...entry, deniedUntil: entry.deniedUntil + takenMs, fitsBy: entry.fitsBy + takenMs });
        // Still kept below when it left the pair short: the denial says nothing of costs below its own.
      } else {
        this.entries.delete(id);
      }
    }
    if (left === undefined || !(left.remaining < bucket.capacity)) return;
    // Tokens came back while it was on its way: what it left may be more now.
    const returned = this.returns.get(id);
    if (returned !== undefined && returned >= left.sentAt) return;
    if (this.drained.size >= this.maxEntries) {
      const oldest = this.drained.keys().next();
      if (!oldest.done) this.drained.delete(oldest.value);
    }
    const fullBy = left.answeredAt + ((bucket.capacity - left.remaining) * bucket.rate.periodUs) / bucket.rate.tokens / 1000;
    this.drained.set(id, { bucket, remaining: left.remaining, answeredAt: left.answeredAt, fullBy });
  }

  /**
   * For an operation denied already, the wait of a pair whose latest
   * admission this limiter saw, for a cost its remembered denial (if any) does
   * not answer: at least the time
   * `cost` takes to refill beyond what that admission left plus what has
   * refilled since (so never shorter than the store's, if nothing else takes
   * any), and the whole tokens the bucket holds at least. Undefined when
   * nothing is known or it would fit now.
   */
  drainedWait(bucket: TokenBucket, key: BucketKey, cost: number): CachedDenial | undefined {
    if (this.drained.size === 0) return undefined;
    const id = pairId(bucket, key);
    const level = this.drained.get(id);
    if (level === undefined) return undefined;
    const now = this.now();
    if (!(now < level.fullBy) || !sameDefinition(level.bucket, bucket)) {
      this.drained.delete(id);
      return undefined;
    }
    const tokensPerMs = (bucket.rate.tokens * 1000) / bucket.rate.periodUs;
    // A lower bound, as in `check`: the store's clock counts whole microseconds, and two large
    // times subtract with float error. Whole tokens are added to whole tokens, so a level near
    // 2^53 is not rounded up to the next one.
    const slack = (0.001 + 4 * Number.EPSILON * Math.max(Math.abs(level.answeredAt), Math.abs(now))) * tokensPerMs;
    const refilled = (now - level.answeredAt) * tokensPerMs - slack;
    const lacking = cost - level.remaining - refilled;
    if (!(lacking > 0)) return undefined;
    const remaining = Math.min(cost - 1, level.remaining + Math.max(0, Math.floor(refilled)));
    return { retryAfterMs: Math.ceil(lacking / tokensPerMs), remaining };
  }
}

/** Bucket names cannot hold NUL, so the pair stays unambiguous. */
function pairId(bucket: TokenBucket, key: BucketKey): string {
  const id = keyString(key);
  if (id.length <= LONGEST_KEPT_KEY) return `${bucket.name}\u0000${id}`;
  // A different separator keeps a hashed key from meeting a short key equal to its digest. Hashed
  // over UTF-16 code units, as the stores' keys are: UTF-8 would turn every lone surrogate into U+FFFD.
  return `${bucket.name}\u0001${createHash('sha256').update(id, 'utf16le').digest('base64')}`;
}
