import type { FullAt } from './full-at.js';
import { compareFullAt, shiftFullAt } from './full-at.js';

/** Default of `maxReceipts`: how many (bucket, key) pairs a store remembers its takes of, for refunds. */
export const DEFAULT_MAX_RECEIPTS = 10_000;

/** Takes of one pair kept apart; beyond this the latest two are merged. */
const TAKES_PER_PAIR = 8;

/** One take a store may still give back: the bucket's full-at time right after it, `at` + `num`/`den` µs. */
export interface Take {
  at: number;
  num: number;
  den: number;
  /** Tokens taken and not given back. */
  tokens: number;
  /** ms on the store's clock: when every one of those tokens has refilled. */
  refilledAtMs: number;
}

/** What a refund may give back: up to `tokens`, and no more refill time than is left before `after`. */
export interface Claim {
  after: FullAt;
  tokens: number;
  /** The takes drawn on, still kept: each moves earlier by the time the refund gives. */
  drawn: Take[];
}

const timeOf = (take: Take): FullAt => ({ at: take.at, num: take.num, den: take.den });

/**
 * The takes a store may give back. A refund can only be bounded by what the
 * store knows of the take: refill consumes a bucket's deficit from the
 * front, so of the tokens one take added, what is still outstanding is at
 * most the time until the bucket's full-at time right after it.
 *
 * A pair's takes are kept in order of that time. A refund is bounded by the
 * earliest one still outstanding (a later take's tokens lie further ahead
 * in the deficit, so that bound never exceeds what any of them still owes)
 * and draws its tokens from the latest ones, so two operations of one
 * identity each get theirs back. A take is dropped once its tokens have
 * refilled. Pairs live in two generations of `limit / 2`: when the young
 * one fills, the old one is forgotten, so memory stays bounded and each
 * take costs O(1), allocation-free once a pair's earlier takes have
 * refilled. A forgotten take is simply not given back.
 */
export class ReceiptBook {
  readonly #limit: number;
  #young = new Map<string, Take[]>();
  #old = new Map<string, Take[]>();

  constructor(limit: number) {
    this.#limit = limit;
  }

  /** Pairs remembered. */
  get size(): number {
    return this.#young.size + this.#old.size;
  }

  /** Notes `tokens` taken from `id`, whose bucket was full again at `at` + `num`/`den` µs right after. */
  record(id: string, at: number, num: number, den: number, tokens: number, refilledAtMs: number, nowMs: number): void {
    if (this.#limit === 0 || tokens <= 0) return;
    const takes = this.#young.get(id) ?? this.#old.get(id);
    if (takes === undefined) {
      if (this.#young.size >= Math.max(1, this.#limit >> 1)) {
        this.#old = this.#young;
        this.#young = new Map();
      }
      this.#young.set(id, [{ at, num, den, tokens, refilledAtMs }]);
      return;
    }
    let dead = 0;
    while (dead < takes.length && takes[dead]!.refilledAtMs <= nowMs) dead++;
    if (dead === takes.length) {
      // every earlier take has refilled: the entry starts afresh, reused in place
      const first = takes[0]!;
      first.at = at;
      first.num = num;
      first.den = den;
      first.tokens = tokens;
      first.refilledAtMs = refilledAtMs;
      takes.length = 1;
      return;
    }
    if (dead > 0) takes.splice(0, dead);
    const last = takes[takes.length - 1]!;
    if (last.at < at || (last.at === at && compareFullAt(last, { at, num, den }) <= 0)) {
      // the usual order: later than every take kept
      if (takes.length < TAKES_PER_PAIR) {
        takes.push({ at, num, den, tokens, refilledAtMs });
      } else {
        // merged into the latest, the pair keeps the earlier time: a bound that never grows
        last.tokens += tokens;
        last.refilledAtMs = Math.max(last.refilledAtMs, refilledAtMs);
      }
      return;
    }
    const take: Take = { at, num, den, tokens, refilledAtMs };
    let position = takes.length;
    while (position > 0 && compareFullAt(takes[position - 1]!, take) > 0) position--;
    takes.splice(position, 0, take);
    if (takes.length > TAKES_PER_PAIR) {
      // merged, the pair keeps the earlier time: a bound that never grows
      const last = takes.pop()!;
      const kept = takes[takes.length - 1]!;
      kept.tokens += last.tokens;
      kept.refilledAtMs = Math.max(kept.refilledAtMs, last.refilledAtMs);
    }
  }

  /** Takes up to `tokens` out of `id`'s takes, latest first; undefined when nothing is outstanding. */
  claim(id: string, tokens: number, nowMs: number): Claim | undefined {
    const takes = this.#live(id, nowMs);
    if (takes === undefined || tokens <= 0) return undefined;
    const after = timeOf(takes[0]!);
    const drawn: Take[] = [];
    let claimed = 0;
    while (claimed < tokens && takes.length > 0) {
      const last = takes[takes.length - 1]!;
      const share = Math.min(tokens - claimed, last.tokens);
      last.tokens -= share;
      claimed += share;
      if (last.tokens === 0) takes.pop();
      else drawn.push(last);
    }
    if (takes.length === 0) this.#forget(id);
    return { after, tokens: claimed, drawn };
  }

  /**
   * After a refund on `claim`: `given` is its bound less the refill time the
   * refund gave back. The takes it drew on end that much earlier now, so the
   * same tokens are never given back twice.
   */
  settle(id: string, claim: Claim, given: FullAt): void {
    if (compareFullAt(given, claim.after) >= 0 || claim.drawn.length === 0) return;
    for (const take of claim.drawn) {
      const moved = shiftFullAt(take, claim.after, given);
      take.at = moved.at;
      take.num = moved.num;
      take.den = moved.den;
    }
    (this.#young.get(id) ?? this.#old.get(id))?.sort(compareFullAt);
  }

  clear(): void {
    this.#young.clear();
    this.#old.clear();
  }

  #forget(id: string): void {
    if (!this.#young.delete(id)) this.#old.delete(id);
  }

  /** `id`'s takes whose tokens have not all refilled, or undefined. */
  #live(id: string, nowMs: number): Take[] | undefined {
    const takes = this.#young.get(id) ?? this.#old.get(id);
    if (takes === undefined) return undefined;
    let dead = 0;
    while (dead < takes.length && takes[dead]!.refilledAtMs <= nowMs) dead++;
    if (dead > 0) takes.splice(0, dead);
    if (takes.length === 0) {
      this.#forget(id);
      return undefined;
    }
    return takes;
  }
}
