import { sat } from './selections.js';

/*
 * A selection inside a connection priced once for every size the connection
 * may be given. What its sized fields cost grows with the connection's size
 * `s`: a sized field with no slicing argument of its own costs `s × x`; one
 * whose own argument asks for `o` items costs `max(s, o) × x`, that is
 * `o × x + max(0, s − o) × x`. So a selection's measure is a constant vector
 * plus terms `x × max(0, s_v − b)`, one variable `s_v` per enclosing
 * `sizedFields` annotation; the constant lives in the walk's frame, the
 * terms here. Sums, scaling by a count and evaluating at a known size stay
 * exact; each variable keeps at most MAX_TERMS terms (past that, two terms
 * merge into one that is never smaller), so pricing stays linear however
 * many sizes a document holds.
 */

/** Adds `x × max(0, s_v − b)` to a measure. Never mutated once built. */
export interface SizeTerm {
  readonly v: number;
  readonly b: number;
  readonly x: Float64Array;
}

export type SizeTerms = readonly SizeTerm[] | null;

/** Terms kept per variable before neighbours merge. */
export const MAX_TERMS = 8;

function order(a: SizeTerm, b: SizeTerm): number {
  return a.v - b.v || a.b - b.b;
}

/** `a + k × b`, merged and sorted by (variable, breakpoint). */
export function addTerms(a: SizeTerms, b: SizeTerms, k = 1): SizeTerms {
  if (b === null || b.length === 0 || k === 0) return a;
  const scaled = k === 1 ? b : scaleTerms(b, k);
  if (a === null || a.length === 0) return scaled;
  if (scaled === null) return a;
  const all = [...a, ...scaled].sort(order);
  const merged: SizeTerm[] = [];
  for (const term of all) {
    const last = merged[merged.length - 1];
    if (last !== undefined && last.v === term.v && last.b === term.b) merged[merged.length - 1] = { v: last.v, b: last.b, x: sum(last.x, term.x) };
    else merged.push(term);
  }
  return trim(merged);
}

/** `k × terms`; k >= 0. */
export function scaleTerms(terms: SizeTerms, k: number): SizeTerms {
  if (terms === null || k === 0) return null;
  if (k === 1) return terms;
  return terms.map((t) => ({ v: t.v, b: t.b, x: scale(t.x, k) }));
}

/**
 * Evaluates variable 0 at `size`: adds what its terms come to into
 * `frame[at…]` and returns the other terms, with their variables renumbered
 * one down when `renumber` (the enclosing annotation's variable becomes the
 * nearest) or as they were.
 */
export function substituteNearest(terms: SizeTerms, size: number, frame: Float64Array, at: number, renumber = true): SizeTerms {
  if (terms === null) return null;
  let rest: SizeTerm[] | null = null;
  for (const term of terms) {
    if (term.v === 0) addInto(frame, at, term.x, size - term.b);
    else (rest ??= []).push(renumber ? { v: term.v - 1, b: term.b, x: term.x } : term);
  }
  return rest;
}

/** Evaluates every variable at `size` (adds into the frame); used where no finer bound exists. */
export function substituteAll(terms: SizeTerms, size: number, frame: Float64Array, at: number): void {
  if (terms === null) return;
  for (const term of terms) addInto(frame, at, term.x, size - term.b);
}

/**
 * Terms never below those of `a` nor of `b` at any size, for the most
 * expensive of several possible types: per variable and component, the
 * slope after each breakpoint is the larger of the two slopes there.
 * (The constant parts take their maximum in the frame.) Equal to the exact
 * maximum whenever one side's slopes dominate; an upper bound otherwise.
 */
export function envelope(a: SizeTerms, b: SizeTerms, width: number): SizeTerms {
  if (a === null || a.length === 0) return b;
  if (b === null || b.length === 0) return a;
  const result: SizeTerm[] = [];
  const variables = new Set<number>();
  for (const t of a) variables.add(t.v);
  for (const t of b) variables.add(t.v);
  for (const v of [...variables].sort((x, y) => x - y)) {
    const ta = a.filter((t) => t.v === v);
    const tb = b.filter((t) => t.v === v);
    const breakpoints = [...new Set([...ta.map((t) => t.b), ...tb.map((t) => t.b)])].sort((x, y) => x - y);
    const slopeA = new Float64Array(width);
    const slopeB = new Float64Array(width);
    let previous = new Float64Array(width);
    let ia = 0;
    let ib = 0;
    for (const point of breakpoints) {
      while (ia < ta.length && ta[ia]!.b === point) addInto(slopeA, 0, ta[ia++]!.x, 1);
      while (ib < tb.length && tb[ib]!.b === point) addInto(slopeB, 0, tb[ib++]!.x, 1);
      const slope = new Float64Array(width);
      const increment = new Float64Array(width);
      let any = false;
      for (let i = 0; i < width; i++) {
        slope[i] = Math.max(slopeA[i] ?? 0, slopeB[i] ?? 0);
        const step = (slope[i] ?? 0) - (previous[i] ?? 0);
        increment[i] = step > 0 ? step : 0;
        if (step > 0) any = true;
      }
      if (any) result.push({ v, b: point, x: increment });
      previous = slope;
    }
  }
  return trim(result);
}

/** At most MAX_TERMS per variable: the closest neighbours merge into the earlier breakpoint, which never lowers the sum. */
function trim(terms: SizeTerm[]): SizeTerm[] {
  let start = 0;
  while (start < terms.length) {
    let end = start;
    while (end < terms.length && terms[end]!.v === terms[start]!.v) end++;
    while (end - start > MAX_TERMS) {
      let closest = start;
      for (let i = start + 1; i < end - 1; i++) {
        if (terms[i + 1]!.b - terms[i]!.b < terms[closest + 1]!.b - terms[closest]!.b) closest = i;
      }
      const left = terms[closest]!;
      const right = terms[closest + 1]!;
      terms.splice(closest, 2, { v: left.v, b: left.b, x: sum(left.x, right.x) });
      end--;
    }
    start = end;
  }
  return terms;
}

function addInto(frame: Float64Array, at: number, x: Float64Array, steps: number): void {
  if (!(steps > 0)) return;
  for (let i = 0; i < x.length; i++) {
    const value = x[i] ?? 0;
    if (value !== 0) frame[at + i] = sat((frame[at + i] ?? 0) + sat(value * steps));
  }
}

function sum(a: Float64Array, b: Float64Array): Float64Array {
  const out = new Float64Array(a.length);
  for (let i = 0; i < a.length; i++) out[i] = sat((a[i] ?? 0) + (b[i] ?? 0));
  return out;
}

function scale(x: Float64Array, k: number): Float64Array {
  const out = new Float64Array(x.length);
  for (let i = 0; i < x.length; i++) {
    const value = x[i] ?? 0;
    out[i] = value === 0 ? 0 : sat(value * k);
  }
  return out;
}
