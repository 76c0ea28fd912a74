/**
 * What a size argument's value says about a list's size: the largest
 * reading a resolver may make of it (`Number(v)`, `parseFloat(v)`,
 * `parseInt(v)`, `slice(0, v)`, `Array.from({ length: v })`, `Math.min(v, …)`):
 *
 * - `NaN`: nothing (the argument is absent);
 * - `-1`: a value no resolver can be trusted to honour as a size (null,
 *   negative, a boolean, not a number): it counts as the assumed size;
 * - else the size, a whole number: a fraction counts rounded up, anything
 *   past `Number.MAX_VALUE` (Infinity included) as `Number.MAX_VALUE`.
 *
 * A BigInt counts by its value, a number by its value or the integer
 * `parseInt` reads in its text, whichever is larger (`9e-7` is 9); a string by the largest of what
 * `Number` reads in it (surrounding whitespace, exponents, hexadecimal,
 * binary and octal notations), the number `parseFloat` reads at its start
 * (`"50000 rows"` is 50000) and the integer `parseInt` reads there (a sign,
 * a `0x` prefix, up to the first character it cannot read: `"0x4E20 rows"`
 * and `"+0x4E20"` are 20000, `"20000e-9"` is 20000); an object by what it
 * converts to (`valueOf`, `Symbol.toPrimitive`, `toString`: a custom
 * scalar's `Decimal`); a list by the larger of its length and what its first
 * element reads as, nested lists included (`Number([50000])` and
 * `parseInt([50000, 1])` both read 50000).
 *
 * With `list`, the argument is a GraphQL list (`ids: [ID!]`): its size is
 * its number of elements, as Apollo Router counts it (a single value
 * coerces to a list of one).
 */
export function sizeOf(value: unknown, list = false): number {
  if (list) return value === undefined ? Number.NaN : value === null ? -1 : Array.isArray(value) ? value.length : 1;
  switch (typeof value) {
    case 'number':
      return numberOrTextSize(value);
    case 'undefined':
      return Number.NaN;
    case 'bigint':
      return value < 0n ? -1 : numberSize(Number(value));
    case 'string':
      return stringSize(value);
    case 'object':
      if (value === null) return -1;
      if (Array.isArray(value)) return listSize(value);
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
  return Math.ceil(value) + 0; // -0 reads as 0
}

/**
 * Its length, or what its first element reads as when larger: `String(list)`
 * starts with the first element's text, so `parseInt`/`parseFloat` read it,
 * and `Number` reads a one-element list as its element. Lists nest without
 * recursion: only the first element of each level is read.
 */
function listSize(list: readonly unknown[]): number {
  let size = list.length;
  let first: unknown = list[0];
  while (Array.isArray(first)) {
    const inner = first as readonly unknown[];
    if (inner.length > size) size = inner.length;
    first = inner[0];
  }
  if (first !== undefined) {
    const reading = sizeOf(first);
    if (reading > size) size = reading;
  }
  return size;
}

/** Every standard reading of a string: `Number` (not of a blank string, which it reads as 0), `parseFloat` and `parseInt`; the largest usable one. */
function stringSize(text: string): number {
  let size = text.trim() === '' ? -1 : numberReading(Number(text));
  const float = numberReading(Number.parseFloat(text));
  if (float > size) size = float;
  const integer = numberReading(Number.parseInt(text));
  return integer > size ? integer : size;
}

/** A number as `Number` reads it, or as `parseInt` reads its text when larger (`String(9e-7)` is `"9e-7"`: 9). */
function numberOrTextSize(value: number): number {
  const size = numberSize(value);
  const integer = numberReading(Number.parseInt(String(value)));
  return integer > size ? integer : size;
}

function numberReading(value: number): number {
  return Number.isNaN(value) ? -1 : numberSize(value);
}

/** What `Number(value)`, and every reading of `String(value)`, find in an object (`valueOf`, `Symbol.toPrimitive`, `toString`): the largest. */
function objectSize(value: object): number {
  let size = -1;
  try {
    size = numberSize(Number(value));
  } catch {
    // An object that cannot become a number (no prototype, a throwing valueOf) says nothing usable.
  }
  try {
    const reading = stringSize(String(value));
    if (reading > size) size = reading;
  } catch {
    // Nor one that cannot become a string.
  }
  return size;
}
