// graphql-js completes a list's items as it reads them: an iterable that
// throws part-way (a cursor that times out, a generator stopping at a limit)
// nulls the whole list after every item before it, and every field below
// them, had run. Such a response cannot show that work, so the operation
// keeps its estimate; an error that nulls one item of a list still refunds.
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryStore, Rate, TokenBucket, tokenBucketDirectiveTypeDefs } from '../src/index.js';
import { SERVERS, startHttpServer, tokensLeft } from './support/http-servers.js';

const typeDefs = `${tokenBucketDirectiveTypeDefs}
type Query {
  rows(first: Int!): [Row] @tokenBucket(name: "api")
  matrix(first: Int!): [[Row]] @tokenBucket(name: "api")
  viewer: Viewer
}
type Viewer { rows(first: Int!): [Row] @tokenBucket(name: "api") }
type Row { id: ID! detail: String }
`;
// Slow enough that nothing visible refills during a test.
const api = new TokenBucket('api', 1000, Rate.perHour(1000));

/** Row details the resolvers produced: the work a client made the server do. */
let made = 0;
/** Rows up to `first`, but the cursor gives out after 40 of them. */
function* cursor(first: number): Generator<{ id: string }> {
  for (let i = 0; i < first; i++) {
    if (i === 40) throw new Error('cursor timed out');
    yield { id: String(i) };
  }
}
const rows = (_: unknown, { first }: { first: number }) => cursor(first);
const resolvers = {
  Query: {
    rows,
    // The third inner list's cursor gives out.
    matrix: (_: unknown, { first }: { first: number }) => Array.from({ length: 3 }, (_x, i) => (i === 2 ? cursor(first) : cursor(Math.min(first, 40)))),
    viewer: () => ({}),
  },
  Viewer: { rows },
  Row: {
    detail: () => {
      made++;
      return 'd';
    },
  },
};
const running: { stop(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.stop()));
});

let users = 0;
const CASES = [
  // 50 × Row 1
  { name: 'a list field', query: '{ rows(first: 50) { id detail } }', estimate: 50, produced: 40 },
  { name: 'a list field below an object, aliased, through a fragment', query: '{ viewer { ...V } } fragment V on Viewer { r: rows(first: 50) { detail } }', estimate: 50, produced: 40 },
  // 50 × 10 × Row 1
  { name: 'an inner list of a list of lists', query: '{ matrix(first: 50) { detail } }', estimate: 500, produced: 120 },
] as const;

describe.each(SERVERS)('refundUnusedCost on %s, when an iterable throws part-way through a list', (kind) => {
  it.each(CASES)('keeps the estimate: $name', async ({ query, estimate, produced }) => {
    const store = new MemoryStore();
    const server = await startHttpServer(kind, { typeDefs, resolvers, limits: { store, buckets: [api], refundUnusedCost: true, reportCost: true } });
    running.push(server);
    const user = `partial-${++users}`;
    const before = made;
    const answer = await server.post({ query }, { 'x-user': user });
    expect(made - before).toBe(produced);
    expect(answer.body.errors).toHaveLength(1);
    expect(answer.body.extensions).toEqual({ rateLimit: { api: { cost: estimate, actualCost: estimate, remaining: 1000 - estimate, capacity: 1000 } } });
    expect(await tokensLeft(store, api, user)).toBe(1000 - estimate);
  });

  it('still refunds when an error nulls one item: nothing below it ran', async () => {
    const store = new MemoryStore();
    const items = {
      ...resolvers,
      Query: { ...resolvers.Query, rows: () => [{ id: '1' }, Promise.reject(new Error('gone')), { id: '3' }] },
    };
    const server = await startHttpServer(kind, { typeDefs, resolvers: items, limits: { store, buckets: [api], refundUnusedCost: true, reportCost: true } });
    running.push(server);
    const user = `partial-${++users}`;
    const answer = await server.post({ query: '{ rows(first: 50) { detail } }' }, { 'x-user': user });
    expect(answer.body.data).toEqual({ rows: [{ detail: 'd' }, null, { detail: 'd' }] });
    // 3 items returned × Row 1
    expect(answer.body.extensions).toEqual({ rateLimit: { api: { cost: 50, actualCost: 3, remaining: 997, capacity: 1000 } } });
    expect(await tokensLeft(store, api, user)).toBe(997);
  });
});
