/**
 * What a size argument's value says about a list's size:
 *
 * - `NaN`: nothing (the argument is absent);
 * - `-1`: a value no resolver can be trusted to honour as a size (null,
 *   negative, not a number): it counts as the assumed size;
 * - else the size, a whole number: a fraction counts rounded up, anything
 *   past `Number.MAX_VALUE` as `Number.MAX_VALUE`.
 *
 * BigInts, numeric strings and values that convert to a number (a custom
 * scalar's `Decimal`, say) count by their value, and a list by its number
 * of elements: whatever a resolver could read as a count is read as one.
 */
export function sizeOf(value: unknown): number {
  switch (typeof value) {
    case 'number':
      return numberSize(value);
    case 'undefined':
      return Number.NaN;
    case 'bigint':
      return value < 0n ? -1 : numberSize(Number(value));
    case 'string':
      return stringSize(value);
    case 'object':
      if (value === null) return -1;
      if (Array.isArray(value)) return value.length;
      return objectSize(value);
    default:
      return -1;
  }
}

/** The larger of two `sizeOf` answers, where an absent or unusable one never hides a usable one. */
export function largerSize(a: number, b: number): number {
  if (Number.isNaN(a) || (a < 0 && !(b < 0))) return b;
  if (Number.isNaN(b) || b < 0) return a;
  return a > b ? a : b;
}

function numberSize(value: number): number {
  if (Number.isNaN(value) || value < 0) return -1;
  if (value > Number.MAX_VALUE) return Number.MAX_VALUE;
  return Math.ceil(value);
}

/** `Number("0x10")` reads hexadecimal and exponents, `parseFloat("50000 rows")` a leading number: whichever is larger. */
function stringSize(text: string): number {
  const whole = text.trim() === '' ? Number.NaN : Number(text);
  const leading = Number.parseFloat(text);
  const a = Number.isNaN(whole) ? -1 : numberSize(whole);
  const b = Number.isNaN(leading) ? -1 : numberSize(leading);
  return a > b ? a : b;
}

function objectSize(value: object): number {
  // Only an object that says what number it is (`valueOf`, `toString`) is one.
  const valueOf = (value as { valueOf?: unknown }).valueOf;
  if (typeof valueOf !== 'function' || valueOf === Object.prototype.valueOf) return -1;
  try {
    const primitive: unknown = valueOf.call(value);
    if (typeof primitive === 'number') return numberSize(primitive);
    if (typeof primitive === 'bigint') return primitive < 0n ? -1 : numberSize(Number(primitive));
    if (typeof primitive === 'string') return stringSize(primitive);
  } catch {
    // A throwing valueOf says nothing usable.
  }
  return -1;
}
