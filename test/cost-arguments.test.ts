import { Kind, buildSchema, getOperationAST, parse, validate } from 'graphql';
import type { DocumentNode, FieldNode, SelectionSetNode } from 'graphql';
import { describe, expect, it } from 'vitest';
import { CostModel } from '../src/cost/cost-model.js';
import { tokenBucketDirectiveTypeDefs } from '../src/directive.js';

// Size arguments are read three ways (a literal, a variable, the schema
// default): they must agree, for the built-in scalars read directly and for
// anything else coerced by graphql-js.
const schema = buildSchema(`
  ${tokenBucketDirectiveTypeDefs}
  scalar Size

  type Query {
    ints(first: Int): [Item] @tokenBucket(name: "items", cost: 1)
    defaulted(first: Int = 4): [Item] @tokenBucket(name: "items", cost: 1)
    required(first: Int!): [Item] @tokenBucket(name: "items", cost: 1)
    floats(first: Float): [Item] @tokenBucket(name: "items", cost: 1)
    custom(first: Size): [Item] @tokenBucket(name: "items", cost: 1)
  }

  type Item {
    price: Int @tokenBucket(name: "price", cost: 1)
    children(first: Int): [Item] @tokenBucket(name: "items", cost: 1)
  }
`);

const model = new CostModel(schema, { defaultListSize: 20 });

function price(query: string, variables?: Record<string, unknown>, { valid = true } = {}): number | undefined {
  const document = parse(query);
  if (valid) expect(validate(schema, document)).toEqual([]);
  return priceOf(document, variables);
}

function priceOf(document: DocumentNode, variables?: Record<string, unknown>): number | undefined {
  const operation = getOperationAST(document);
  if (operation == null) throw new Error('no operation');
  return model.costOf(document, operation, variables).get('price');
}

describe('size arguments: literals, variables and defaults agree', () => {
  it('reads an Int literal, an Int variable and an Int default alike', () => {
    expect(price('{ ints(first: 3) { price } }')).toBe(3);
    expect(price('query ($n: Int) { ints(first: $n) { price } }', { n: 3 })).toBe(3);
    expect(price('query ($n: Int = 3) { ints(first: $n) { price } }')).toBe(3);
    expect(price('{ defaulted(first: 3) { price } }')).toBe(3);
    expect(price('{ defaulted { price } }')).toBe(4);
    expect(price('query ($n: Int) { defaulted(first: $n) { price } }')).toBe(4);
    expect(price('query ($n: Int) { defaulted(first: $n) { price } }', { n: 3 })).toBe(3);
    expect(price('{ required(first: 3) { price } }')).toBe(3);
    expect(price('query ($n: Int!) { required(first: $n) { price } }', { n: 3 })).toBe(3);
    expect(price('{ ints(first: 0) { price } }')).toBe(0);
    expect(price('{ ints(first: 2147483647) { price } }')).toBe(2147483647);
  });

  it('reads Int and Float literals, and Float variables, for a Float size', () => {
    expect(price('{ floats(first: 3) { price } }')).toBe(3);
    expect(price('{ floats(first: 3.0) { price } }')).toBe(3);
    expect(price('{ floats(first: 3e0) { price } }')).toBe(3);
    expect(price('query ($n: Float) { floats(first: $n) { price } }', { n: 3 })).toBe(3);
    // A fractional size counts rounded up: a resolver asked for 2.5 items may return 3.
    expect(price('{ floats(first: 2.5) { price } }')).toBe(3);
    expect(price('query ($n: Float) { floats(first: $n) { price } }', { n: 2.5 })).toBe(3);
  });

  it('reads a custom scalar size by the number it holds', () => {
    expect(price('{ custom(first: 3) { price } }')).toBe(3);
    expect(price('query ($n: Size) { custom(first: $n) { price } }', { n: 3 })).toBe(3);
    // A numeric string is a number to a resolver that reads it as one.
    expect(price('{ custom(first: "3") { price } }')).toBe(3);
    expect(price('{ custom(first: "many") { price } }')).toBe(20);
  });

  it('treats null, negative and unrepresentable sizes as absent, however they are written', () => {
    expect(price('{ ints(first: null) { price } }')).toBe(20);
    expect(price('query ($n: Int) { ints(first: $n) { price } }', { n: null })).toBe(20);
    expect(price('{ defaulted(first: null) { price } }')).toBe(20);
    expect(price('{ ints(first: -3) { price } }')).toBe(20);
    expect(price('query ($n: Int) { ints(first: $n) { price } }', { n: -3 })).toBe(20);
    // Invalid operations, priced anyway: what graphql-js cannot coerce counts as absent.
    expect(price('{ ints(first: 2147483648) { price } }', undefined, { valid: false })).toBe(20);
    expect(price('{ ints(first: -2147483649) { price } }', undefined, { valid: false })).toBe(20);
    expect(price('{ ints(first: 3.0) { price } }', undefined, { valid: false })).toBe(20);
    expect(price('{ ints(first: "3") { price } }', undefined, { valid: false })).toBe(20);
    expect(price('{ required(first: null) { price } }', undefined, { valid: false })).toBe(20);
    expect(price('{ defaulted(first: 3.5) { price } }', undefined, { valid: false })).toBe(20);
  });
});

describe('documents that share selection set nodes', () => {
  /** `{ items: ints(first: 1) { <ss0> } }` where ssK holds two `children(first: 1)` fields both selecting ss(K + 1). */
  function sharedDocument(levels: number): DocumentNode {
    const document = parse('{ ints(first: 1) { price } }');
    const selectionSet = parse('{ price }').definitions[0] as unknown as { selectionSet: SelectionSetNode };
    let inner: SelectionSetNode = selectionSet.selectionSet;
    for (let level = 0; level < levels; level++) {
      const [a, b] = (parse('{ a: children(first: 1) { price } b: children(first: 1) { price } }').definitions[0] as unknown as {
        selectionSet: SelectionSetNode;
      }).selectionSet.selections as FieldNode[];
      const outer: SelectionSetNode = { kind: Kind.SELECTION_SET, selections: [{ ...a!, selectionSet: inner }, { ...b!, selectionSet: inner }] };
      inner = outer;
    }
    const root = (document.definitions[0] as unknown as { selectionSet: SelectionSetNode }).selectionSet.selections[0] as FieldNode;
    (root as { selectionSet?: SelectionSetNode }).selectionSet = inner;
    return document;
  }

  it('prices a shared node once per place, as if the document were a tree', () => {
    expect(priceOf(sharedDocument(1))).toBe(2);
    expect(priceOf(sharedDocument(3))).toBe(8);
  });

  it('stays linear in the number of distinct nodes', () => {
    const document = sharedDocument(40);
    const start = performance.now();
    expect(priceOf(document)).toBe(2 ** 40);
    expect(performance.now() - start).toBeLessThan(100);
  });
});
