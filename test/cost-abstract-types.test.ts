// SPEC §2, "Since 0.4: abstract types": a field whose type is an interface
// or a union weighs what the most expensive of its possible types weighs, in
// the estimate; the actual cost of a response weighs each object by its own
// type, never below the work (an object whose type nothing tells weighs the
// most of the types it could be).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryStore, Rate, TokenBucket } from '../src/index.js';
import { IBM_COST_DIRECTIVES, costSchema, pricer } from './support/graphql.js';
import type { ResponseBody } from './support/graphql.js';
import { TRANSPORTS, serveLimited } from './support/limited-servers.js';
import type { LimitedServer } from './support/limited-servers.js';
import { tokenBucketDirectiveTypeDefs } from '../src/directive.js';

const SDL = `
  type Query @tokenBucket(name: "api") {
    reports(first: Int): [Report]
    node(id: ID!): Node
    nodes(first: Int): [Node]
    search(first: Int): [SearchResult]
  }
  interface Node { id: ID! }
  type Report implements Node @cost(weight: "1000") { id: ID! title: String }
  type User implements Node { id: ID! name: String }
  union SearchResult = Report | User
`;

describe('the estimate: an interface or union weighs its most expensive possible type', () => {
  const { costOf } = pricer(costSchema(SDL));

  it('weighs a Report behind node, nodes and a search union as reports does', () => {
    expect(costOf('{ reports(first: 50) { id } }')).toEqual({ api: 50_000 });
    expect(costOf('{ nodes(first: 50) { id } }')).toEqual({ api: 50_000 });
    expect(costOf('{ search(first: 50) { ... on Report { id } } }')).toEqual({ api: 50_000 });
    expect(costOf('{ search(first: 50) { ... on User { id } } }')).toEqual({ api: 50_000 });
    expect(costOf('{ node(id: "r1") { id } }')).toEqual({ api: 1000 });
    expect(costOf('{ node(id: "r1") { ... on User { name } } }')).toEqual({ api: 1000 });
  });

  it('prices a key shared with a condition nested in a fragment once, as graphql-js runs it', () => {
    const { costOf: price } = pricer(
      costSchema(`
        type Query @tokenBucket(name: "api") { shapes(first: Int): [Shape] }
        interface Shape @tokenBucket(name: "shape", cost: 1) { area: Float }
        type Square implements Shape { area: Float side: Int }
        type Circle implements Shape { area: Float radius: Float }
      `),
    );
    // A Circle runs __typename and area (shape: 2 each), a Square __typename (1): 3 × 2, however the selections are written.
    const merged = price('{ shapes(first: 3) { ... on Square { __typename } ... on Circle { __typename area } } }');
    expect(merged).toEqual({ api: 3, shape: 6 });
    expect(price('{ shapes(first: 3) { __typename ...F1 } }\nfragment F0 on Circle { area __typename }\nfragment F1 on Shape { ...F0 }')).toEqual(merged);
  });

  it("lets the field's own @cost win over its type's", () => {
    const { costOf: price } = pricer(costSchema(`${SDL.replace('nodes(first: Int): [Node]', 'nodes(first: Int): [Node] @cost(weight: "2")')}`));
    expect(price('{ nodes(first: 50) { id } }')).toEqual({ api: 100 });
  });
});

const typeDefs = `${tokenBucketDirectiveTypeDefs}\n${IBM_COST_DIRECTIVES}\n${SDL}`;
const report = (i: number) => ({ kind: 'Report', id: `r${i}`, title: 't' });
const user = (i: number) => ({ kind: 'User', id: `u${i}`, name: 'n' });
let served: 'reports' | 'users' | 'mixed' = 'reports';
const list = (first: number) =>
  Array.from({ length: first }, (_, i) => (served === 'reports' ? report(i) : served === 'users' ? user(i) : i % 2 === 0 ? report(i) : user(i)));
const resolvers = {
  Query: {
    reports: (_: unknown, { first }: { first: number }) => Array.from({ length: first }, (_v, i) => report(i)),
    nodes: (_: unknown, { first }: { first: number }) => list(first),
    search: (_: unknown, { first }: { first: number }) => list(first),
    node: () => list(1)[0],
  },
  Node: { __resolveType: (value: { kind: string }) => value.kind },
  SearchResult: { __resolveType: (value: { kind: string }) => value.kind },
};

describe.each(TRANSPORTS)('refundUnusedCost on %s: each object weighs its own type', (transport) => {
  let server: LimitedServer;
  let user = 0;
  beforeAll(async () => {
    server = await serveLimited(transport, typeDefs, resolvers, {
      store: new MemoryStore(),
      buckets: [new TokenBucket('api', 10_000_000, Rate.perSecond(1))],
      refundUnusedCost: true,
      reportCost: true,
    });
  });
  afterAll(() => server.stop());

  /** The estimate and the actual cost reported for a fresh identity. */
  const charged = async (query: string, kind: typeof served): Promise<{ cost: unknown; actualCost: unknown }> => {
    served = kind;
    const { status, body } = await server.post({ query }, `user-${transport}-${user++}`);
    expect(status, JSON.stringify(body)).toBe(200);
    const report = (body as ResponseBody).extensions?.['rateLimit'] as Record<string, { cost: number; actualCost: number }>;
    return { cost: report['api']?.cost, actualCost: report['api']?.actualCost };
  };

  it('charges 50 Users as Users where __typename says so, and 50 Reports as Reports', async () => {
    expect(await charged('{ nodes(first: 50) { __typename id } }', 'users')).toEqual({ cost: 50_000, actualCost: 50 });
    expect(await charged('{ nodes(first: 50) { __typename id } }', 'reports')).toEqual({ cost: 50_000, actualCost: 50_000 });
    expect(await charged('{ search(first: 50) { __typename ... on Report { id } ... on User { name } } }', 'mixed')).toEqual({ cost: 50_000, actualCost: 25_025 });
  });

  it('tells a type by the keys only its selections write', async () => {
    // `name` is selected on User only: an object holding it is a User.
    expect(await charged('{ nodes(first: 50) { id ... on User { name } } }', 'users')).toEqual({ cost: 50_000, actualCost: 50 });
    expect(await charged('{ search(first: 50) { ... on Report { title } ... on User { name } } }', 'mixed')).toEqual({ cost: 50_000, actualCost: 25_025 });
  });

  it('charges an object whose type nothing tells as the most expensive type it could be: never less than the work', async () => {
    expect(await charged('{ nodes(first: 50) { id } }', 'users')).toEqual({ cost: 50_000, actualCost: 50_000 });
    expect(await charged('{ nodes(first: 50) { id } }', 'reports')).toEqual({ cost: 50_000, actualCost: 50_000 });
    expect(await charged('{ node(id: "1") { id } }', 'reports')).toEqual({ cost: 1000, actualCost: 1000 });
  });
});
