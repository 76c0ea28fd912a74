import type { BucketTerms } from './bucket-terms.js';
import { refillTime } from './bucket-terms.js';
import type { FullAt } from './full-at.js';

/** Default of `maxReceipts`: how many (bucket, key) pairs a store remembers its takes of, for refunds. */
export const DEFAULT_MAX_RECEIPTS = 10_000;

/**
 * What a store took of one pair and has not given back, as one chain: its
 * takes one after the other in the bucket, each starting when the one
 * before ends or when it is taken, whichever is later. Times are `at` +
 * `num`/`tokens` µs on the store's clock (Redis TIME).
 */
interface Chain {
  /** When the chain's tokens have all refilled at the earliest, however the bucket is shared. */
  endAt: number;
  endNum: number;
  /** When its earliest take was taken: a reset since (lua/reset.lua's mark) voids the chain. */
  since: number;
  /** The latest take's time: a reply overtaken by a later one does not restart the chain. */
  latest: number;
  /**
   * From when the chain is unbroken: its takes' refill covers every instant from
   * here to its end (it last started afresh here). A take whose reply comes after
   * a later take's, taken within that stretch, pushes the whole stretch back.
   */
  start: number;
  /** The rate the takes were taken at, reduced: `tokens` every `period` µs (0: no take since a reset). */
  tokens: number;
  period: number;
  /** The latest reset of the pair seen answered (its Redis TIME, µs; 0 for none): a take at or before it is not owed. */
  floor: number;
}

/** What a refund may give back (lua/refund.lua's X): at most `share`, and nothing past `end`. */
export interface Claim {
  bound: { end: FullAt; share: FullAt; takenAt: number }[];
}

/**
 * The takes a store may give back, per (bucket, key) pair, so that a refund
 * never makes a bucket fuller than it would be had the tokens it gives back
 * never been taken.
 *
 * Refill consumes a bucket's deficit from the front, and a store's takes of
 * a pair lie in it one behind the other (other processes' takes between
 * them only push them back). So their tokens have refilled no sooner than
 * their chain's end: when they would be, were they alone in the bucket. A
 * refund does not say which take it is for; it is counted from the chain's
 * end, as if for the latest takes, which lie furthest back and so owe the
 * most (the counterfactual that is fullest): it gives back at most the
 * tokens asked and at most what of the chain is still ahead of now
 * (lua/refund.lua reads now on Redis's clock), and the chain's end moves
 * earlier by the tokens asked at once, so that a concurrent refund draws on
 * what is left. Within one process, where every take is in the chain, a
 * refund is then exact: what refilled meanwhile went to the front of the
 * bucket, ahead of the tokens given back.
 *
 * A take from a full bucket (nothing of the chain is left) starts the chain
 * afresh, as does a take at another rate; a refund at a rate other than the
 * chain's gives nothing back. `forget` (a reset) drops the pair's takes and,
 * given the reset's time, keeps it as the pair's floor: a take made at or
 * before it, whose reply comes late, is not entered. A reset by another
 * process voids the chain through its mark (lua/reset.lua). Pairs, floors
 * included, live in two generations of `limit / 2`: when the young one
 * fills, the old one is forgotten, so memory stays bounded whatever is in
 * flight; a forgotten take is not given back.
 *
 * With `afterTurn` (a store whose takes are answered over a network), a
 * take is noted in its reply's turn and entered in the chains after that
 * turn (one `setImmediate` at a time), in the order noted: so the
 * bookkeeping runs while the caller's next call is on its way to Redis, not
 * between a reply and that call. Anything that reads the chains (`claim`,
 * `forget`, `size`) enters what is noted first, so it sees every take noted
 * before it. Without it (the memory store, which has no wait to fill), a
 * take is entered at once and the book uses no timer.
 */
export class ReceiptBook {
  readonly #limit: number;
  readonly #afterTurn: boolean;
  #young = new Map<string, Chain>();
  #old = new Map<string, Chain>();
  /** Takes noted and not yet entered, in the order noted. */
  #noted: Noted[] = [];
  /** Whether an immediate that enters the noted takes is pending. */
  #entering = false;
  readonly #enterNoted = (): void => {
    this.#entering = false;
    this.#enter();
  };

  constructor(limit: number, options: { afterTurn?: boolean } = {}) {
    this.#limit = limit;
    this.#afterTurn = options.afterTurn === true;
  }

  /** Pairs remembered. */
  get size(): number {
    this.#enter();
    return this.#young.size + this.#old.size;
  }

  /**
   * Notes `cost` tokens taken from `id` at `now` µs on the store's clock;
   * `fromFull`: the bucket was full before (so nothing taken before is owed).
   */
  record(id: string, terms: BucketTerms, cost: number, now: number, fromFull: boolean): void {
    if (this.#limit === 0 || cost <= 0) return;
    if (!this.#afterTurn) {
      this.#take(id, terms, cost, now, fromFull);
      return;
    }
    // entered after this turn; a turn that notes very many enters them at once
    if (this.#noted.push({ id, terms, cost, now, fromFull }) >= MAX_NOTED) this.#enter();
    else if (!this.#entering) {
      this.#entering = true;
      setImmediate(this.#enterNoted);
    }
  }

  /** Enters the noted takes in the chains, in the order noted. */
  #enter(): void {
    const noted = this.#noted;
    if (noted.length === 0) return;
    this.#noted = [];
    for (const { id, terms, cost, now, fromFull } of noted) this.#take(id, terms, cost, now, fromFull);
  }

  #take(id: string, terms: BucketTerms, cost: number, now: number, fromFull: boolean): void {
    const [q, r] = refillTime(cost, terms);
    const chain = this.#young.get(id) ?? this.#old.get(id);
    // taken before a reset this store has seen answered: the reset gave it back
    if (chain !== undefined && now <= chain.floor) return;
    if (chain === undefined || chain.tokens !== terms.tokens || chain.period !== terms.period || (fromFull && now >= chain.latest)) {
      const fresh: Chain = {
        endAt: now + q,
        endNum: r,
        since: now,
        latest: now,
        start: now,
        tokens: terms.tokens,
        period: terms.period,
        floor: chain?.floor ?? 0,
      };
      if (chain === undefined) this.#remember(id, fresh);
      else Object.assign(chain, fresh);
      return;
    }
    const T = chain.tokens;
    if (now < chain.since) chain.since = now;
    if (now < chain.latest) {
      // A reply overtaken by a later take's (a pool's connections answer in any order): its tokens lie
      // ahead of that one's in the bucket, and push back what the chain counted after them.
      if (fromFull && now >= chain.start) {
        // Nothing was owed when it was taken, yet the chain says its stretch was: only its own refill is sure.
        if (later(now + q, r, chain.endAt, chain.endNum)) [chain.endAt, chain.endNum] = [now + q, r];
        return;
      }
      if (now >= chain.start) {
        // within the unbroken stretch: all of it after this take moves back by the take's refill
        let at = chain.endAt;
        let num = chain.endNum;
        if (at < now || (at === now && num === 0)) [at, num] = [now, 0];
        [chain.endAt, chain.endNum] = plus(at, num, q, r, T);
        return;
      }
      // before the stretch: it starts at its end, or at once after this take's refill if that is later
      let [at, num] = plus(chain.endAt - (chain.start - now), chain.endNum, q, r, T);
      if (later(now + q, r, at, num)) [at, num] = [now + q, r]; // the stretch is empty (refunded)
      if (later(at, num, chain.endAt, chain.endNum)) [chain.endAt, chain.endNum] = [at, num];
      // its refill reaches the stretch: one stretch from it on
      if (now + q >= chain.start) chain.start = now;
      return;
    }
    chain.latest = now;
    // after the chain's end, or from now if that has passed (the chain starts afresh: a break)
    let at = chain.endAt;
    let num = chain.endNum;
    if (at < now || (at === now && num === 0)) [at, num, chain.start] = [now, 0, now];
    [chain.endAt, chain.endNum] = plus(at, num, q, r, T);
  }

  /** Draws a refund of `tokens` from `id`'s chain; undefined when nothing is owed at the bucket's rate. */
  claim(id: string, terms: BucketTerms, tokens: number): Claim | undefined {
    this.#enter();
    const chain = this.#young.get(id) ?? this.#old.get(id);
    if (chain === undefined || tokens <= 0 || chain.tokens !== terms.tokens || chain.period !== terms.period) return undefined;
    const T = chain.tokens;
    const [q, r] = refillTime(tokens, terms);
    const end: FullAt = { at: chain.endAt, num: chain.endNum, den: chain.endNum === 0 ? 1 : T };
    const share: FullAt = { at: q, num: r, den: r === 0 ? 1 : T };
    // the chain without these tokens; past its start, nothing is left (taken ones refill from there)
    let at = chain.endAt - q;
    let num = chain.endNum - r;
    if (num < 0) [at, num] = [at - 1, num + T];
    if (at < chain.since) [at, num] = [chain.since, 0];
    chain.endAt = at;
    chain.endNum = num;
    return { bound: [{ end, share, takenAt: chain.since }] };
  }

  /**
   * Forgets `id`'s takes: after a reset, nothing taken before it is owed.
   * With the reset's time `at` (µs, Redis TIME), it becomes the pair's floor:
   * takes made at or before it are forgotten and never entered later, and a
   * chain begun after it is kept.
   */
  forget(id: string, at = 0): void {
    this.#enter();
    const chain = this.#young.get(id) ?? this.#old.get(id);
    if (chain !== undefined && chain.tokens !== 0 && chain.since > at) {
      if (at > chain.floor) chain.floor = at;
      return;
    }
    const floor = Math.max(at, chain?.floor ?? 0);
    if (floor === 0) {
      if (!this.#young.delete(id)) this.#old.delete(id);
      return;
    }
    // no take, only the floor
    const empty: Chain = { endAt: floor, endNum: 0, since: floor, latest: floor, start: floor, tokens: 0, period: 0, floor };
    if (chain !== undefined) Object.assign(chain, empty);
    else if (this.#limit > 0) this.#remember(id, empty);
  }

  clear(): void {
    this.#noted = [];
    this.#young.clear();
    this.#old.clear();
  }

  #remember(id: string, chain: Chain): void {
    const half = this.#limit >> 1;
    if (this.#young.size >= Math.max(1, half)) {
      // a limit of 1 keeps no old generation: at most `limit` pairs
      this.#old = half === 0 ? new Map() : this.#young;
      this.#young = new Map();
    }
    this.#young.set(id, chain);
  }
}

/** A take noted and not yet entered in the chains. */
interface Noted {
  id: string;
  terms: BucketTerms;
  cost: number;
  now: number;
  fromFull: boolean;
}

/** Takes noted in one turn beyond which they are entered at once. */
const MAX_NOTED = 1024;

/** `at` + `num`/T µs plus `q` + `r`/T µs (`num`, `r` < T); num + r can pass 2^53 when T does 2^52: carried without forming it. */
function plus(at: number, num: number, q: number, r: number, T: number): [number, number] {
  return num >= T - r ? [at + q + 1, num - (T - r)] : [at + q, num + r];
}

/** Whether `at` + `num`/T is later than `at2` + `num2`/T. */
function later(at: number, num: number, at2: number, num2: number): boolean {
  return at > at2 || (at === at2 && num > num2);
}
