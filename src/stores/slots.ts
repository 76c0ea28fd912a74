// lua/acquire.lua's replies, read and mapped back to an operation's requests;
// and an operation whose requests live in several hash slots of a Cluster,
// which one script cannot reach: each slot's requests are acquired in turn,
// and what was taken is given back when a later slot denies or fails.
import type { BucketStore, AcquireRequest, BatchAdmission, DeniedRequest } from './bucket-store.js';
import type { TokenBucket } from '../token-bucket.js';
import { refillTime, termsOf } from './bucket-terms.js';
import type { FullAt } from './full-at.js';
import { formatFullAt, parseFullAt } from './full-at.js';
import { redisKey } from './redis-keys.js';
import { tokensReturned } from './returns.js';
import { denial, keyString, refundPairs } from './validate.js';

/** A script's wait: not short. */
export const NOT_SHORT = -2;
/** A script's wait: never (more than the capacity). */
export const NEVER = -1;

/** One script call's answer, by position in the order its requests were sent. */
export interface SlotReply {
  /** 1 all taken, 2 enforced taken and measured not, 0 nothing taken (in a check: would be denied). */
  flag: 0 | 1 | 2;
  /** Whole tokens after (flags 1, 2) or now (flag 0, checks). */
  remaining: number[];
  /** -2 not short, -1 never, else ms. */
  waits: number[];
  /** Redis TIME (µs) when tokens were taken (flags 1, 2 outside a check), else null. */
  takenAt: number | null;
  /** With a mode argument, taken: each request's key's full-at time after the call (null: nothing stored). */
  fullAt: (FullAt | null)[] | null;
}

/** What one acquire took, for the receipts of later refunds. */
export interface Taken {
  admission: BatchAdmission;
  /** Per request: Redis TIME (µs) when its tokens were taken, null when none were. */
  takenAt: (number | null)[];
  /** Per request taken, when asked for: its key's full-at time right after. */
  fullAt: (FullAt | null)[];
}

/** What the cross-slot acquire asks of the store. */
export interface SlotCalls {
  readonly store: BucketStore;
  readonly prefix: string;
  /** Request indexes grouped by hash slot, in first-seen order. */
  slots(tags: readonly string[]): number[][];
  /** Takes the requests `indexes` (one slot) in one call, with their full-at times. */
  acquireSlot(requests: readonly AcquireRequest[], tags: readonly string[], indexes: readonly number[]): Promise<Taken>;
  /** What taking the requests `indexes` (one slot) would answer now; nothing is written. */
  check(requests: readonly AcquireRequest[], tags: readonly string[], indexes: readonly number[]): Promise<SlotReply>;
  /** Gives back pairs of one slot (lua/refund.lua); `bound` is its X. */
  refund(pairs: readonly { bucket: TokenBucket; key: string; tokens: number; bound: string }[]): Promise<{ remaining: number[] }>;
}

/**
 * On a Cluster, buckets of different identities can live in different hash
 * slots, which one script cannot reach. Each slot's group is acquired in
 * turn. When one denies, the groups already taken are given back and the
 * rest only checked (so the denial names every short request); when a call
 * fails, the groups taken so far are given back. A group is given back at
 * most once, whatever fails: a give-back that fails is not retried, since
 * it may still have been applied.
 */
export async function acquireAcrossSlots(on: SlotCalls, requests: readonly AcquireRequest[], tags: readonly string[]): Promise<Taken> {
  const n = requests.length;
  const remaining = new Array<number>(n).fill(0);
  const takenAt = new Array<number | null>(n).fill(null);
  const fullAt = new Array<FullAt | null>(n).fill(null);
  const denied: DeniedRequest[] = [];
  const wouldDeny: DeniedRequest[] = [];
  /** Request indexes taken and not given back. */
  const held: number[] = [];

  const giveBack = async (indexes: number[]): Promise<void> => {
    const taken = indexes.filter((i) => takenAt[i] !== null);
    indexes.length = 0;
    for (const i of taken) {
      const at = held.indexOf(i);
      if (at >= 0) held.splice(at, 1);
    }
    if (taken.length === 0) return;
    await Promise.all(
      on.slots(taken.map((i) => tags[i]!)).map(async (positions) => {
        const group = positions.map((p) => taken[p]!);
        const pairs = refundPairs(
          group.map((i) => requests[i]!),
          group.map((i) => keyString(requests[i]!.key)),
        ).map((pair) => {
          const i = group[pair.indexes[0]!]!;
          const key = redisKey(on.prefix, tags[i]!, pair.bucket);
          // Bounded by the take's own refill: its tokens cannot have refilled sooner than from when
          // they were taken, whatever anyone takes or gives back meanwhile (the full-at time right
          // after the take would count tokens given back ahead of them twice). A reset since, by
          // any process, gave them back already: lua/refund.lua reads its mark.
          const at = takenAt[i]!;
          const [q, r] = refillTime(pair.tokens, termsOf(pair.bucket));
          const den = termsOf(pair.bucket).tokens;
          const share = { at: q, num: r, den: r === 0 ? 1 : den };
          const end = { at: at + q, num: r, den: share.den };
          const bound = `${formatFullAt(end)};${formatFullAt(share)};${at}`;
          return { bucket: pair.bucket, key, tokens: pair.tokens, bound, of: pair.indexes.map((p) => group[p]!) };
        });
        for (const i of group) takenAt[i] = null;
        let left: number[] | undefined;
        try {
          ({ remaining: left } = await on.refund(pairs));
          pairs.forEach((pair, j) => {
            for (const i of pair.of) remaining[i] = left![j]!;
          });
        } catch {
          // Not retried: it may have been applied. Those tokens stay taken.
        } finally {
          // Tokens came back, as by a refund (a call that failed may have given them back too): what a
          // limiter remembers of these pairs, such as a denial decided while they were out, no longer holds.
          tokensReturned(
            on.store,
            pairs.map((pair, j) => ({ bucket: pair.bucket, key: requests[pair.of[0]!]!.key, left: left?.[j] })),
          );
        }
      }),
    );
  };

  for (const indexes of on.slots(tags)) {
    if (denied.length > 0) {
      // Denied already: only learn which other requests are short.
      const enforced = indexes.filter((i) => requests[i]!.measure !== true);
      try {
        const reply = await on.check(requests, tags, indexes);
        indexes.forEach((index, position) => {
          remaining[index] = reply.remaining[position]!;
          const w = reply.waits[position]!;
          if (w !== NOT_SHORT && enforced.includes(index)) denied.push({ index, retryAfterMs: w === NEVER ? null : w });
        });
      } catch {
        // The call is denied whatever this check says.
      }
      continue;
    }
    let group: Taken;
    try {
      group = await on.acquireSlot(requests, tags, indexes);
    } catch (error) {
      await giveBack(held);
      throw error;
    }
    const { admission } = group;
    for (const i of indexes) remaining[i] = admission.remaining[i]!;
    if (!admission.allowed) {
      denied.push(...admission.denied);
      await giveBack(held);
      continue;
    }
    for (const i of indexes) {
      takenAt[i] = group.takenAt[i] ?? null;
      fullAt[i] = group.fullAt[i] ?? null;
      if (takenAt[i] !== null) held.push(i);
    }
    if (admission.wouldDeny) wouldDeny.push(...admission.wouldDeny);
  }

  if (denied.length > 0) return { admission: denial(denied.sort((a, b) => a.index - b.index), remaining), takenAt, fullAt };
  if (wouldDeny.length > 0) {
    // A measured request was short somewhere: no measured request keeps its tokens.
    await giveBack(held.filter((i) => requests[i]!.measure === true));
    return { admission: { allowed: true, remaining, wouldDeny: wouldDeny.sort((a, b) => a.index - b.index) }, takenAt, fullAt };
  }
  return { admission: { allowed: true, remaining }, takenAt, fullAt };
}

/** One slot's script reply, mapped back to the operation's request indexes. */
export function takenOfSlot(requests: readonly AcquireRequest[], indexes: readonly number[], reply: SlotReply): Taken {
  const n = requests.length;
  const remaining = new Array<number>(n).fill(0);
  const takenAt = new Array<number | null>(n).fill(null);
  const fullAt = new Array<FullAt | null>(n).fill(null);
  const short: DeniedRequest[] = [];
  indexes.forEach((index, position) => {
    remaining[index] = reply.remaining[position]!;
    // flag 2: the enforced requests were taken, the measured ones not
    if (reply.flag === 1 || (reply.flag === 2 && requests[index]!.measure !== true)) {
      takenAt[index] = reply.takenAt;
      fullAt[index] = reply.fullAt?.[position] ?? null;
    }
    const w = reply.waits[position]!;
    if (w !== NOT_SHORT) short.push({ index, retryAfterMs: w === NEVER ? null : w });
  });
  short.sort((a, b) => a.index - b.index);
  if (reply.flag === 0) return { admission: denial(short, remaining), takenAt, fullAt };
  return { admission: reply.flag === 2 ? { allowed: true, remaining, wouldDeny: short } : { allowed: true, remaining }, takenAt, fullAt };
}

/**
 * lua/acquire.lua's reply: {1, rem×n, t} all taken, {1, rem×n, X×n, t} the
 * same with a mode argument; {2, rem×n, X×n, t, w×n} measured not taken;
 * {0, now×n, w×n} nothing taken; a check {1|0, now×n, w×n}. t is Redis TIME
 * in µs, X a key's full-at time after the call.
 */
export function parseAcquireReply(reply: unknown, n: number, check: boolean, moded: boolean): SlotReply {
  const flag = Array.isArray(reply) ? reply[0] : undefined;
  const taken = !check && (flag === 1 || flag === 2);
  const x = taken && moded ? n : 0; // full-at times
  const length = taken ? 2 + n + x + (flag === 2 ? n : 0) : 1 + 2 * n;
  const takenAt = taken && Array.isArray(reply) ? reply[1 + n + x] : null;
  if (
    !Array.isArray(reply) ||
    !(flag === 0 || flag === 1 || (flag === 2 && !check && moded)) ||
    reply.length !== length ||
    (taken && !Number.isSafeInteger(takenAt))
  ) {
    throw new Error(`token bucket script returned an unexpected reply: ${JSON.stringify(reply)}`);
  }
  // whole tokens within 64 of 2^53 come as strings (ioredis misreads such integers)
  const remaining = reply.slice(1, 1 + n).map(Number);
  const fullAt = x > 0 ? reply.slice(1 + n, 1 + n + x).map(parseFullAt) : null;
  const waits = (taken ? (flag === 2 ? reply.slice(2 + n + x) : new Array<number>(n).fill(NOT_SHORT)) : reply.slice(1 + n)) as number[];
  return { flag, remaining, waits, takenAt: takenAt as number | null, fullAt };
}
