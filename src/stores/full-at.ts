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

/** Negative when `a` is earlier than `b`, exactly. */
export function compareFullAt(a: FullAt, b: FullAt): number {
  if (a.at !== b.at) return a.at - b.at;
  const left = BigInt(a.num) * BigInt(b.den);
  const right = BigInt(b.num) * BigInt(a.den);
  return left < right ? -1 : left > right ? 1 : 0;
}

/** When a full-at time has passed, in ms (rounded up): the key's expiry. */
export function fullAtMs(x: FullAt): number {
  return Math.ceil((x.num === 0 ? x.at : x.at + 1) / 1000);
}

/** `x - (from - to)`, exactly: `x` moved by the time between `from` and `to`. */
export function shiftFullAt(x: FullAt, from: FullAt, to: FullAt): FullAt {
  const den = BigInt(x.den) * BigInt(from.den) * BigInt(to.den);
  const value = (v: FullAt): bigint => BigInt(v.at) * den + (BigInt(v.num) * den) / BigInt(v.den);
  const units = value(x) - value(from) + value(to);
  // back to whole µs and a fraction, rounded down (earlier: a smaller bound, never a larger one)
  const outDen = Math.max(x.den, from.den, to.den);
  const at = units >= 0n ? units / den : -((-units + den - 1n) / den);
  const num = ((units - at * den) * BigInt(outDen)) / den;
  return { at: Number(at), num: Number(num), den: num === 0n ? 1 : outDen };
}
