// The exact floor division huge buckets use (lua/acquire.lua's floordiv,
// mirrored in src/stores/bucket-arithmetic.ts), against BigInt.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { floorDiv } from '../src/stores/bucket-arithmetic.js';

const exact = (a: number, b: number, c: number, d: number): number => Number((BigInt(a) * BigInt(b) + BigInt(c)) / BigInt(d));

/** Whole numbers from 0 to 2^bits - 1, drawn evenly over their magnitudes. */
const wide = (bits: number, min = 0): fc.Arbitrary<number> =>
  fc.integer({ min: 1, max: bits }).chain((b) => fc.integer({ min: Math.max(min, 2 ** (b - 1) - 1), max: 2 ** b - 1 }));

const inputs = fc
  // b (tokens per period) and d (the period in µs) to 2^53 - 1
  .record({ a: wide(52), b: wide(53, 1), d: wide(53, 1), share: fc.double({ min: 0, max: 1, noNaN: true }) })
  .map(({ a, b, d, share }) => {
    // keep the quotient below 2^53, as a bucket's whole tokens are
    const maxA = (2n ** 53n * BigInt(d)) / BigInt(b);
    const capped = BigInt(a) > maxA ? Number(maxA) : a;
    return { a: capped, b, c: Math.floor(share * (b - 1)), d };
  });

describe('floorDiv (huge buckets: floor((level µs × T + level units) / P))', () => {
  it('is exact against BigInt over the whole range', () => {
    fc.assert(
      fc.property(inputs, ({ a, b, c, d }) => {
        expect(floorDiv(a, b, c, d), `floor((${a} × ${b} + ${c}) / ${d})`).toBe(exact(a, b, c, d));
      }),
      { numRuns: 200_000 },
    );
  }, 120_000); // a few seconds alone; far longer beside other suites on a loaded machine

  it('is exact on exact multiples and one unit either side', () => {
    fc.assert(
      fc.property(inputs, fc.integer({ min: -1, max: 1 }), ({ a, b, d }, delta) => {
        // a × b + c a multiple of d, give or take one
        const product = BigInt(a) * BigInt(b);
        let c = Number((BigInt(d) - (product % BigInt(d))) % BigInt(d)) + delta;
        if (c < 0 || c >= b) c = 0;
        expect(floorDiv(a, b, c, d), `floor((${a} × ${b} + ${c}) / ${d})`).toBe(exact(a, b, c, d));
      }),
      { numRuns: 100_000 },
    );
  }, 120_000);
});
