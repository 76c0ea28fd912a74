// SPEC §3 over real HTTP, with the example server: what a client sees when an
// operation is denied (429, Retry-After, the error's extensions), and how
// HTTP batches are charged.
import { afterEach, describe, expect, it } from 'vitest';
import { buckets, createExampleServer, exampleContext } from '../examples/app.js';
import type { ExampleOptions } from '../examples/app.js';
import { MemoryStore } from '../src/index.js';
import { captureLogger, RecordingStore, serveHttp } from './support/graphql.js';
import type { HttpEndpoint } from './support/graphql.js';

const SEARCH = { query: '{ search(term: "Book") { id } }' };

const stops: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(stops.splice(0).map((stop) => stop()));
});

let users = 0;
/** A user no other test spends tokens of (identify keys on `x-user-id`). */
function freshUser(): Record<string, string> {
  users += 1;
  return { 'x-user-id': `http-user-${users}` };
}

async function start(plugin: ExampleOptions['plugin'] = {}, memory = new MemoryStore()): Promise<{ http: HttpEndpoint; store: RecordingStore }> {
  const store = new RecordingStore(memory);
  const server = createExampleServer({ store, plugin, logger: captureLogger() });
  const http = await serveHttp(server, exampleContext);
  stops.push(() => server.stop());
  return { http, store };
}

/** Spends the 20 tokens of `search` (4 operations of cost 5), checking each is served. */
async function drainSearch(http: HttpEndpoint, user: Record<string, string>): Promise<void> {
  for (let i = 0; i < 4; i++) {
    const answer = await http.post(SEARCH, user);
    expect(answer.status).toBe(200);
    expect(answer.body.errors).toBeUndefined();
  }
}

describe('a denied operation over HTTP', () => {
  it('answers 429 with Retry-After in whole seconds and RATE_LIMITED with retryAfter in seconds', async () => {
    const { http } = await start();
    const user = freshUser();
    await drainSearch(http, user);

    const denied = await http.post(SEARCH, user);
    expect(denied.status).toBe(429);
    expect(denied.headers.get('content-type')).toMatch(/^application\/json/);
    expect(denied.body).toEqual({
      errors: [
        {
          message: expect.any(String),
          extensions: { code: 'RATE_LIMITED', retryAfter: expect.any(Number), bucket: 'search', cost: 5 },
        },
      ],
    });
    const retryAfter = denied.body.errors?.[0]?.extensions?.['retryAfter'] as number;
    // 5 tokens at 1 per 3 s, less the little refilled while draining.
    expect(retryAfter).toBeGreaterThan(13.5);
    expect(retryAfter).toBeLessThanOrEqual(15);
    expect(retryAfter * 1000).toBeCloseTo(Math.round(retryAfter * 1000), 6); // whole milliseconds
    expect(denied.headers.get('retry-after')).toBe(String(Math.ceil(retryAfter)));
    expect(denied.headers.get('retry-after')).toBe('15');
  });

  it('sends no Retry-After on an allowed operation', async () => {
    const { http } = await start();
    const allowed = await http.post(SEARCH, freshUser());
    expect(allowed.status).toBe(200);
    expect(allowed.headers.get('retry-after')).toBeNull();
    expect(allowed.body.data).toEqual({ search: expect.any(Array) });
  });

  it('keeps denying while the bucket refills, and spends nothing on denials', async () => {
    const { http, store } = await start();
    const user = freshUser();
    await drainSearch(http, user);
    const first = await http.post(SEARCH, user);
    const second = await http.post(SEARCH, user);
    expect(first.status).toBe(429);
    expect(second.status).toBe(429);
    // A denial takes nothing: the wait does not grow with the number of denied attempts.
    const wait = (answer: typeof first): number => answer.body.errors?.[0]?.extensions?.['retryAfter'] as number;
    expect(wait(second)).toBeLessThanOrEqual(wait(first));
    const left = await store.acquire(buckets.search, user['x-user-id']!, 0);
    expect(left).toEqual({ allowed: true, remaining: 0 });
  });

  it('answers an operation costing more than the capacity with retryAfter null, 429, no Retry-After and no store call', async () => {
    const { http, store } = await start();
    // `api` is charged the complexity: books 1000 x (Book 1 + title 0 + author 1) = 2000 > 1000.
    const answer = await http.post({ query: '{ books(first: 1000) { title author { name } } }' }, freshUser());
    expect(answer.status).toBe(429);
    expect(answer.headers.get('retry-after')).toBeNull();
    expect(answer.body).toEqual({
      errors: [{ message: expect.any(String), extensions: { code: 'RATE_LIMITED', retryAfter: null, bucket: 'api', cost: 2000 } }],
    });
    expect(store.calls).toEqual([]);
  });

  it('charges a size given by a variable, and denies it before any store call when it is too large', async () => {
    // A clock that stands still: api refills a token each 60 ms, which a loaded machine spends between the charge and the refund.
    const at = Date.now();
    const { http, store } = await start({}, new MemoryStore({ now: () => at }));
    const query = 'query Books($n: Int) { books(first: $n) { author { name } } }';
    // n x (Book 1 + author 1) = 2n: 500 books cost the whole capacity, 501 more than it.
    const small = await http.post({ query, variables: { n: 500 } }, freshUser());
    expect(small.status).toBe(200);
    // The example holds 50 books and gives back what the other 450 would have cost.
    expect(small.body.extensions?.['rateLimit']).toEqual({ api: { cost: 1000, actualCost: 100, remaining: 900, capacity: 1000 } });
    const large = await http.post({ query, variables: { n: 501 } }, freshUser());
    expect(large.status).toBe(429);
    expect(large.body.errors?.[0]?.extensions).toEqual({ code: 'RATE_LIMITED', retryAfter: null, bucket: 'api', cost: 1002 });
    expect(store.calls).toHaveLength(1);
  });
});

describe('HTTP batches', () => {
  it('charges each operation of a batch on its own', async () => {
    const { http, store } = await start();
    const user = freshUser();
    const answer = await http.postBatch([SEARCH, SEARCH], user);
    expect(answer.status).toBe(200);
    expect(answer.body).toHaveLength(2);
    for (const result of answer.body) {
      expect(result.errors).toBeUndefined();
      expect(result.data).toEqual({ search: expect.any(Array) });
    }
    const reported = answer.body.map((r) => (r.extensions?.['rateLimit'] as Record<string, { remaining: number }>)['search']!.remaining);
    expect(reported.sort((a, b) => a - b)).toEqual([10, 15]);
    expect(await store.acquire(buckets.search, user['x-user-id']!, 0)).toEqual({ allowed: true, remaining: 10 });
  });

  it('serves the other operations of a batch when one is denied', async () => {
    const { http } = await start();
    const user = freshUser();
    await drainSearch(http, user);
    const answer = await http.postBatch([SEARCH, { query: '{ book(id: "1") { title } }' }], user);
    expect(answer.body).toHaveLength(2);
    const [denied, served] = answer.body;
    expect(denied).toEqual({
      errors: [{ message: expect.any(String), extensions: { code: 'RATE_LIMITED', retryAfter: expect.any(Number), bucket: 'search', cost: 5 } }],
    });
    expect(served?.errors).toBeUndefined();
    expect(served?.data).toEqual({ book: { title: 'Book 1' } });
    expect(answer.headers.get('retry-after')).toBe('15');
  });

  it('sends the longest wait of a batch in Retry-After, whatever the order', async () => {
    // The example holds 50 books: with refunds, asking for 478 would be charged 50 of them.
    const { http } = await start({ refundUnusedCost: false });
    const user = freshUser();
    await drainSearch(http, user);
    // `api` is charged every operation's complexity: the 4 searches took 4 x 10 x (Book 1 + id 0) = 40;
    // 478 x (Book 1 + author 1) = 956 of the 960 left leaves 4, refilled at 1000 a minute.
    const drain = await http.post({ query: '{ books(first: 478) { author { name } } }' }, user);
    expect(drain.status).toBe(200);
    const books = { query: '{ books(first: 50) { author { name } } }' }; // 50 x 2 = 100 tokens of api, 96 short: a wait of about 5.8 s
    for (const batch of [[books, SEARCH], [SEARCH, books]]) {
      const answer = await http.postBatch(batch, user);
      expect(answer.body.map((r) => r.errors?.[0]?.extensions?.['bucket'])).toEqual(batch.map((op) => (op === SEARCH ? 'search' : 'api')));
      const waits = answer.body.map((r) => r.errors?.[0]?.extensions?.['retryAfter'] as number);
      expect(waits[batch.indexOf(books)]).toBeGreaterThan(5);
      expect(waits[batch.indexOf(books)]).toBeLessThanOrEqual(6.06);
      expect(answer.headers.get('retry-after')).toBe(String(Math.ceil(Math.max(...waits))));
      expect(answer.headers.get('retry-after')).toBe('15');
    }
  });
});
