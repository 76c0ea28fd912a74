import { buildSchema, getOperationAST, parse, validate } from 'graphql';
import { describe, expect, it } from 'vitest';
import { CostModel } from '../src/cost/cost-model.js';
import { tokenBucketDirectiveTypeDefs } from '../src/directive.js';

const schema = buildSchema(`
  ${tokenBucketDirectiveTypeDefs}

  type Query @tokenBucket(name: "api") {
    search: [Result] @tokenBucket(name: "search", cost: 5)
    items(first: Int): [Item] @tokenBucket(name: "items", cost: 1)
    node: Node
  }
  type Result { title: String }
  type Item {
    id: ID!
    items(first: Int): [Item] @tokenBucket(name: "items", cost: 1)
  }
  interface Node { id: ID! node: Node }
  type A implements Node { id: ID! node: Node }
  type B implements Node { id: ID! node: Node }
  type C implements Node { id: ID! node: Node }
  type D implements Node { id: ID! node: Node }
  type E implements Node { id: ID! node: Node @tokenBucket(name: "deep", cost: 1) }
`);

const model = new CostModel(schema);

function analyze(query: string, { valid = true } = {}): { cost: Record<string, number>; ms: number } {
  const document = parse(query);
  if (valid) expect(validate(schema, document)).toEqual([]);
  const operation = getOperationAST(document);
  if (operation == null) throw new Error('no operation');
  const start = performance.now();
  const cost = Object.fromEntries(model.costOf(document, operation));
  return { cost, ms: performance.now() - start };
}

/** Fragment i spreads fragment i + 1 twice, `levels` deep. */
function fragmentBomb(levels: number, on: string, wrap: (spreads: string) => string, leaf: string): string {
  const fragments = [];
  for (let i = 0; i < levels - 1; i++) fragments.push(`fragment F${i} on ${on} { ${wrap(`...F${i + 1} ...F${i + 1}`)} }`);
  fragments.push(`fragment F${levels - 1} on ${on} { ${leaf} }`);
  return fragments.join('\n');
}

describe('operations built to be expensive to analyze', () => {
  it('counts a 30-level fragment bomb exactly, quickly', () => {
    const query = `{ ...F0 }\n${fragmentBomb(30, 'Query', (s) => s, 'search { title }')}`;
    const { cost, ms } = analyze(query);
    expect(cost.search).toBe(5 * 2 ** 29);
    expect(ms).toBeLessThan(100);
  });

  it('saturates a fragment bomb over lists to more than MAX_SAFE_INTEGER, staying finite', () => {
    const bomb = fragmentBomb(30, 'Item', (s) => `items(first: 2147483647) { ${s} }`, 'id');
    const { cost, ms } = analyze(`{ items(first: 2147483647) { ...F0 } }\n${bomb}`);
    expect(cost.items).toBeGreaterThan(Number.MAX_SAFE_INTEGER);
    expect(cost.api).toBeGreaterThan(Number.MAX_SAFE_INTEGER);
    for (const value of Object.values(cost)) {
      expect(Number.isFinite(value) && value >= 0).toBe(true);
    }
    expect(ms).toBeLessThan(100);
  });

  it('stays linear through deeply nested abstract types', () => {
    // Without memoization this is 5^40 evaluations.
    let selection = 'id';
    for (let i = 0; i < 40; i++) selection = `node { ... on A { id } ... on E { id } ${selection} }`;
    const { cost, ms } = analyze(`{ ${selection} }`);
    expect(cost.deep).toBe(39);
    expect(cost.api).toBe(40);
    expect(ms).toBeLessThan(100);
  });

  it('does not follow a fragment cycle (an invalid operation)', () => {
    const query = '{ ...A } fragment A on Query { search { title } ...B } fragment B on Query { ...A search { title } }';
    const { cost } = analyze(query, { valid: false });
    expect(cost.search).toBeGreaterThanOrEqual(10);
  });

  it('ignores fields the schema does not have (an invalid operation)', () => {
    // api: search, a list of the default size 10, × (Result 1 + title 0) = 10
    expect(analyze('{ nope search { title } }', { valid: false }).cost).toEqual({ api: 10, search: 5 });
  });

  it('analyzes a 1,000-field operation in well under a millisecond on average', () => {
    const fields: string[] = [];
    for (let i = 0; i < 250; i++) fields.push(`a${i}: items(first: 5) { id b${i}: items { id } }`);
    const document = parse(`{ ${fields.join(' ')} }`);
    const operation = getOperationAST(document);
    if (operation == null) throw new Error('no operation');
    for (let i = 0; i < 50; i++) model.costOf(document, operation);
    const runs = 200;
    const start = performance.now();
    for (let i = 0; i < runs; i++) model.costOf(document, operation);
    // Generous: the benchmark holds the real line; this catches an accidental blow-up.
    expect((performance.now() - start) / runs).toBeLessThan(5);
  });
});
