// A drained bucket denies: send operations for one identity, one after
// another, round-robin over the replicas, and return what each got.
import { classify, postJson } from './http.js';
import type { AnswerKind } from './http.js';

/** 1 token of "api" in the example schema. */
export const BOOK_QUERY = '{ book(id: "1") { title } }';
/**
 * 5 tokens of the example's "search" bucket (capacity 20, 1 token per 3 s),
 * and 1 of "api" (1 book × (Book 1 + title 0)): a fresh identity gets exactly
 * 4, whatever the pace of the burst, since the bucket refills far slower than
 * a burst takes.
 */
export const SEARCH_QUERY = '{ search(term: "Book", first: 1) { title } }';
export const SEARCHES_PER_BURST = 4;

export async function burst(urls: readonly string[], identity: string, count: number, query = BOOK_QUERY): Promise<AnswerKind[]> {
  const kinds: AnswerKind[] = [];
  for (let i = 0; i < count; i++) {
    const answer = await postJson(urls[i % urls.length]!, { query }, { headers: { 'x-user-id': identity }, timeoutMs: 5_000 });
    kinds.push(classify(answer));
  }
  return kinds;
}

/** `admitted` answers with data, then `denied` 429s: what a fresh identity must get from a working limiter. */
export function exactBurst(admitted: number, denied: number): AnswerKind[] {
  return [...Array<AnswerKind>(admitted).fill('data'), ...Array<AnswerKind>(denied).fill('limited')];
}

/** A fresh identity's searches: exactly `SEARCHES_PER_BURST` admitted, then 429s. */
export async function searchBurst(urls: readonly string[], identity: string): Promise<AnswerKind[]> {
  return burst(urls, identity, SEARCHES_PER_BURST + 2, SEARCH_QUERY);
}

export const EXACT_SEARCH_BURST = exactBurst(SEARCHES_PER_BURST, 2);
