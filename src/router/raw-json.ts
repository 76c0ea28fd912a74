/**
 * Answers spliced into the text of the Router's payload. An answer is the
 * payload the Router sent with only the members the coprocessor changes
 * replaced: every other character is sent back as it came, so nothing the
 * Router sent is read and written again — through `JSON.parse` and
 * `JSON.stringify` a number beyond 2^53 (a 64-bit id in the client's
 * variables or a subgraph's data) would come back rounded, `1e400` as
 * `null`, `-0` as `0`.
 *
 * Invariant: the answer parses to the payload with each edited path set to
 * its new value, and every byte outside the edited values is the payload's.
 *
 * What the text is assumed to be: a JSON text `JSON.parse` has accepted (the
 * Router sends serde_json's output: compact, each key once). White space
 * anywhere JSON allows it is kept as it is. A key the payload repeats
 * (serde_json never writes one) has each of its occurrences edited, so a
 * reader that takes the first and one that takes the last (as `JSON.parse`
 * and serde_json's maps do) read the same value; a member is added only
 * where its key is missing, so an answer never repeats a key. Every
 * function reads each character at most once per edit level.
 */

/** The range of a value: `[start, end)`. */
export interface Span {
  readonly start: number;
  readonly end: number;
}

/** A value to set: `path` names members from the object edited (none empty), `json` is the value's JSON text. */
export interface Edit {
  readonly path: readonly string[];
  readonly json: string;
}

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
      while (i < text.length) {
        const d = text.charCodeAt(i);
        if (d === COMMA || d === CLOSE_BRACE || d === CLOSE_BRACKET || isSpace(d)) break;
        i++;
      }
      return i;
    }
    i++;
  } while (depth > 0 && i < text.length);
  return i;
}

/** The offset just past the string starting at `start` (its opening quote): the next quote not escaped, found natively. */
function skipString(text: string, start: number): number {
  let from = start + 1;
  for (;;) {
    const quote = text.indexOf('"', from);
    if (quote === -1) return text.length;
    let backslashes = 0;
    while (text.charCodeAt(quote - 1 - backslashes) === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return quote + 1;
    from = quote + 1;
  }
}

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

function skipSpace(text: string, i: number): number {
  while (isSpace(text.charCodeAt(i))) i++;
  return i;
}

/** Calls `found` with each member of the object at `object` (its `{`), in order: its key and its value's span. */
function eachMember(text: string, object: Span, found: (key: string, value: Span) => void): void {
  let i = skipSpace(text, object.start + 1);
  while (i < object.end && text.charCodeAt(i) === QUOTE) {
    const keyEnd = skipString(text, i);
    // A key without escapes is its own text; JSON.parse reads one with them.
    const raw = text.slice(i + 1, keyEnd - 1);
    const key = raw.includes('\\') ? (JSON.parse(text.slice(i, keyEnd)) as string) : raw;
    const valueStart = skipSpace(text, skipSpace(text, keyEnd) + 1);
    const valueEnd = skipValue(text, valueStart);
    found(key, { start: valueStart, end: valueEnd });
    i = skipSpace(text, valueEnd);
    if (text.charCodeAt(i) === COMMA) i = skipSpace(text, i + 1);
  }
}

/**
 * The value of member `key` of the object at `object` (its `{`), the last
 * one when the key is repeated (as `JSON.parse` reads it); undefined without it.
 */
export function member(text: string, object: Span, key: string): Span | undefined {
  let last: Span | undefined;
  eachMember(text, object, (name, value) => {
    if (name === key) last = value;
  });
  return last;
}

/** The whole document's value, without the white space around it. */
export function documentSpan(text: string): Span {
  const start = skipSpace(text, 0);
  return { start, end: skipValue(text, start) };
}

export function isObjectAt(text: string, span: Span): boolean {
  return text.charCodeAt(span.start) === OPEN_BRACE;
}

/** The whole text with `edits` made below the object at `object`; the text itself without any. */
export function withEdits(text: string, object: Span, edits: readonly Edit[]): string {
  if (edits.length === 0) return text;
  return text.slice(0, object.start) + editedObject(text, object, edits) + text.slice(object.end);
}

/**
 * The new text of the object at `object`: each member an edit's path starts
 * with, at every occurrence of its key, set to the edit's value (an edit
 * whose path goes on edits inside it, or replaces it with an object when it
 * is none); members no edit names are kept as they are; a missing one is
 * added last. Of two edits of one path the later wins; an edit of a path
 * another one extends replaces the value whole.
 */
function editedObject(text: string, object: Span, edits: readonly Edit[]): string {
  const byKey = new Map<string, Edit[]>();
  for (const edit of edits) {
    const [key] = edit.path;
    if (key === undefined) throw new TypeError('an edit names no member');
    const group = byKey.get(key);
    if (group === undefined) byKey.set(key, [edit]);
    else group.push(edit);
  }
  let out = '';
  let at = object.start;
  const seen = new Set<string>();
  eachMember(text, object, (key, value) => {
    const group = byKey.get(key);
    if (group === undefined) return;
    seen.add(key);
    out += text.slice(at, value.start) + editedValue(text, value, group);
    at = value.end;
  });
  const close = object.end - 1;
  let empty = skipSpace(text, object.start + 1) === close;
  out += text.slice(at, close);
  for (const [key, group] of byKey) {
    if (seen.has(key)) continue;
    out += `${empty ? '' : ','}${JSON.stringify(key)}:${editedValue(EMPTY_OBJECT, EMPTY_SPAN, group)}`;
    empty = false;
  }
  return `${out}}`;
}

/** The new text of one member's value, all of whose `edits` start with its key. */
function editedValue(text: string, value: Span, edits: readonly Edit[]): string {
  let whole: Edit | undefined;
  for (const edit of edits) if (edit.path.length === 1) whole = edit;
  if (whole !== undefined) return whole.json;
  const inner = edits.map((edit) => ({ path: edit.path.slice(1), json: edit.json }));
  return isObjectAt(text, value) ? editedObject(text, value, inner) : editedObject(EMPTY_OBJECT, EMPTY_SPAN, inner);
}

const EMPTY_OBJECT = '{}';
const EMPTY_SPAN: Span = { start: 0, end: 2 };

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
