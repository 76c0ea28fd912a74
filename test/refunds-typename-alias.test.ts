// Refunds price the response: a key that holds __typename under one possible
// type must not make an object of another type, whose selections put a
// different field under that key, priced as the cheaper one. A user named
// "Book", selected as `... on User { kind: name posts(first: 100) { id } }
// ... on Book { kind: __typename }`, keeps its 100 posts' cost.
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryStore, Rate, TokenBucket, tokenBucketDirectiveTypeDefs } from '../src/index.js';
import { SERVERS, startHttpServer, tokensLeft } from './support/http-servers.js';

const typeDefs = `${tokenBucketDirectiveTypeDefs}
type Query { search(first: Int!): [Result!]! @tokenBucket(name: "api") }
union Result = Book | User
type Book { title: String! }
type User { name: String! posts(first: Int!): [Post!]! }
type Post { id: ID! }
`;
const api = new TokenBucket('api', 1000, Rate.perHour(1000));
let made = 0;
const resolvers = {
  Query: { search: () => [{ __typename: 'User', name: 'Book' }] },
  Result: { __resolveType: (o: { __typename: string }) => o.__typename },
  User: {
    posts: (_: unknown, { first }: { first: number }) => {
      made += first;
      return Array.from({ length: first }, (_x, i) => ({ id: String(i) }));
    },
  },
};
const running: { stop(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.stop()));
});

describe.each(SERVERS)('refundUnusedCost on %s', (kind) => {
  it('does not price an object as the type an aliased field of it happens to name', async () => {
    const store = new MemoryStore();
    const server = await startHttpServer(kind, { typeDefs, resolvers, limits: { store, buckets: [api], refundUnusedCost: true, reportCost: true } });
    running.push(server);
    const before = made;
    const answer = await server.post({ query: '{ search(first: 1) { ... on User { kind: name posts(first: 100) { id } } ... on Book { kind: __typename } } }' }, { 'x-user': 'u' });
    expect(made - before).toBe(100);
    // 1 × (User 1 + 100 × Post 1): what the response holds.
    expect(answer.body.extensions).toEqual({ rateLimit: { api: { cost: 101, actualCost: 101, remaining: 899, capacity: 1000 } } });
    expect(await tokensLeft(store, api, 'u')).toBe(899);
  });
});
