// SPEC §2, "List sizes" and lists of lists: one test per rule, the arithmetic next to each number.
import { makeExecutableSchema } from '@graphql-tools/schema';
import { GraphQLScalarType, Kind } from 'graphql';
import { describe, expect, it } from 'vitest';
import { tokenBucketDirectiveTypeDefs } from '../src/directive.js';
import { IBM_COST_DIRECTIVES, pricer } from './support/graphql.js';

/** A BigInt scalar as a real server would write one: variables and literals become `bigint`s. */
const BigIntScalar = new GraphQLScalarType({
  name: 'BigInt',
  parseValue: (value) => BigInt(value as string),
  parseLiteral: (ast) => (ast.kind === Kind.INT || ast.kind === Kind.STRING ? BigInt(ast.value) : undefined),
  serialize: (value) => String(value),
});

const schema = makeExecutableSchema({
  typeDefs: `${tokenBucketDirectiveTypeDefs}
    ${IBM_COST_DIRECTIVES}
    scalar BigInt
    scalar Size
    input Page { first: Int }
    input Search { page: Page text: String }
    type Query @tokenBucket(name: "api") {
      items(first: Int, last: Int): [Item]
      limited(limit: Int, first: Int): [Item] @listSize(slicingArguments: ["limit"])
      bounded(limit: Int, page: Int = 5): [Item] @listSize(slicingArguments: ["limit", "page"])
      recent(first: Int): [Item] @listSize(assumedSize: 2)
      all: [Item] @listSize(assumedSize: 50)
      byFloat(first: Float): [Item]
      byBig(first: BigInt): [Item]
      byString(first: String): [Item]
      bySize(first: Size): [Item]
      byIds(ids: [ID!]): [Item] @listSize(slicingArguments: ["ids"])
      search(input: Search): [Item] @listSize(slicingArguments: ["input.page.first"])
      matrix(first: Int): [[Cell]]
      sizedMatrix(first: Int): [[Cell]] @listSize(assumedSize: 3)
      cube: [[[Cell]]]
      conn(first: Int, after: String): Conn @listSize(slicingArguments: ["first"], sizedFields: ["edges", "nodes"])
      assumedConn: Conn @listSize(assumedSize: 3, sizedFields: ["edges"])
      plainConn: Conn @listSize(sizedFields: ["edges"])
      deep(first: Int = 10): Deep @listSize(slicingArguments: ["first"], sizedFields: ["page", "results { page }"])
      pages(first: Int): [Conn] @listSize(slicingArguments: ["first"], sizedFields: ["edges"])
      paged(first: Int): Paged @listSize(slicingArguments: ["first"], sizedFields: ["edges"])
    }
    type Item { id: ID child: Item }
    type Cell { value: Int child: Cell }
    type Conn { edges(first: Int): [Edge] nodes: [Item] total: Int }
    type Edge { node: Item cursor: String }
    type Deep { page: [Item] results: Result total: Int }
    type Result { page: [Item] meta: String }
    interface Paged { edges: [Edge] }
    type Big implements Paged { edges: [Edge] extra: Item }
    type Wide implements Paged { edges: [Edge] }
  `,
  resolvers: { BigInt: BigIntScalar },
});

const { costOf } = pricer(schema);

describe('a list field’s size', () => {
  it('is its first or last argument, the larger of the two', () => {
    expect(costOf('{ items(first: 5) { id } }')).toEqual({ api: 5 }); // 5 × (1 + 0)
    expect(costOf('{ items(first: 2, last: 7) { id } }')).toEqual({ api: 7 });
  });

  it('is its declared slicing argument instead of first/last, the largest one, schema defaults included', () => {
    expect(costOf('{ limited(limit: 2, first: 100) { id } }')).toEqual({ api: 2 });
    expect(costOf('{ bounded(limit: 2) { id } }')).toEqual({ api: 5 }); // max(2, page's default 5)
    expect(costOf('{ bounded(limit: 8) { id } }')).toEqual({ api: 8 });
  });

  it('is @listSize(assumedSize:) when no slicing argument is given, else defaultListSize', () => {
    expect(costOf('{ recent { id } }')).toEqual({ api: 2 });
    expect(costOf('{ all { id } }')).toEqual({ api: 50 });
    expect(costOf('{ limited(first: 100) { id } }')).toEqual({ api: 10 }); // first is not its slicing argument
    expect(costOf('{ items { id } }')).toEqual({ api: 10 });
    expect(pricer(schema, { defaultListSize: 3 }).costOf('{ items { id } }')).toEqual({ api: 3 });
  });

  it('counts a null, negative or non-numeric size as the assumed size', () => {
    expect(costOf('{ recent(first: -1) { id } }')).toEqual({ api: 2 });
    expect(costOf('{ recent(first: null) { id } }')).toEqual({ api: 2 });
    expect(costOf('query ($n: Int) { items(first: $n) { id } }', { n: -5 })).toEqual({ api: 10 });
    expect(costOf('query ($n: Int) { items(first: $n) { id } }', { n: null })).toEqual({ api: 10 });
    expect(costOf('{ byString(first: "many") { id } }')).toEqual({ api: 10 });
    // An unusable slicing value never hides a larger usable one.
    expect(costOf('{ items(first: -1, last: 30) { id } }')).toEqual({ api: 30 });
    // ...nor lowers what the assumed size would be.
    expect(costOf('{ items(first: -1, last: 3) { id } }')).toEqual({ api: 10 });
  });

  it('rounds a fractional size up', () => {
    expect(costOf('{ byFloat(first: 2.5) { id } }')).toEqual({ api: 3 });
    expect(costOf('{ byFloat(first: 50000.5) { id } }')).toEqual({ api: 50001 });
    expect(costOf('query ($n: Float) { byFloat(first: $n) { id } }', { n: 0.1 })).toEqual({ api: 1 });
  });

  it('counts a BigInt, a numeric string or a custom scalar holding a number by its value', () => {
    expect(costOf('{ byBig(first: 50000) { id } }')).toEqual({ api: 50000 });
    expect(costOf('{ byBig(first: "50000") { id } }')).toEqual({ api: 50000 });
    expect(costOf('query ($n: BigInt) { byBig(first: $n) { id } }', { n: '70000' })).toEqual({ api: 70000 });
    expect(costOf('{ byString(first: "50000") { id } }')).toEqual({ api: 50000 });
    expect(costOf('{ bySize(first: 50000) { id } }')).toEqual({ api: 50000 });
    expect(costOf('query ($n: Size) { bySize(first: $n) { id } }', { n: '7' })).toEqual({ api: 7 });
  });

  it('reads a custom scalar the largest way a resolver may read it', () => {
    // `Size` passes values through: a resolver doing Number(first), parseInt(first) or slice(0, first) reads 50000 in each.
    expect(costOf('{ bySize(first: [50000]) { id } }')).toEqual({ api: 50000 }); // Number([50000]) = 50000 items × 1
    expect(costOf('{ bySize(first: [[50000]]) { id } }')).toEqual({ api: 50000 }); // Number([[50000]]) = 50000
    expect(costOf('{ bySize(first: ["5e4"]) { id } }')).toEqual({ api: 50000 }); // Number(["5e4"]) = 50000
    expect(costOf('{ bySize(first: [50000, 1]) { id } }')).toEqual({ api: 50000 }); // parseInt("50000,1") = 50000
    expect(costOf('{ bySize(first: ["a", "b", "c"]) { id } }')).toEqual({ api: 3 }); // no number in it: its length, 3
    expect(costOf('{ bySize(first: " 50000 ") { id } }')).toEqual({ api: 50000 }); // Number trims whitespace
    expect(costOf('{ bySize(first: "0x10") { id } }')).toEqual({ api: 16 }); // Number("0x10") = 16
    expect(costOf('{ bySize(first: "0b101") { id } }')).toEqual({ api: 5 });
    expect(costOf('{ bySize(first: "0o17") { id } }')).toEqual({ api: 15 });
    expect(costOf('{ bySize(first: "3e3 rows") { id } }')).toEqual({ api: 3000 }); // parseFloat reads the leading 3e3
    expect(costOf('{ bySize(first: "123n") { id } }')).toEqual({ api: 123 }); // a BigInt written out: parseInt reads 123
    expect(costOf('{ bySize(first: 2.5) { id } }')).toEqual({ api: 3 }); // rounded up
    expect(costOf('{ bySize(first: "-0") { id } }')).toEqual({ api: 0 }); // Number("-0") is -0: no items, never a negative cost
    expect(costOf('{ bySize(first: -5) { id } }')).toEqual({ api: 10 }); // negative: the assumed size
    expect(costOf('{ bySize(first: true) { id } }')).toEqual({ api: 10 }); // not a number: the assumed size
    expect(costOf('{ bySize(first: { n: 50000 }) { id } }')).toEqual({ api: 10 }); // Number({…}) is NaN: the assumed size
  });

  it("reads a custom scalar's object as Number() and parseInt read it", () => {
    const query = 'query ($n: Size) { bySize(first: $n) { id } }';
    // Values a custom scalar's parseValue could return: they reach the pricer as objects.
    expect(costOf(query, { n: { [Symbol.toPrimitive]: () => 40 } })).toEqual({ api: 40 });
    expect(costOf(query, { n: { toString: () => '30' } })).toEqual({ api: 30 }); // Number() falls back to toString
    expect(costOf(query, { n: { valueOf: () => 20n } })).toEqual({ api: 20 });
    expect(costOf(query, { n: Object.create(null) as object })).toEqual({ api: 10 }); // converts to nothing: the assumed size
  });

  it('reads a custom scalar variable of every JSON kind the same way', () => {
    const query = 'query ($n: Size) { bySize(first: $n) { id } }';
    expect(costOf(query, { n: [50000] })).toEqual({ api: 50000 });
    expect(costOf(query, { n: [[50000]] })).toEqual({ api: 50000 });
    expect(costOf(query, { n: ['5e4'] })).toEqual({ api: 50000 });
    expect(costOf(query, { n: [[' 7 '], 1] })).toEqual({ api: 7 }); // the first element of the first element: 7 > length 2
    expect(costOf(query, { n: '\t50000\n' })).toEqual({ api: 50000 });
    expect(costOf(query, { n: '1e400' }).api).toBe(Number.MAX_VALUE); // Infinity saturates: more than any bucket holds
    expect(costOf(query, { n: -0 })).toEqual({ api: 0 });
    expect(costOf(query, { n: [] })).toEqual({ api: 0 }); // Number([]) = 0 and length 0
    expect(costOf(query, { n: null })).toEqual({ api: 10 });
    expect(costOf(query, { n: false })).toEqual({ api: 10 });
    expect(costOf(query, { n: {} })).toEqual({ api: 10 });
  });

  it('never prices a custom scalar size below what a resolver reads from it', () => {
    const readings = (v: unknown): number[] => {
      const text = String(v as string);
      const candidates = [Number(v), parseInt(text, 10), parseFloat(text), Array.isArray(v) ? v.length : 0, Array.from({ length: Number(v) || 0 }).length];
      return candidates.filter((n) => Number.isFinite(n) && n >= 0);
    };
    const values: unknown[] = [
      50000, '50000', ' 50000', '50000 ', '5e4', '0x1F', '0b11', '0o7', '1_000', '12.5', '+12', '.5', '7abc', '123n',
      [50000], [[50000]], ['5e4'], [' 9 '], [3, 4], [['12'], 2], [[[40]]], [], [''], [null], [true], 2.0000001, 0, -0,
    ];
    for (const v of values) {
      const cost = costOf('query ($n: Size) { bySize(first: $n) { id } }', { n: v }).api ?? 0;
      for (const reading of readings(v)) expect(cost, JSON.stringify(v)).toBeGreaterThanOrEqual(Math.ceil(reading));
    }
  });

  it('counts a list given as a slicing argument by its elements', () => {
    expect(costOf('{ byIds(ids: ["a", "b", "c"]) { id } }')).toEqual({ api: 3 });
    expect(costOf('{ byIds(ids: []) { id } }')).toEqual({ api: 0 });
    // A list of IDs is its elements, whatever they read as.
    expect(costOf('{ byIds(ids: ["5000"]) { id } }')).toEqual({ api: 1 });
    expect(costOf('query ($ids: [ID!]) { byIds(ids: $ids) { id } }', { ids: '5000' })).toEqual({ api: 1 }); // coerced to a list of one
    expect(costOf('query ($ids: [ID!]) { byIds(ids: $ids) { id } }', { ids: ['a', 'b', 'c', 'd', 'e'] })).toEqual({ api: 5 });
    expect(costOf('query ($ids: [ID!]) { byIds(ids: $ids) { id } }', { ids: null })).toEqual({ api: 10 });
  });

  it('reads a slicing argument inside an input object ("input.page.first")', () => {
    // 4 × 1, plus the arguments: Search 1 + Page 1
    expect(costOf('{ search(input: { page: { first: 4 } }) { id } }')).toEqual({ api: 6 });
    expect(costOf('query ($s: Search) { search(input: $s) { id } }', { s: { page: { first: 7 } } })).toEqual({ api: 9 });
    // No size at the path: the default 10, plus Search 1
    expect(costOf('{ search(input: { text: "x" }) { id } }')).toEqual({ api: 11 });
  });

  it('saturates past MAX_SAFE_INTEGER, never Infinity or NaN', () => {
    const cost = costOf('{ byFloat(first: 1e400) { id } }').api ?? 0;
    expect(cost).toBeGreaterThan(Number.MAX_SAFE_INTEGER);
    expect(Number.isFinite(cost)).toBe(true);
  });
});

describe('a list of lists', () => {
  it('multiplies by every level: the outer by its size, each inner one by its assumed size, else defaultListSize', () => {
    expect(costOf('{ matrix(first: 5) { value } }')).toEqual({ api: 50 }); // 5 × 10 × (1 + 0)
    expect(costOf('{ matrix { child { value } } }')).toEqual({ api: 200 }); // 10 × 10 × (1 + child 1)
    expect(costOf('{ sizedMatrix(first: 5) { value } }')).toEqual({ api: 15 }); // 5 × 3
    expect(costOf('{ cube { value } }')).toEqual({ api: 1000 }); // 10 × 10 × 10
  });
});

describe('@listSize(sizedFields:)', () => {
  it("gives the connection's size to its sized fields, not to the connection", () => {
    // conn 1 × (1 + total 0 + edges 4 × (1 + node 1) + nodes 4 × (1 + 0)) = 13
    expect(costOf('{ conn(first: 4) { total edges { node { id } } nodes { id } } }')).toEqual({ api: 13 });
    expect(costOf('{ conn(first: 4) { total } }')).toEqual({ api: 1 });
  });

  it('finds sized fields through fragments', () => {
    // 1 + E once (spread twice, collected once): 2 × (1 + 0)
    expect(costOf('{ conn(first: 2) { ...E ...E } } fragment E on Conn { edges { cursor } }')).toEqual({ api: 3 });
    expect(costOf('{ conn(first: 2) { ... on Conn { edges { cursor } } } }')).toEqual({ api: 3 });
  });

  it('sizes sized fields merged under one response key once, as they run once', () => {
    // conn 1 × (1 + edges 4 × (1 + node 1)) = 9, as `{ conn(first: 4) { edges { cursor node { id } } } }`
    expect(costOf('{ conn(first: 4) { edges { cursor } ...E } } fragment E on Conn { edges { node { id } } }')).toEqual({ api: 9 });
    expect(costOf('{ conn(first: 4) { edges { cursor node { id } } } }')).toEqual({ api: 9 });
    // Under many connections of distinct sizes: a (size 2) 1 + 2 × 2, b (size 3) 1 + 3 × 2
    const query = '{ a: conn(first: 2) { ...E edges { cursor } } b: conn(first: 3) { edges { cursor } ...E } } fragment E on Conn { edges { node { id } } }';
    expect(costOf(query)).toEqual({ api: 12 });
  });

  it("takes the sized field's own slicing argument when the query gives a larger one", () => {
    expect(costOf('{ conn(first: 1) { edges(first: 1000) { cursor } } }')).toEqual({ api: 1001 }); // 1 + 1000 × 1
    expect(costOf('{ conn(first: 5) { edges(first: 2) { cursor } } }')).toEqual({ api: 6 }); // 1 + 5 × 1
  });

  it("never counts the sized field's own assumed or default size", () => {
    expect(costOf('{ conn(first: 1) { edges { cursor } } }')).toEqual({ api: 2 }); // 1 + 1, not 1 + 10
  });

  it("sizes the fields by the connection's assumed size, else defaultListSize", () => {
    expect(costOf('{ assumedConn { edges { cursor } } }')).toEqual({ api: 4 }); // 1 + 3
    expect(costOf('{ plainConn { edges { cursor } } }')).toEqual({ api: 11 }); // 1 + 10
    expect(costOf('{ conn { edges { cursor } } }')).toEqual({ api: 11 });
  });

  it('follows paths into nested selections ("results { page }")', () => {
    expect(costOf('{ deep(first: 7) { results { page { id } } } }')).toEqual({ api: 9 }); // 1 + results 1 × (1 + 7)
    expect(costOf('{ deep { results { page { id } } } }')).toEqual({ api: 12 }); // first's default 10: 1 + 1 + 10
    expect(costOf('{ deep(first: 5) { page { id } results { page { id } } } }')).toEqual({ api: 12 }); // 1 + 5 + (1 + 5)
    expect(costOf('{ deep(first: 100) { total results { meta } } }')).toEqual({ api: 2 }); // 1 + results 1
  });

  it('multiplies a connection that is itself a list by its size too', () => {
    expect(costOf('{ pages(first: 3) { edges { cursor } } }')).toEqual({ api: 12 }); // 3 × (1 + 3 × 1)
  });

  it('prices one fragment at every size it meets', () => {
    // a: 1 + 1; b: 1 + 3
    expect(costOf('{ a: conn(first: 1) { ...E } b: conn(first: 3) { ...E } } fragment E on Conn { edges { cursor } }')).toEqual({
      api: 6,
    });
    // F = x: edges(first: 2), y: edges. a (size 1): 1 + max(1, 2) + 1 = 4; b (size 5): 1 + 5 + 5 = 11
    const query = '{ a: conn(first: 1) { ...F } b: conn(first: 5) { ...F } } fragment F on Conn { x: edges(first: 2) { cursor } y: edges { cursor } }';
    expect(costOf(query)).toEqual({ api: 15 });
  });

  it('takes the most expensive possible type of an abstract connection at its size', () => {
    // Big: 1 + edges 4 + extra 1 = 6; Wide: 1 + 4 = 5
    expect(costOf('{ paged(first: 4) { edges { cursor } ... on Big { extra { id } } } }')).toEqual({ api: 6 });
    // Big: 1 + extra (1 + child 1 + child 1) = 4; Wide: 1 + edges 2 = 3
    const query = '{ paged(first: 2) { ... on Big { extra { child { child { id } } } } ... on Wide { edges { cursor } } } }';
    expect(costOf(query)).toEqual({ api: 4 });
  });
});
