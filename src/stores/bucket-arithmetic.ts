// The arithmetic of lua/acquire.lua and lua/refund.lua, step for step, for
// MemoryStore: the same doubles, the same operations in the same order, so
// both stores answer alike. The comments there explain the units.
import type { BucketTerms } from './bucket-terms.js';
import { EXACT } from './bucket-terms.js';
import type { FullAt } from './full-at.js';

/** What MemoryStore keeps per (bucket, key): the full-at µs, as a number when whole. */
export type StoredState = number | FullAt;

/** One request of a call, in the order the script would see it. */
export interface CallRequest {
  /** The (bucket, key) pair. */
  readonly id: string;
  readonly terms: BucketTerms;
  readonly cost: number;
  /** For a huge bucket: the cost's refill time, [whole µs, 1/tokens µs]. */
  readonly costTime: readonly [number, number];
}

export interface CallResult {
  /** 1 every request taken; 2 enforced taken, measured not; 0 nothing taken (or, in a check, would be denied). */
  readonly flag: 0 | 1 | 2;
  /** Whole tokens: after the call (flags 1, 2), or now (flag 0 and checks). */
  readonly remaining: number[];
  /** Per request: -2 not short, -1 never, else ms until it would fit. */
  readonly waits: number[];
  /** The full-at time of request i's bucket after the call, null when nothing was written for it. */
  readonly fullAt: (FullAt | null)[];
  /** New states to keep (null: delete). */
  readonly writes: Map<string, FullAt | null>;
}

const NEVER = -1;
const NOT_SHORT = -2;

/** The stored state as a deficit from now, [q µs, r/T µs]; a full bucket is [-1, 0]. */
function deficit(stored: StoredState | undefined, now: number, T: number): [number, number] {
  if (stored === undefined) return [-1, 0];
  let at: number;
  let r = 0;
  if (typeof stored === 'number') {
    at = stored;
    if (at % 1 !== 0) at = Math.ceil(at);
  } else {
    at = stored.at;
    r = stored.den === T ? stored.num : Math.ceil((stored.num * T) / stored.den);
    if (r >= T) {
      at += Math.ceil(r / T);
      r = 0;
    }
  }
  return [at - now, r];
}

/** Whole tokens of a huge bucket's level (a time: `lv` µs + `lr`/T µs). */
function wholeOfHuge(lv: number, lr: number, terms: BucketTerms): number {
  const whole = floorDiv(lv, terms.tokens, lr, terms.period);
  return whole > terms.capacity ? terms.capacity : whole;
}

const SPLIT = 134_217_729; // 2^27 + 1

/** The rounding error of `p = a * b`: a * b = p + error, exactly (Dekker). */
function productError(a: number, b: number, p: number): number {
  let t = SPLIT * a;
  const ah = t - (t - a);
  const al = a - ah;
  t = SPLIT * b;
  const bh = t - (t - b);
  const bl = b - bh;
  return ah * bh - p + ah * bl + al * bh + al * bl;
}

/**
 * floor((a * b + c) / d), exactly, for whole 0 <= a < 2^52, 0 <= c < b < 2^53,
 * 1 <= d < 2^53 and a result below 2^53, as
 * lua/acquire.lua's floordiv: a * b = p + e and p + c = s + f exactly, and
 * N - q * d is then exact near the answer.
 */
export function floorDiv(a: number, b: number, c: number, d: number): number {
  const p = a * b;
  if (p + c < EXACT) return Math.floor((p + c) / d);
  if (b >= 2 ** 52 || d >= 2 ** 50) return longDivision(a, b, c, d);
  const e = productError(a, b, p);
  const s = p + c;
  const f = c - (s - p);
  const q = Math.floor(s / d);
  const qp = q * d;
  const qe = productError(q, d, qp);
  const R = s - qp - qe + (f + e);
  return q + Math.floor(R / d);
}

/**
 * floorDiv beyond 2^52 tokens per period or 2^50 µs periods, as lua/acquire.lua
 * does it: long division over the bits of a * b + c in 24-bit limbs, the
 * remainder kept below d (2 * rem + bit is compared with d as
 * rem >= d - rem - bit), so every step is exact for any whole a, b, c, d
 * below 2^53.
 */
function longDivision(a: number, b: number, c: number, d: number): number {
  const B = 2 ** 24;
  const BB = 2 ** 48;
  const split = (x: number): [number, number, number] => {
    const x2 = Math.floor(x / BB);
    const x1 = Math.floor((x - x2 * BB) / B);
    return [x - x2 * BB - x1 * B, x1, x2];
  };
  const [a0, a1, a2] = split(a);
  const [b0, b1, b2] = split(b);
  const [c0, c1, c2] = split(c);
  const limbs = [a0 * b0 + c0, a0 * b1 + a1 * b0 + c1, a0 * b2 + a1 * b1 + a2 * b0 + c2, a1 * b2 + a2 * b1, a2 * b2, 0];
  for (let i = 0; i < 5; i++) {
    const carry = Math.floor(limbs[i]! / B);
    limbs[i] = limbs[i]! - carry * B;
    limbs[i + 1] = limbs[i + 1]! + carry;
  }
  let top = 5;
  while (top > 0 && limbs[top] === 0) top -= 1;
  let rem = 0;
  let quotient = 0;
  for (let i = top; i >= 0; i--) {
    let limb = limbs[i]!;
    for (let bit = 2 ** 23; bit >= 1; bit /= 2) {
      let one = 0;
      if (limb >= bit) {
        limb -= bit;
        one = 1;
      }
      const gap = d - rem - one;
      if (rem >= gap) {
        rem -= gap;
        quotient = 2 * quotient + 1;
      } else {
        rem = 2 * rem + one;
        quotient *= 2;
      }
    }
  }
  return quotient;
}

/** A deficit of [q µs, r/T µs] from now as the state to store; null when the bucket is full. */
function stateAt(now: number, q: number, r: number, T: number): FullAt | null {
  if (q === 0 && r === 0) return null;
  return { at: now + q, num: r, den: r === 0 ? 1 : T };
}

interface KeyState {
  /** Level: level units, or for a huge bucket whole µs of refill time. */
  lv: number;
  /** Huge: the level's 1/T µs part; exact: -1. */
  lr: number;
  wholeNow: number;
  asked: number;
  repair: boolean;
  first: number;
  wholeAfter: number;
  terms: BucketTerms;
  enforcedLv?: number;
  enforcedLr?: number;
  enforcedWhole?: number;
  enforcedAsked?: number;
}

/**
 * lua/acquire.lua's common case for one request: the level left after
 * taking `cost` (level units), or undefined when the general path must
 * decide (the request is short, or the bucket is huge).
 */
export function levelAfterTake(terms: BucketTerms, cost: number, stored: StoredState | undefined, now: number): number | undefined {
  if (terms.huge) return undefined;
  const T = terms.tokens;
  let L = terms.full;
  if (stored !== undefined) {
    const [q, r] = deficit(stored, now, T);
    if (q >= 0) {
      const D = q * T + r;
      if (!(D <= L)) return undefined;
      L -= D;
    }
  }
  const C = cost * terms.period;
  return cost > terms.capacity || C > L ? undefined : L - C;
}

/** The state to keep for a bucket left at level `L` (level units) at `now`; null when it is full. */
export function stateOfLevel(terms: BucketTerms, L: number, now: number): FullAt | null {
  const D = terms.full - L;
  const T = terms.tokens;
  const q = T === 1 ? D : Math.floor(D / T);
  return stateAt(now, q, D - q * T, T);
}

/**
 * lua/acquire.lua's general path. `requests` holds the enforced requests
 * first (`enforced` of them), then the measured ones; `check` decides for
 * every request and writes nothing.
 */
export function runAcquire(
  requests: readonly CallRequest[],
  enforced: number,
  check: boolean,
  read: (id: string) => StoredState | undefined,
  now: number,
): CallResult {
  const keys = new Map<string, KeyState>();
  const remaining: number[] = [];
  const waits: number[] = [];
  let shortE = false;
  let shortM = false;

  requests.forEach(({ id, terms, cost, costTime }, index) => {
    const i = index + 1;
    const { capacity: cap, tokens: T, period: P } = terms;
    if (i === enforced + 1) {
      for (const key of keys.values()) {
        key.enforcedLv = key.lv;
        key.enforcedLr = key.lr;
        key.enforcedWhole = key.wholeAfter;
        key.enforcedAsked = key.asked;
      }
    }
    let key = keys.get(id);
    if (key === undefined) {
      let [q, r] = deficit(read(id), now, T);
      if (q < 0) [q, r] = [0, 0];
      let lv: number;
      let lr: number;
      let whole: number;
      let repair = false;
      if (terms.huge) {
        const [qF, rF] = terms.fullTime;
        if (q < qF || (q === qF && r <= rF)) {
          lv = qF - q;
          lr = rF - r;
          if (lr < 0) {
            lv -= 1;
            lr += T;
          }
        } else {
          [lv, lr, repair] = [0, 0, true];
        }
        whole = wholeOfHuge(lv, lr, terms);
      } else {
        const D = q * T + r;
        if (D <= terms.full) lv = terms.full - D;
        else [lv, repair] = [0, true];
        lr = -1;
        whole = Math.floor(lv / P);
      }
      key = { lv, lr, wholeNow: whole, asked: 0, repair, first: i, wholeAfter: whole, terms };
      keys.set(id, key);
    }

    key.asked += cost;
    let w = NOT_SHORT;
    let rem = 0;
    if (key.asked > cap) {
      w = NEVER;
    } else if (terms.huge) {
      let lv = key.lv - costTime[0];
      let lr = key.lr - costTime[1];
      if (lr < 0) {
        lv -= 1;
        lr += T;
      }
      key.lv = lv;
      key.lr = lr;
      if (lv < 0) {
        let wq = -lv;
        let wr = -lr;
        if (wr < 0) {
          wq -= 1;
          wr += T;
        }
        if (wr > 0) wq += 1;
        w = Math.ceil(wq / 1000);
      } else {
        rem = wholeOfHuge(lv, lr, terms);
      }
    } else {
      const lv = key.lv - cost * P;
      key.lv = lv;
      if (lv < 0) {
        w = -lv;
        if (T !== 1) w = Math.ceil(w / T);
        w = Math.ceil(w / 1000);
      } else {
        rem = Math.floor(lv / P);
      }
    }
    if (w === NOT_SHORT) key.wholeAfter = rem;
    else if (i <= enforced) shortE = true;
    else shortM = true;
    remaining.push(rem);
    waits.push(w);
  });

  const writes = new Map<string, FullAt | null>();
  const save = (id: string, key: KeyState, lv: number, lr: number): FullAt | null => {
    const T = key.terms.tokens;
    let q: number;
    let r: number;
    if (key.terms.huge) {
      q = key.terms.fullTime[0] - lv;
      r = key.terms.fullTime[1] - lr;
      if (r < 0) {
        q -= 1;
        r += T;
      }
    } else {
      const D = key.terms.full - lv;
      q = Math.floor(D / T);
      r = D - q * T;
    }
    const state = stateAt(now, q, r, T);
    if (state !== null || key.repair) writes.set(id, state);
    return state;
  };

  const byRequest = (key: KeyState | undefined): KeyState => key!;
  if (check || shortE) {
    if (!check) {
      for (const [id, key] of keys) if (key.repair) save(id, key, 0, key.terms.huge ? 0 : -1);
    }
    return {
      flag: check && !shortE ? 1 : 0,
      remaining: requests.map(({ id }) => byRequest(keys.get(id)).wholeNow),
      waits: waits.map((w, index) => (!check && index >= enforced ? NOT_SHORT : w)),
      fullAt: requests.map(() => null),
      writes,
    };
  }

  const fullAt = new Map<string, FullAt | null>();
  for (const [id, key] of keys) {
    let lv: number | undefined = key.lv;
    let lr = key.lr;
    let asked = key.asked;
    if (shortM) {
      if (key.first > enforced) {
        [lv, lr, asked] = [0, key.terms.huge ? 0 : -1, 0];
        if (!key.repair) lv = undefined;
      } else {
        [lv, lr, asked] = [key.enforcedLv!, key.enforcedLr!, key.enforcedAsked!];
      }
    }
    fullAt.set(id, lv !== undefined && (asked > 0 || key.repair) ? save(id, key, lv, lr) : null);
  }
  return {
    flag: shortM ? 2 : 1,
    remaining: requests.map(({ id }, index) => {
      if (!(shortM && index >= enforced)) return remaining[index]!;
      const key = byRequest(keys.get(id));
      return key.first > enforced ? key.wholeNow : key.enforcedWhole!;
    }),
    waits: shortM ? waits.map((w, index) => (index >= enforced ? w : NOT_SHORT)) : waits.map(() => NOT_SHORT),
    fullAt: requests.map(({ id }, index) => (shortM && index >= enforced ? null : (fullAt.get(id) ?? null))),
    writes,
  };
}

/**
 * One request of lua/refund.lua: give back up to `tokens`, and over the
 * takes `bound` draws from, at most min(share, end - now) of each.
 */
export interface RefundStep {
  readonly id: string;
  readonly terms: BucketTerms;
  readonly tokens: number;
  /** For a huge bucket: the tokens' refill time. */
  readonly tokensTime: readonly [number, number];
  /** The takes drawn from (src/stores/receipts.ts): when each has refilled at the latest, and its share. */
  readonly bound: readonly { readonly end: FullAt; readonly share: FullAt }[];
}

export interface RefundResult {
  /** False when nothing changed: the stored state stays as it is. */
  readonly changed: boolean;
  /** The new state when changed (null: none, the bucket is full). */
  readonly state: FullAt | null;
  /** Whole tokens after the refund. */
  readonly remaining: number;
  /** The refill time given back. */
  readonly given: FullAt;
}

/** A time or duration in whole µs and 1/T µs, rounded down (lua/refund.lua's `time`). */
function unitsOf(x: FullAt, T: number): [number, number] {
  if (x.num === 0) return [x.at, 0];
  const r = x.den === T ? x.num : Math.floor((x.num * T) / x.den);
  return r >= T ? [x.at + Math.floor(r / T), r % T] : [x.at, r];
}

/** lua/refund.lua for one request. */
export function runRefund(step: RefundStep, stored: StoredState | undefined, now: number): RefundResult {
  const { terms } = step;
  const { tokens: T, period: P } = terms;
  let [q, r] = deficit(stored, now, T);
  if (q < 0) [q, r] = [0, 0];
  // the bound: the sum over the takes of min(share, end - now)
  let xq = 0;
  let xr = 0;
  for (const { end, share } of step.bound) {
    let [eq, er] = unitsOf(end, T);
    eq -= now;
    if (eq < 0 || (eq === 0 && er === 0)) continue;
    const [sq, sr] = unitsOf(share, T);
    if (eq > sq || (eq === sq && er > sr)) [eq, er] = [sq, sr];
    // xr + er can pass 2^53 when T does 2^52: carry without forming it
    if (xr >= T - er) [xq, xr] = [xq + eq + 1, xr - (T - er)];
    else [xq, xr] = [xq + eq, xr + er];
  }

  let changed: boolean;
  let dq: number;
  let dr: number;
  let gq: number;
  let gr: number;
  let remaining: number;
  if (terms.huge) {
    // a deficit beyond a full refill is given back from, then capped
    const [qF, rF] = terms.fullTime;
    changed = !(q < qF || (q === qF && r <= rF));
    const [qK, rK] = step.tokensTime;
    [gq, gr] = [xq, xr];
    if (gq > qK || (gq === qK && gr > rK)) [gq, gr] = [qK, rK];
    if (gq > q || (gq === q && gr > r)) [gq, gr] = [q, r];
    changed = changed || gq > 0 || gr > 0;
    [dq, dr] = borrow(q - gq, r - gr, T);
    if (dq > qF || (dq === qF && dr > rF)) [dq, dr] = [qF, rF];
    const [lq, lr] = borrow(qF - dq, rF - dr, T);
    remaining = wholeOfHuge(lq, lr, terms);
  } else {
    // a deficit beyond a full refill is given back from, then capped
    let D = q * T + r;
    changed = !(D <= terms.full);
    const X = xq * T + xr;
    let O = step.tokens * P;
    if (X < O) O = X;
    if (O > D) O = D;
    changed = changed || O > 0;
    D -= O;
    if (D > terms.full) D = terms.full;
    remaining = Math.floor((terms.full - D) / P);
    dq = Math.floor(D / T);
    dr = D - dq * T;
    gq = Math.floor(O / T);
    gr = O - gq * T;
  }
  return { changed, state: stateAt(now, dq, dr, T), remaining, given: { at: gq, num: gr, den: gr === 0 ? 1 : T } };
}

function borrow(q: number, r: number, T: number): [number, number] {
  return r < 0 ? [q - 1, r + T] : [q, r];
}
