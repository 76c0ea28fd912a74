import { buildSchema, getOperationAST, parse, validate } from 'graphql';
import { describe, expect, it } from 'vitest';
import { CostModel } from '../src/cost/cost-model.js';
import type { CostModelOptions } from '../src/cost/cost-model.js';
import { tokenBucketDirectiveTypeDefs } from '../src/directive.js';

const schema = buildSchema(`
  ${tokenBucketDirectiveTypeDefs}

  type Query {
    search(query: String, first: Int, last: Int): [Result] @tokenBucket(name: "search", cost: 5)
    items(first: Int): [Item] @tokenBucket(name: "items", cost: 1)
    paged(first: Int = 4): [Item] @tokenBucket(name: "items", cost: 1)
    approx(first: Float): [Item]
    me: User
    free: Int @tokenBucket(name: "free", cost: 0)
  }

  type Item {
    id: ID!
    price: Int @tokenBucket(name: "price", cost: 2)
    children(first: Int, last: Int): [Item] @tokenBucket(name: "items", cost: 1)
  }

  type User { name: String }
  type Result { title: String }
`);

function costOf(query: string, variables?: Record<string, unknown>, options?: CostModelOptions): Record<string, number> {
  const document = parse(query);
  expect(validate(schema, document)).toEqual([]);
  const operation = getOperationAST(document);
  if (operation == null) throw new Error('no operation');
  return Object.fromEntries(new CostModel(schema, options).costOf(document, operation, variables));
}

describe('fixed cost', () => {
  it('charges the fixed cost of an annotated field, whatever its list size', () => {
    expect(costOf('{ search(query: "a") { title } }')).toEqual({ search: 5 });
    expect(costOf('{ search(query: "a", first: 100) { title } }')).toEqual({ search: 5 });
  });

  it('returns no bucket for an operation without annotated fields', () => {
    expect(costOf('{ me { name } }')).toEqual({});
  });

  it('reports a touched bucket even when it costs 0', () => {
    expect(costOf('{ free }')).toEqual({ free: 0 });
    expect(costOf('{ items(first: 0) { price } }')).toEqual({ items: 1, price: 0 });
  });

  it('counts aliases separately', () => {
    expect(costOf('{ a: search { title } b: search { title } c: search { title } }')).toEqual({ search: 15 });
  });

  it('counts fields merged under one response key once, as they run once', () => {
    expect(costOf('{ search { title } search { title } }')).toEqual({ search: 5 });
    // Aliases that do not merge stay separate: 5 + 5.
    expect(costOf('{ a: search { title } b: search { title } }')).toEqual({ search: 10 });
  });

  it('counts a fragment spread twice once, as graphql-js collects it once', () => {
    expect(costOf('{ ...S ...S } fragment S on Query { search { title } }')).toEqual({ search: 5 });
    expect(costOf('{ ... on Query { search { title } } ... { search { title } } }')).toEqual({ search: 5 });
  });

  it('counts a fragment inside a list once per item', () => {
    // items 1; price 2 per item × 3 items (P twice is P once)
    expect(costOf('{ items(first: 3) { ...P ...P } } fragment P on Item { price }')).toEqual({ items: 1, price: 6 });
  });
});

describe('@skip and @include', () => {
  it('honours literal conditions on fields, inline fragments and spreads', () => {
    const query = `{
      a: search @skip(if: true) { title }
      b: search @include(if: false) { title }
      c: search @skip(if: false) { title }
      d: search @include(if: true) { title }
      e: search @skip(if: false) @include(if: false) { title }
      ... @skip(if: true) { f: search { title } }
      ...S @include(if: false)
    }
    fragment S on Query { g: search { title } }`;
    expect(costOf(query)).toEqual({ search: 10 });
  });

  it('honours variables and their defaults', () => {
    const query = `query ($skip: Boolean = true, $include: Boolean!) {
      a: search @skip(if: $skip) { title }
      b: search @include(if: $include) { title }
    }`;
    expect(costOf(query, { include: false })).toEqual({});
    expect(costOf(query, { include: true })).toEqual({ search: 5 });
    expect(costOf(query, { skip: false, include: true })).toEqual({ search: 10 });
  });

  it('counts a field whose condition cannot be determined', () => {
    // Invalid variables fail execution, but the operation is still charged as if every field ran.
    const query = 'query ($skip: Boolean!) { search @skip(if: $skip) { title } }';
    expect(costOf(query, { skip: 'perhaps' })).toEqual({ search: 5 });
    expect(costOf(query, {})).toEqual({ search: 5 });
  });
});

describe('list sizes', () => {
  it('multiplies by the sizes of the enclosing lists, from literals', () => {
    // items: Query.items + 3 children; price: 3 prices + 3 × 4 prices, 2 each.
    expect(costOf('{ items(first: 3) { price children(first: 4) { price } } }')).toEqual({ items: 4, price: 30 });
  });

  it('multiplies by sizes given in variables, or their defaults', () => {
    const query = 'query ($a: Int, $b: Int = 4) { items(first: $a) { price children(first: $b) { price } } }';
    expect(costOf(query, { a: 3 })).toEqual({ items: 4, price: 30 });
    expect(costOf(query, { a: 3, b: 1 })).toEqual({ items: 4, price: 12 });
  });

  it('takes the largest of several slicing arguments', () => {
    expect(costOf('{ items(first: 1) { children(first: 2, last: 5) { price } } }')).toEqual({ items: 2, price: 10 });
  });

  it("uses the slicing argument's schema default when the argument is absent", () => {
    expect(costOf('{ paged { price } }')).toEqual({ items: 1, price: 8 });
    expect(costOf('query ($n: Int) { paged(first: $n) { price } }', {})).toEqual({ items: 1, price: 8 });
    expect(costOf('query ($n: Int) { paged(first: $n) { price } }', { n: 1 })).toEqual({ items: 1, price: 2 });
  });

  it('assumes defaultListSize when nothing states a size', () => {
    expect(costOf('{ items { price } }')).toEqual({ items: 1, price: 20 });
    expect(costOf('{ items { price } }', undefined, { defaultListSize: 2 })).toEqual({ items: 1, price: 4 });
    expect(costOf('query ($n: Int) { items(first: $n) { price } }', {})).toEqual({ items: 1, price: 20 });
  });

  it('treats a negative or null size as the assumed one and rounds a fractional size up, never lowering the cost', () => {
    expect(costOf('{ items(first: -5) { price } }')).toEqual({ items: 1, price: 20 });
    expect(costOf('{ items(first: null) { price } }')).toEqual({ items: 1, price: 20 });
    expect(costOf('query ($n: Int) { items(first: $n) { price } }', { n: -1 })).toEqual({ items: 1, price: 20 });
    expect(costOf('query ($n: Int) { items(first: $n) { price } }', { n: null })).toEqual({ items: 1, price: 20 });
    expect(costOf('query ($n: Int = 3) { items(first: $n) { price } }', { n: null })).toEqual({ items: 1, price: 20 });
    expect(costOf('{ paged(first: null) { price } }')).toEqual({ items: 1, price: 20 });
    // 2.5 counts as 3 items, 2 tokens each
    expect(costOf('{ approx(first: 2.5) { price } }')).toEqual({ price: 6 });
    expect(costOf('{ approx(first: 2.0) { price } }')).toEqual({ price: 4 });
  });

  it('falls back to argument defaults when the variables do not coerce', () => {
    expect(costOf('query ($n: Int) { items(first: $n) { price } }', { n: 'many' })).toEqual({ items: 1, price: 20 });
    expect(costOf('query ($n: Int) { paged(first: $n) { price } }', { n: 'many' })).toEqual({ items: 1, price: 8 });
  });

  it('overflows huge sizes to more than MAX_SAFE_INTEGER, never to Infinity, NaN or a negative', () => {
    const max = 2147483647;
    const query = `{ items(first: ${max}) { children(first: ${max}) { children(first: ${max}) { price } } } }`;
    const cost = costOf(query);
    expect(cost.price).toBeGreaterThan(Number.MAX_SAFE_INTEGER);
    expect(Number.isFinite(cost.price)).toBe(true);
    expect(cost.items).toBeGreaterThan(Number.MAX_SAFE_INTEGER);
    expect(Number.isFinite(cost.items)).toBe(true);
  });

  it('saturates at Number.MAX_VALUE', () => {
    let query = 'price';
    for (let i = 0; i < 40; i++) query = `children(first: 2147483647) { ${query} }`;
    const cost = costOf(`{ items(first: 2147483647) { ${query} } }`);
    expect(cost).toEqual({ items: Number.MAX_VALUE, price: Number.MAX_VALUE });
  });
});
