/**
 * A bucket's state: the time it is full again, `at` + `num`/`den` µs
 * (`num` = 0 for a whole microsecond). In Redis it is the key's value: the
 * number `at`, or the string `at+num/den`.
 */
export interface FullAt {
  readonly at: number;
  readonly num: number;
  readonly den: number;
}

/** The state as lua/acquire.lua stores and returns it. */
export function formatFullAt(x: FullAt): string {
  return x.num === 0 ? String(x.at) : `${x.at}+${x.num}/${x.den}`;
}

const FRACTION = /^(\d+)\+(\d+)\/(\d+)$/;

/** A state returned by the scripts (a number, or an `A+num/den` string); null for 0 (nothing stored). */
export function parseFullAt(value: unknown): FullAt | null {
  if (typeof value === 'number') return value > 0 && Number.isSafeInteger(value) ? { at: value, num: 0, den: 1 } : null;
  if (typeof value !== 'string') return null;
  if (/^\d+$/.test(value)) return parseFullAt(Number(value));
  const match = FRACTION.exec(value);
  if (match === null) return null;
  const [at, num, den] = [Number(match[1]), Number(match[2]), Number(match[3])];
  return Number.isSafeInteger(at) && Number.isSafeInteger(num) && Number.isSafeInteger(den) && den > 0 && num < den
    ? { at, num, den }
    : null;
}
