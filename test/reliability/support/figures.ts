// Figures the scenarios print: counts by outcome and latency percentiles.
import type { LoadRecord } from './load.js';

export interface LoadFigures {
  requests: number;
  byKind: Record<string, number>;
  /** first request sent → last answer received, ms */
  windowMs: number;
  firstSent: number;
  lastAnswered: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

export function loadFigures(records: readonly LoadRecord[]): LoadFigures {
  const byKind: Record<string, number> = {};
  let firstSent = Infinity;
  let lastAnswered = -Infinity;
  const latencies: number[] = [];
  for (const [, sent, answered, , kind] of records) {
    byKind[kind] = (byKind[kind] ?? 0) + 1;
    firstSent = Math.min(firstSent, sent);
    lastAnswered = Math.max(lastAnswered, answered);
    latencies.push(answered - sent);
  }
  latencies.sort((a, b) => a - b);
  const pick = (q: number): number => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0;
  return {
    requests: records.length,
    byKind,
    windowMs: lastAnswered - firstSent,
    firstSent,
    lastAnswered,
    p50Ms: round(pick(0.5)),
    p99Ms: round(pick(0.99)),
    maxMs: round(latencies[latencies.length - 1] ?? 0),
  };
}

/** The slowest answer among records sent in [from, to), with how many there were. */
export function slowest(records: readonly LoadRecord[], from = -Infinity, to = Infinity): { count: number; maxMs: number } {
  let count = 0;
  let maxMs = 0;
  for (const [, sent, answered] of records) {
    if (sent < from || sent >= to) continue;
    count += 1;
    maxMs = Math.max(maxMs, answered - sent);
  }
  return { count, maxMs: round(maxMs) };
}

export function round(value: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

export function kinds(figures: LoadFigures): string {
  return Object.entries(figures.byKind)
    .map(([kind, n]) => `${kind}=${n}`)
    .join(' ');
}

/**
 * Tokens a bucket could not hand out because no request reached it: it
 * starts full, so refill before the first admission is lost; between two
 * admissions it is full again after capacity / refill, and refill beyond
 * that is lost; refill after the last admission is never asked for. Under
 * constant demand all three are a few ms of refill; a stalled client or
 * server process makes them larger. Times are the answers' arrival at the
 * client, which is where a stall shows.
 */
export function unusedRefill(records: readonly LoadRecord[], capacity: number, perSecond: number): { tokens: number; longestGapMs: number } {
  const admitted = records.filter((r) => r[4] === 'data').map((r) => r[2]).sort((a, b) => a - b);
  if (admitted.length === 0) return { tokens: 0, longestGapMs: 0 };
  const figures = loadFigures(records);
  const perMs = perSecond / 1000;
  const fillMs = capacity / perMs;
  let lostMs = admitted[0]! - figures.firstSent + (figures.lastAnswered - admitted[admitted.length - 1]!);
  let longestGapMs = 0;
  for (let i = 1; i < admitted.length; i++) {
    const gap = admitted[i]! - admitted[i - 1]!;
    longestGapMs = Math.max(longestGapMs, gap);
    lostMs += Math.max(0, gap - fillMs);
  }
  return { tokens: lostMs * perMs, longestGapMs: round(longestGapMs) };
}
