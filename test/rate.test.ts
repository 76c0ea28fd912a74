import { describe, expect, it } from 'vitest';
import { Rate } from '../src/rate.js';
import { MAX_REFILL_YEARS, TokenBucket } from '../src/token-bucket.js';

describe('Rate', () => {
  it('keeps tokens and the period in whole microseconds', () => {
    const rate = new Rate(3, 1000);
    expect(rate.tokens).toBe(3);
    expect(rate.periodUs).toBe(1_000_000);
    expect(rate.periodMs).toBe(1000);
    expect(new Rate(1, 0.001).periodUs).toBe(1);
    expect(new Rate(1, 2.5).periodUs).toBe(2500);
  });

  it('offers per-second, per-minute and per-hour shorthands', () => {
    expect(Rate.perSecond(10).periodMs).toBe(1000);
    expect(Rate.perMinute(10).periodMs).toBe(60_000);
    expect(Rate.perHour(10).periodMs).toBe(3_600_000);
    expect(Rate.perHour(7).tokens).toBe(7);
  });

  it('rejects a rate that refills nothing', () => {
    expect(() => new Rate(0, 1000)).toThrow(new RangeError('a rate must refill at least one token'));
    for (const tokens of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53]) {
      expect(() => new Rate(tokens, 1000)).toThrow(RangeError);
    }
  });

  it('rejects a period that is not a positive number of whole microseconds', () => {
    for (const period of [0, -5, Number.NaN, Number.POSITIVE_INFINITY, 0.0004]) {
      expect(() => new Rate(1, period)).toThrow(RangeError);
    }
  });
});

describe('TokenBucket', () => {
  it('accepts 1-64 characters of [A-Za-z0-9_.-] and a non-negative safe capacity', () => {
    const bucket = new TokenBucket('api.v2_search-1', 0, Rate.perSecond(1));
    expect(bucket.name).toBe('api.v2_search-1');
    expect(bucket.capacity).toBe(0);
    // 2^53 - 1 tokens at ten million a second refill in about 28.5 years
    expect(new TokenBucket('x'.repeat(64), Number.MAX_SAFE_INTEGER, Rate.perSecond(10_000_000)).capacity).toBe(Number.MAX_SAFE_INTEGER);
  });

  it('refuses a bucket that takes longer than 100 years to refill, with a RangeError', () => {
    const century = 100 * 365.25 * 24 * 3600; // seconds, Julian years
    expect(MAX_REFILL_YEARS).toBe(100);
    expect(new TokenBucket('century', century, Rate.perSecond(1)).capacity).toBe(century);
    expect(() => new TokenBucket('century', century + 1, Rate.perSecond(1))).toThrow(RangeError);
    expect(() => new TokenBucket('century', century + 1, Rate.perSecond(1))).toThrow(/longer than 100 years/);
    // one token every 1e9 ms (11.6 days) for a billion tokens: 31.7 million years
    expect(() => new TokenBucket('slow', 1e9, new Rate(1, 1e9))).toThrow(RangeError);
    expect(() => new TokenBucket('huge', Number.MAX_SAFE_INTEGER, Rate.perSecond(1))).toThrow(RangeError);
    // the bound is exact, whatever the magnitudes
    expect(new TokenBucket('edge', 3155, new Rate(1, 1_000_000_000)).capacity).toBe(3155);
    expect(() => new TokenBucket('edge', 3156, new Rate(1, 1_000_000_000))).toThrow(RangeError);
  });

  it('rejects bad names, capacities and rates with a RangeError', () => {
    for (const name of ['', 'x'.repeat(65), 'a b', 'a:b', 'a{b}', 'é']) {
      expect(() => new TokenBucket(name, 1, Rate.perSecond(1))).toThrow(RangeError);
    }
    for (const capacity of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53]) {
      expect(() => new TokenBucket('b', capacity, Rate.perSecond(1))).toThrow(RangeError);
    }
    expect(() => new TokenBucket('b', 1, { tokens: 1, periodUs: 1000 } as Rate)).toThrow(RangeError);
  });
});

describe('a definition is fixed once made', () => {
  it('refuses to change a rate or a bucket (a store would go on with the old one)', () => {
    const rate = Rate.perHour(1);
    const bucket = new TokenBucket('fixed', 10, rate);
    expect(() => Object.assign(bucket, { capacity: 1000 })).toThrow(TypeError);
    expect(() => Object.assign(rate, { tokens: 1_000_000 })).toThrow(TypeError);
    expect(() => Object.assign(bucket, { rate: Rate.perSecond(1) })).toThrow(TypeError);
    expect([bucket.capacity, bucket.rate.tokens, bucket.rate.periodUs]).toEqual([10, 1, 3_600_000_000]);
  });
});
