/**
 * The text of parts of a JSON document, found without parsing them: an
 * answer that adds to the Router's response body sends the body back as the
 * Router wrote it, with only the addition spliced in. Through `JSON.parse`
 * and `JSON.stringify` a number beyond 2^53 (a 64-bit id a subgraph
 * returned) would come back rounded, `1e400` as `null`, `-0` as `0`.
 *
 * Every function takes the whole text and offsets into it, reads each
 * character at most once, and assumes what `JSON.parse` already accepted.
 */

/** Where a value ends: the offset just past it. `start` is at its first character. */
function skipValue(text: string, start: number): number {
  let depth = 0;
  let i = start;
  do {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      i = skipString(text, i);
      continue;
    }
    if (c === OPEN_BRACE || c === OPEN_BRACKET) depth++;
    else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) depth--;
    else if (depth === 0) {
      // A number or a literal: up to the next delimiter.
      while (i < text.length && !DELIMITERS.has(text.charCodeAt(i))) i++;
      return i;
    }
    i++;
  } while (depth > 0 && i < text.length);
  return i;
}

/** The offset just past the string starting at `start` (its opening quote). */
function skipString(text: string, start: number): number {
  let i = start + 1;
  for (;;) {
    const c = text.charCodeAt(i);
    if (c === BACKSLASH) i += 2;
    else if (c === QUOTE || Number.isNaN(c)) return i + 1;
    else i++;
  }
}

function skipSpace(text: string, i: number): number {
  while (SPACE.has(text.charCodeAt(i))) i++;
  return i;
}

/** The range of a value: `[start, end)`. */
export interface Span {
  readonly start: number;
  readonly end: number;
}

/**
 * The value of member `key` of the object at `object` (its `{`), the last
 * one when the key is repeated (as `JSON.parse` reads it); undefined without it.
 */
export function member(text: string, object: Span, key: string): Span | undefined {
  let found: Span | undefined;
  let i = skipSpace(text, object.start + 1);
  while (i < object.end && text.charCodeAt(i) === QUOTE) {
    const keyEnd = skipString(text, i);
    const name = JSON.parse(text.slice(i, keyEnd)) as string;
    const valueStart = skipSpace(text, skipSpace(text, keyEnd) + 1);
    const valueEnd = skipValue(text, valueStart);
    if (name === key) found = { start: valueStart, end: valueEnd };
    i = skipSpace(text, valueEnd);
    if (text.charCodeAt(i) === COMMA) i = skipSpace(text, i + 1);
  }
  return found;
}

/** The whole document's value, without the white space around it. */
export function documentSpan(text: string): Span {
  const start = skipSpace(text, 0);
  return { start, end: skipValue(text, start) };
}

export function isObjectAt(text: string, span: Span): boolean {
  return text.charCodeAt(span.start) === OPEN_BRACE;
}

/** The object at `object` with a member `"key": json` added last (so it is the one `JSON.parse` reads). */
export function withMember(text: string, object: Span, key: string, json: string): string {
  const close = object.end - 1;
  const empty = skipSpace(text, object.start + 1) === close;
  return `${text.slice(object.start, close)}${empty ? '' : ','}${JSON.stringify(key)}:${json}}`;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const SPACE = new Set([0x20, 0x09, 0x0a, 0x0d]);
const DELIMITERS = new Set([COMMA, CLOSE_BRACE, CLOSE_BRACKET, 0x20, 0x09, 0x0a, 0x0d]);
