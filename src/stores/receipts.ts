import type { FullAt } from './full-at.js';
import { compareFullAt } from './full-at.js';

/** Default of `maxReceipts`: how many (bucket, key) pairs a store remembers its takes of, for refunds. */
export const DEFAULT_MAX_RECEIPTS = 10_000;

/** What a store took from one (bucket, key) pair and has not given back. */
export interface Receipt {
  /** The earliest full-at time right after one of those takes. */
  after: FullAt;
  /** Tokens taken and not given back. */
  tokens: number;
  /** ms on the clock given to `record`: when every one of those tokens has refilled. */
  refilledAtMs: number;
}

/**
 * The takes a store may give back. A refund can only be bounded by what the
 * store knows of the take: refill consumes a bucket's deficit from the
 * front, so of the tokens one take added, what is still outstanding is at
 * most the time until the bucket's full-at time right after that take.
 *
 * Takes of one pair are merged: the earliest such time and the sum of the
 * tokens. Giving back against the earliest time never exceeds what any one
 * of them still has outstanding, so a refund never makes a bucket fuller
 * than it would be had the refunded tokens not been taken, however several
 * operations' takes and refunds interleave. An entry is dropped once its
 * tokens have refilled (nothing is outstanding) or, beyond `limit` pairs,
 * oldest first: a forgotten take is simply not given back.
 */
export class ReceiptBook {
  readonly #limit: number;
  readonly #entries = new Map<string, Receipt>();

  constructor(limit: number) {
    this.#limit = limit;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** Notes `tokens` taken from `id`, whose bucket was full again at `after` right after; `nowMs` on the same clock as `refilledAtMs`. */
  record(id: string, after: FullAt, tokens: number, refilledAtMs: number, nowMs: number): void {
    if (this.#limit === 0 || tokens <= 0) return;
    const entry = this.#entries.get(id);
    if (entry !== undefined && entry.refilledAtMs > nowMs) {
      if (compareFullAt(after, entry.after) < 0) entry.after = after;
      entry.tokens += tokens;
      entry.refilledAtMs = Math.max(entry.refilledAtMs, refilledAtMs);
      return;
    }
    this.#entries.delete(id);
    this.#entries.set(id, { after, tokens, refilledAtMs });
    for (const oldest of this.#entries.keys()) {
      if (this.#entries.size <= this.#limit) break;
      this.#entries.delete(oldest);
    }
  }

  /**
   * Takes up to `tokens` out of `id`'s receipt: the tokens that may be given
   * back and the time to bound them by, or undefined when nothing is outstanding.
   */
  claim(id: string, tokens: number, nowMs: number): { after: FullAt; tokens: number } | undefined {
    const entry = this.#entries.get(id);
    if (entry === undefined) return undefined;
    if (entry.refilledAtMs <= nowMs) {
      this.#entries.delete(id);
      return undefined;
    }
    const claimed = Math.min(tokens, entry.tokens);
    if (claimed <= 0) return undefined;
    entry.tokens -= claimed;
    if (entry.tokens === 0) this.#entries.delete(id);
    return { after: entry.after, tokens: claimed };
  }

  /**
   * After a refund against `id`'s receipt: `after` is the bound less what
   * was given back (null when none is left), so the same take is never
   * given back twice.
   */
  shrink(id: string, after: FullAt | null): void {
    const entry = this.#entries.get(id);
    if (entry === undefined) return;
    if (after === null) this.#entries.delete(id);
    else if (compareFullAt(after, entry.after) < 0) entry.after = after;
  }

  clear(): void {
    this.#entries.clear();
  }
}
