// When receipts are entered: the Redis store notes them in a reply's turn and enters them after it (one
// immediate at a time); the memory store enters them at once and uses no timer.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Rate } from '../src/rate.js';
import { termsOf } from '../src/stores/bucket-terms.js';
import { MemoryStore } from '../src/stores/memory-store.js';
import { ReceiptBook } from '../src/stores/receipts.js';
import { TokenBucket } from '../src/token-bucket.js';

const immediates = (): number => process.getActiveResourcesInfo().filter((r) => r === 'Immediate').length;
/** Today's epoch in µs, as Redis TIME gives it. */
const NOW_US = Date.UTC(2026, 11, 1) * 1000;
const clock = (): number => NOW_US / 1000;

describe('ReceiptBook entering after the turn', () => {
  it('keeps one immediate pending however often a claim enters what is noted, and claims every take', async () => {
    const book = new ReceiptBook(10_000, { afterTurn: true });
    const terms = termsOf(new TokenBucket('turns', 1_000_000, Rate.perSecond(1)));
    const before = immediates();
    for (let i = 0; i < 100_000; i++) {
      book.record('k', terms, 1, NOW_US + i, false);
      // each claim draws the one token just noted: it must see it
      expect(book.claim('k', terms, 1)).toBeDefined();
    }
    expect(immediates() - before).toBeLessThanOrEqual(1);
    await new Promise((resolve) => setImmediate(resolve));
    expect(book.size).toBe(1);
  });
});

describe('MemoryStore receipts', () => {
  afterEach(() => vi.useRealTimers());
  const bucket = new TokenBucket('memory-turns', 100, Rate.perSecond(1));

  it('leave no timer behind under fake timers, and refunds stay exact', async () => {
    vi.useFakeTimers();
    const store = new MemoryStore({ now: clock });
    expect(await store.acquire(bucket, 'u', 30)).toEqual({ allowed: true, remaining: 70 });
    expect(vi.getTimerCount()).toBe(0);
    expect(await store.refundAll([{ bucket, key: 'u', cost: 30 }])).toEqual([100]);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('leave nothing pending after a loop of acquires and refunds that never yields', async () => {
    const store = new MemoryStore({ now: clock });
    const before = immediates();
    for (let i = 0; i < 50_000; i++) {
      await store.acquire(bucket, 'v', 1);
      await store.refund(bucket, 'v', 1);
    }
    expect(immediates() - before).toBe(0);
  });

  it('need no setImmediate (a runtime without it)', async () => {
    const saved = globalThis.setImmediate;
    const store = new MemoryStore({ now: clock });
    // @ts-expect-error a runtime without setImmediate
    delete globalThis.setImmediate;
    try {
      expect(await store.acquire(bucket, 'w', 1)).toEqual({ allowed: true, remaining: 99 });
      expect(await store.refundAll([{ bucket, key: 'w', cost: 1 }])).toEqual([100]);
    } finally {
      globalThis.setImmediate = saved;
    }
  });
});
