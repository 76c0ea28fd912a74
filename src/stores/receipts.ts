import type { BucketTerms } from './bucket-terms.js';
import { refillTime } from './bucket-terms.js';
import type { FullAt } from './full-at.js';

/** Default of `maxReceipts`: how many (bucket, key) pairs a store remembers its takes of, for refunds. */
export const DEFAULT_MAX_RECEIPTS = 10_000;

/** Takes of one pair kept apart; beyond this the latest two are merged into a run. */
const TAKES_PER_PAIR = 16;

/**
 * A time or a duration of `at` + `num`/den µs (0 <= num < den), den being
 * its pair's tokens per period: every time of one pair shares it.
 */
interface Time {
  at: number;
  num: number;
}

/**
 * One take a store may still give back, its times kept as plain numbers (a
 * take is noted on every acquire): `end`, `left` and `start` read and write
 * them as `Time`s.
 */
class Take {
  endAt: number;
  endNum: number;
  leftAt: number;
  leftNum: number;
  startAt = 0;
  startNum = 0;
  run = false;
  /** µs on the store's clock when it was taken (a run: its earliest take), so that a reset since voids it. */
  takenAt: number;

  constructor(endAt: number, endNum: number, leftAt: number, leftNum: number, takenAt: number) {
    this.endAt = endAt;
    this.endNum = endNum;
    this.leftAt = leftAt;
    this.leftNum = leftNum;
    this.takenAt = takenAt;
  }

  /**
   * A time by which this take's tokens have all refilled, however the bucket
   * is shared: had everything ahead of them been given back at once, they
   * would refill from when they were taken. Never later than that.
   */
  get end(): Time {
    return { at: this.endAt, num: this.endNum };
  }

  set end(t: Time) {
    this.endAt = t.at;
    this.endNum = t.num;
  }

  /** The refill time of this take's tokens not given back yet. */
  get left(): Time {
    return { at: this.leftAt, num: this.leftNum };
  }

  set left(t: Time) {
    this.leftAt = t.at;
    this.leftNum = t.num;
  }

  /**
   * For takes merged into a run (several operations' tokens, one after the
   * other in the bucket, or earlier): the earliest any of them may start
   * refilling. A refund is then bounded from the run's front, as if it were
   * for the operation there, which owes the least.
   */
  get start(): Time | undefined {
    return this.run ? { at: this.startAt, num: this.startNum } : undefined;
  }

  set start(t: Time | undefined) {
    this.run = t !== undefined;
    this.startAt = t?.at ?? 0;
    this.startNum = t?.num ?? 0;
  }
}

interface Pair {
  /** By `end`, earliest first. */
  takes: Take[];
  /** The rate the takes were taken at, reduced: `tokens` every `period` µs. `tokens` is every time's denominator. */
  tokens: number;
  period: number;
  /** µs on the store's clock: the time of the latest take applied, to tell a reply overtaken by a later one's. */
  latest: number;
  /** µs on this process's clock when that take's answer came: the store's clock is at least `latest` + the time since. */
  seen: number;
  /** Claims not yet settled or released: while there are any, takes are not reused. */
  claims: number;
}

/** What a refund may give back: over the takes it draws from, at most min(share, end - now) of each. */
export interface Claim {
  /** The takes drawn from, earliest first, and when each was taken (lua/refund.lua's X). */
  bound: { end: FullAt; share: FullAt; takenAt: number }[];
  /** The takes the claim moved earlier, each by how much, as if it gave back everything it drew. */
  moved: { take: Take; by: Time }[];
  pair: Pair;
  /** Settled or released. */
  done: boolean;
}

const EXACT = 2 ** 53;

function less(a: Time, b: Time): boolean {
  return a.at < b.at || (a.at === b.at && a.num < b.num);
}

function add(a: Time, b: Time, den: number): Time {
  const at = a.at + b.at;
  return a.num >= den - b.num ? { at: at + 1, num: a.num - (den - b.num) } : { at, num: a.num + b.num };
}

function sub(a: Time, b: Time, den: number): Time {
  const at = a.at - b.at;
  return a.num < b.num ? { at: at - 1, num: a.num + (den - b.num) } : { at, num: a.num - b.num };
}

/** `num`/`from` µs in units of 1/`to` µs, rounded down (a time only ever moves earlier). */
function convert(num: number, from: number, to: number): number {
  if (num === 0 || from === to) return num;
  const product = num * to;
  return product < EXACT ? Math.floor(product / from) : Number((BigInt(num) * BigInt(to)) / BigInt(from));
}

const sameRate = (pair: Pair, terms: BucketTerms): boolean => pair.tokens === terms.tokens && pair.period === terms.period;

/** True when `t` has passed at `now` (whole µs). */
const passed = (t: Time, now: number): boolean => t.at < now || (t.at === now && t.num === 0);

/**
 * The takes a store may give back, per (bucket, key) pair, so that a refund
 * never makes a bucket fuller than it would be had the tokens it gives back
 * never been taken.
 *
 * Refill consumes a bucket's deficit from the front. Of one take's tokens,
 * what is still outstanding depends on what lies ahead of them, which other
 * processes change: their refunds move this store's takes forward. So each
 * take is bounded by the worst case, its `end`: when it would be refilled
 * were the deficit ahead of it gone, that is, were this store's takes alone
 * in the bucket (a take starts when the store's previous one ends, or when
 * it is taken).
 *
 * A refund does not say which take it is for. It is bounded as if it were
 * for the earliest ones, which refill first and so owe the least: it draws
 * from the earliest take on, and gives back at most, of each take it draws
 * a share from, the share or the time from now to the take's `end`,
 * whichever is less (lua/refund.lua adds these up on Redis's clock).
 * Drawing moves every later take forward by what is drawn ahead of it, at
 * once, so that concurrent refunds see it; when the refund's answer shows
 * that less was given back, they move back by the difference.
 *
 * A take is dropped once its tokens have all refilled. A refund meant for
 * it then draws from the store's later takes of the pair: nothing tells
 * whose tokens they are, only that the store took them and still owes them.
 *
 * Times are kept at the rate of the pair's latest take: a take at another
 * rate (the bucket redefined) starts the pair afresh, and a refund at a rate
 * other than the takes' gives nothing back. Pairs live in two generations of
 * `limit / 2`: when the young one fills, the old one is forgotten, so memory
 * stays bounded. A forgotten take, or a pair `forget`-ten (its bucket reset),
 * is simply not given back.
 */
export class ReceiptBook {
  readonly #limit: number;
  readonly #slack: number;
  #young = new Map<string, Pair>();
  #old = new Map<string, Pair>();

  /**
   * `limit` pairs; `slack`: how far apart, in µs, two readings of this
   * process's clock may be beyond the time that passed between them (its
   * resolution).
   */
  constructor(limit: number, slack = 0) {
    this.#limit = limit;
    this.#slack = slack;
  }

  /** Pairs remembered. */
  get size(): number {
    return this.#young.size + this.#old.size;
  }

  /**
   * Notes `cost` tokens taken from `id` at `now` µs on the store's clock
   * (Redis TIME), whose answer came at `seen` µs on this process's clock.
   */
  record(id: string, terms: BucketTerms, cost: number, now: number, seen: number): void {
    if (this.#limit === 0 || cost <= 0) return;
    const den = terms.tokens;
    let q = cost * terms.period;
    let r = 0;
    if (den !== 1 || !(q < EXACT)) [q, r] = refillTime(cost, terms);
    const pair = this.#young.get(id) ?? this.#old.get(id);
    if (pair === undefined) {
      const takes = [new Take(now + q, r, q, r, now)];
      this.#remember(id, { takes, tokens: den, period: terms.period, latest: now, seen, claims: 0 });
      return;
    }
    const { takes: held } = pair;
    const last = held[held.length - 1];
    if (
      last === undefined ||
      last.endAt < now ||
      (last.endAt === now && last.endNum === 0) ||
      !sameRate(pair, terms) ||
      passed(last.end, this.#clock(pair, seen))
    ) {
      // nothing outstanding, or another rate: the pair starts afresh
      const first = held[0];
      if (first !== undefined && pair.claims === 0 && !first.run) {
        // no claim in flight refers to it: reused in place
        first.endAt = now + q;
        first.endNum = r;
        first.leftAt = q;
        first.leftNum = r;
        first.takenAt = now;
        if (held.length > 1) held.length = 1;
      } else {
        pair.takes = [new Take(now + q, r, q, r, now)];
      }
      if (pair.tokens !== den || pair.period !== terms.period) [pair.tokens, pair.period] = [den, terms.period];
      pair.latest = now;
      pair.seen = seen;
      return;
    }
    this.#prune(pair, Math.max(now, this.#clock(pair, seen)));
    const time: Time = { at: q, num: r };
    const { takes } = pair;
    let end: Time;
    if (now >= pair.latest) {
      // the store's takes alone in the bucket: this one starts when the latest ends, or now
      const last = takes[takes.length - 1]!.end;
      end = add(last.at > now || (last.at === now && last.num > 0) ? last : { at: now, num: 0 }, time, den);
      pair.latest = now;
      pair.seen = seen;
    } else {
      // a reply overtaken by a later take's: bounded on its own
      end = add({ at: now, num: 0 }, time, den);
    }
    const take = new Take(end.at, end.num, time.at, time.num, now);
    let position = takes.length;
    while (position > 0 && less(end, takes[position - 1]!.end)) position--;
    takes.splice(position, 0, take);
    if (takes.length > TAKES_PER_PAIR) {
      // the latest two merged into a run, from the earlier start to the later end
      const latest = takes.pop()!;
      const kept = takes[takes.length - 1]!;
      const startOf = (t: Take): Time => t.start ?? sub(t.end, t.left, den);
      const [a, b] = [startOf(kept), startOf(latest)];
      kept.start = less(a, b) ? a : b;
      kept.end = less(kept.end, latest.end) ? latest.end : kept.end;
      kept.left = add(kept.left, latest.left, den);
      kept.takenAt = Math.min(kept.takenAt, latest.takenAt);
    }
  }

  /**
   * Draws a refund of `tokens` from `id`'s takes, earliest first, at `seen`
   * µs on this process's clock; undefined when nothing is outstanding at the
   * bucket's rate.
   */
  claim(id: string, terms: BucketTerms, tokens: number, seen: number): Claim | undefined {
    const pair = this.#young.get(id) ?? this.#old.get(id);
    if (pair === undefined || tokens <= 0 || !sameRate(pair, terms)) return undefined;
    this.#prune(pair, this.#clock(pair, seen));
    const { takes } = pair;
    if (takes.length === 0) return undefined;
    const den = pair.tokens;
    const [q, r] = refillTime(tokens, terms);

    // shares, earliest first
    const shares: Time[] = [];
    let wanted: Time = { at: q, num: r };
    for (const take of takes) {
      if (wanted.at === 0 && wanted.num === 0) break;
      const share = less(take.left, wanted) ? take.left : wanted;
      shares.push(share);
      wanted = sub(wanted, share, den);
    }
    const fullAt = (t: Time): FullAt => ({ at: t.at, num: t.num, den: t.num === 0 ? 1 : den });
    // a take is drawn from its end (one operation's tokens refill together), a run from its front
    const bound = shares.map((share, j) => {
      const { start, end, takenAt } = takes[j]!;
      return { end: fullAt(start === undefined ? end : add(start, share, den)), share: fullAt(share), takenAt };
    });
    // every take from the first drawn from on moves forward by what is drawn up to it (a run's
    // front by what is drawn ahead of it; runs do not move back)
    const moved: Claim['moved'] = [];
    let by: Time = { at: 0, num: 0 };
    takes.forEach((take, j) => {
      if (take.start !== undefined) take.start = sub(take.start, by, den);
      const share = shares[j];
      if (share !== undefined) {
        by = add(by, share, den);
        take.left = sub(take.left, share, den);
      }
      take.end = sub(take.end, by, den);
      if (take.start === undefined) moved.push({ take, by });
    });
    pair.takes = takes.filter((take) => take.leftAt > 0 || take.leftNum > 0);
    pair.claims += 1;
    return { bound, moved, pair, done: false };
  }

  /**
   * After a refund on `claim` gave back `given` of refill time: the takes it
   * moved by more than that move back by the difference.
   */
  settle(claim: Claim, given: FullAt): void {
    if (claim.done) return;
    this.release(claim);
    const { pair, moved } = claim;
    const den = pair.tokens;
    const back: Time = { at: given.at, num: convert(given.num, given.den, den) };
    let changed = false;
    for (const { take, by } of moved) {
      if (!less(back, by)) continue;
      take.end = add(take.end, sub(by, back, den), den);
      changed = true;
    }
    if (changed) pair.takes.sort((a, b) => (less(a.end, b.end) ? -1 : less(b.end, a.end) ? 1 : 0));
  }

  /** A claim whose refund failed: its takes stay moved (it may have been applied). */
  release(claim: Claim): void {
    if (claim.done) return;
    claim.done = true;
    claim.pair.claims -= 1;
  }

  /** Forgets `id`'s takes: after a reset, nothing taken before it is owed. */
  forget(id: string): void {
    if (!this.#young.delete(id)) this.#old.delete(id);
  }

  clear(): void {
    this.#young.clear();
    this.#old.clear();
  }

  #remember(id: string, pair: Pair): void {
    const half = this.#limit >> 1;
    if (this.#young.size >= Math.max(1, half)) {
      // a limit of 1 keeps no old generation: at most `limit` pairs
      this.#old = half === 0 ? new Map() : this.#young;
      this.#young = new Map();
    }
    this.#young.set(id, pair);
  }

  /** The store's clock at `seen` (this process's), at the least: the latest take's time plus what has passed here since. */
  #clock(pair: Pair, seen: number): number {
    return pair.latest + Math.max(0, seen - pair.seen - this.#slack);
  }

  /** Drops the takes whose tokens have all refilled: their `end` has passed at `now` on the store's clock. */
  #prune(pair: Pair, now: number): void {
    const { takes } = pair;
    let dead = 0;
    while (dead < takes.length && (takes[dead]!.endAt < now || (takes[dead]!.endAt === now && takes[dead]!.endNum === 0))) dead++;
    if (dead > 0) takes.splice(0, dead);
  }
}
