import { Kind, buildSchema, getOperationAST, getVariableValues, parse, validate } from 'graphql';
import type { DocumentNode, FieldNode, OperationDefinitionNode } from 'graphql';
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
    child: Item
  }
  input Nested { inner: Nested n: Int }
  extend type Query { nested(value: Nested): Int }
  interface Node { id: ID! node: Node }
  type A implements Node { id: ID! node: Node }
  type B implements Node { id: ID! node: Node }
  type C implements Node { id: ID! node: Node }
  type D implements Node { id: ID! node: Node }
  type E implements Node { id: ID! node: Node @tokenBucket(name: "deep", cost: 1) }
`);

const model = new CostModel(schema);

/**
 * Prices `query`. A walk that did more than linear work would run past the
 * pricing work budget and throw COST_ANALYSIS_ABORTED: an answer at all
 * says the work stayed bounded, however loaded the machine is.
 */
function analyze(query: string, { valid = true } = {}): { cost: Record<string, number> } {
  const document = parse(query);
  if (valid) expect(validate(schema, document)).toEqual([]);
  const operation = getOperationAST(document);
  if (operation == null) throw new Error('no operation');
  return { cost: Object.fromEntries(model.costOf(document, operation)) };
}

/** Fragment i spreads fragment i + 1 twice, `levels` deep. */
function fragmentBomb(levels: number, on: string, wrap: (spreads: string) => string, leaf: string): string {
  const fragments = [];
  for (let i = 0; i < levels - 1; i++) fragments.push(`fragment F${i} on ${on} { ${wrap(`...F${i + 1} ...F${i + 1}`)} }`);
  fragments.push(`fragment F${levels - 1} on ${on} { ${leaf} }`);
  return fragments.join('\n');
}

describe('operations built to be expensive to analyze', () => {
  it('counts a 30-level fragment bomb exactly, within the work budget', () => {
    const query = `{ ...F0 }\n${fragmentBomb(30, 'Query', (s) => s, 'search { title }')}`;
    const { cost } = analyze(query);
    // 2^29 spreads of F29, all merging into the one `search` they select: it runs once, 5.
    expect(cost.search).toBe(5);
  });

  it('saturates a fragment bomb over lists to more than MAX_SAFE_INTEGER, staying finite', () => {
    const bomb = fragmentBomb(30, 'Item', (s) => `items(first: 2147483647) { ${s} }`, 'id');
    const { cost } = analyze(`{ items(first: 2147483647) { ...F0 } }\n${bomb}`);
    expect(cost.items).toBeGreaterThan(Number.MAX_SAFE_INTEGER);
    expect(cost.api).toBeGreaterThan(Number.MAX_SAFE_INTEGER);
    for (const value of Object.values(cost)) {
      expect(Number.isFinite(value) && value >= 0).toBe(true);
    }
  });

  it('stays linear through deeply nested abstract types', () => {
    // Without memoization this is 5^40 evaluations.
    let selection = 'id';
    for (let i = 0; i < 40; i++) selection = `node { ... on A { id } ... on E { id } ${selection} }`;
    const { cost } = analyze(`{ ${selection} }`);
    expect(cost.deep).toBe(39);
    expect(cost.api).toBe(40);
  });

  it('does not follow a fragment cycle (an invalid operation)', () => {
    const query = '{ ...A } fragment A on Query { search { title } ...B } fragment B on Query { ...A search { title } }';
    const { cost } = analyze(query, { valid: false });
    // Both fragments' `search` share one response key: 5, once.
    expect(cost.search).toBe(5);
  });

  it('ignores fields the schema does not have (an invalid operation)', () => {
    // api: search, a list of the default size 10, × (Result 1 + title 0) = 10
    expect(analyze('{ nope search { title } }', { valid: false }).cost).toEqual({ api: 10, search: 5 });
  });

  it('analyzes a 1,000-field operation within the work budget, the same every time', () => {
    const fields: string[] = [];
    for (let i = 0; i < 250; i++) fields.push(`a${i}: items(first: 5) { id b${i}: items { id } }`);
    const document = parse(`{ ${fields.join(' ')} }`);
    const operation = getOperationAST(document);
    if (operation == null) throw new Error('no operation');
    // Its time is the benchmark's (npm run bench -- --only cost): a blow-up here would run past the budget and throw.
    const first = Object.fromEntries(model.costOf(document, operation));
    for (let i = 0; i < 50; i++) expect(Object.fromEntries(model.costOf(document, operation))).toEqual(first);
    // api: 250 × (items 5 × (Item 1 + b: items 10 × 1)); items: 250 × (1 + 5 × 1)
    expect(first).toEqual({ api: 250 * 5 * (1 + 10), items: 250 * (1 + 5) });
  });
});

/**
 * How much longer than graphql-js `validate` pricing may take here. The
 * shapes below were quadratic once (11 to 240 times validate, and growing
 * with the document); linear pricing takes 0.1 to 1.2 times validate, and
 * `npm run bench -- --only cost` holds it to its targets. The bound is loose
 * so that a busy machine, which slows one measurement more than the other,
 * cannot fail it, while a quadratic walk still does.
 */
const LINEAR = 8;

describe('an interface of many types', () => {
  // An interface implemented by 2,000 types, each pricing its fields on its own.
  const types = 2000;
  const wide = buildSchema(`
    ${tokenBucketDirectiveTypeDefs}
    type Query @tokenBucket(name: "api") { node: Node nodes(first: Int): [Node] }
    interface Node { id: ID }
    ${Array.from({ length: types }, (_, i) => `type T${i} implements Node { id: ID f${i}: Int }`).join('\n')}
  `);
  const wideModel = new CostModel(wide);

  /** Milliseconds of graphql-js `validate` and of `costOf` on the same freshly parsed document. */
  function timed(query: string, noLocation: boolean): { validateMs: number; priceMs: number; cost: Record<string, number> } {
    const document = parse(query, { noLocation });
    let started = performance.now();
    expect(validate(wide, document)).toEqual([]);
    const validateMs = performance.now() - started;
    started = performance.now();
    const cost = Object.fromEntries(wideModel.costOf(document, getOperationAST(document)!));
    return { validateMs, priceMs: performance.now() - started, cost };
  }

  it('prices many aliases of one selection on it about as fast as graphql-js validates them', () => {
    const aliases = 5000;
    const each = (selection: string): string => Array.from({ length: aliases }, (_, i) => `a${i}: node ${selection}`).join(' ');
    // Parsed with locations or without (Apollo Server's `parseOptions: { noLocation: true }`).
    for (const [query, noLocation] of [
      [`{ ${each('{ id }')} }`, false],
      [`{ ${each('{ ...F __typename }')} }\nfragment F on Node { id }`, false],
      [`{ ${each('{ ...F __typename }')} }\nfragment F on Node { id }`, true],
    ] as const) {
      timed(query, noLocation); // warm-up
      const { validateMs, priceMs, cost } = timed(query, noLocation);
      // api: 5,000 × node (1 + 0)
      expect(cost).toEqual({ api: aliases });
      // Priced once per alias and possible type, this took 11 (`{ id }`) to 240 times as long as validation.
      expect(priceMs, `costOf ${priceMs.toFixed(1)} ms, validate ${validateMs.toFixed(1)} ms`).toBeLessThan(LINEAR * validateMs + 50);
    }
  });

  it('prices many aliases of one selection on an interface sized by each alias about as fast as graphql-js validates them', () => {
    const sized = buildSchema(`
      ${tokenBucketDirectiveTypeDefs}
      directive @listSize(assumedSize: Int, slicingArguments: [String!], sizedFields: [String!], requireOneSlicingArgument: Boolean = true) on FIELD_DEFINITION
      type Query @tokenBucket(name: "api") { conn(first: Int): Conn @listSize(slicingArguments: ["first"], sizedFields: ["edges"]) }
      interface Conn { edges: [Edge] }
      type A implements Conn { edges: [Edge] }
      type B implements Conn { edges: [Edge] x: Int }
      type Edge { id: ID }
    `);
    const sizedModel = new CostModel(sized);
    const aliases = 20_000;
    const document = parse(`{ ${Array.from({ length: aliases }, (_, i) => `a${i}: conn(first: ${i}) { edges { id } }`).join(' ')} }`);
    let started = performance.now();
    expect(validate(sized, document)).toEqual([]);
    const validateMs = performance.now() - started;
    started = performance.now();
    // api: Σ over i of conn 1 × (1 + edges i × (1 + 0)) = 20,000 + 19,999 × 20,000 / 2
    expect(sizedModel.costOf(document, getOperationAST(document)!).get('api')).toBe(aliases + (19_999 * aliases) / 2);
    const priceMs = performance.now() - started;
    // Memoized once per size, every lookup read all the sizes before it: 2 to 5 times as long as validation.
    expect(priceMs, `costOf ${priceMs.toFixed(1)} ms, validate ${validateMs.toFixed(1)} ms`).toBeLessThan(LINEAR * validateMs + 50);
  });

  it('prices one selection of many fields on it about as fast as graphql-js validates it', () => {
    const fields = 20_000;
    const aliases = Array.from({ length: fields }, (_, i) => `a${i}: id`).join(' ');
    // With and without fragments on some of its types, whose fields are priced on those types alone.
    for (const narrower of ['', '... on T1 { f1 } ... on T7 { f7 id }']) {
      const query = `{ nodes(first: 2) { ${aliases} ${narrower} } }`;
      timed(query, false); // warm-up
      const { validateMs, priceMs, cost } = timed(query, false);
      // api: nodes 2 × (Node 1 + 0)
      expect(cost).toEqual({ api: 2 });
      // Priced on each of the 2,000 types, this took 10 times as long as validation.
      expect(priceMs, `costOf ${priceMs.toFixed(1)} ms, validate ${validateMs.toFixed(1)} ms`).toBeLessThan(LINEAR * validateMs + 50);
    }
  });

  it('prices many fields on it beside a condition on each of many of its types about as fast as graphql-js validates them', () => {
    const n = 500;
    const plain = Array.from({ length: n }, (_, i) => `a${i}: id`).join(' ');
    // Conditions beside the fields, and conditions that each select one of their keys again (merged on that type alone).
    for (const condition of [(i: number) => `... on T${i} { f${i} }`, (i: number) => `... on T${i} { a${i}: id f${i} }`]) {
      const query = `{ nodes(first: 2) { ${plain} ${Array.from({ length: n }, (_, i) => condition(i)).join(' ')} } }`;
      timed(query, false); // warm-up
      const { validateMs, priceMs, cost } = timed(query, false);
      // api: nodes 2 × (Node 1 + 0)
      expect(cost).toEqual({ api: 2 });
      // The fields priced again on each type a condition names, this took 5 to 9 times as long as validation, and grew with n.
      expect(priceMs, `costOf ${priceMs.toFixed(1)} ms, validate ${validateMs.toFixed(1)} ms`).toBeLessThan(LINEAR * validateMs + 50);
    }
  });
});

describe('a response on an interface of many types', () => {
  const n = 700;
  const schema = buildSchema(`
    ${tokenBucketDirectiveTypeDefs}
    type Query @tokenBucket(name: "api") { node: I }
    interface I { id: ID }
    ${Array.from({ length: n }, (_, i) => `type T${i} implements I { id: ID x: Int }`).join('\n')}
  `);
  const responseModel = new CostModel(schema);

  it('prices many fields on it beside a condition on each of many of its types about as fast as graphql-js validates them', () => {
    const plain = Array.from({ length: n }, (_, i) => `a${i}: id`).join(' ');
    const fields = Object.fromEntries(Array.from({ length: n }, (_, i) => [`a${i}`, '1']));
    // Told by __typename, and by keys alone (which fit every type a condition names); conditions beside the fields, and conditions that each select one of their keys again.
    for (const [typename, node, condition] of [
      ['__typename', { __typename: 'T7', ...fields, x: 1 }, (i: number) => `... on T${i} { x }`],
      ['', { ...fields, x: 1 }, (i: number) => `... on T${i} { x }`],
      ['__typename', { __typename: 'T7', ...fields, x: 1 }, (i: number) => `... on T${i} { a${i}: id x }`],
      ['', { ...fields, x: 1 }, (i: number) => `... on T${i} { a${i}: id x }`],
    ] as const) {
      const conditions = Array.from({ length: n }, (_, i) => condition(i)).join(' ');
      const query = `{ node { ${typename} ${plain} ${conditions} } }`;
      const measure = () => {
        const document = parse(query);
        let started = performance.now();
        expect(validate(schema, document)).toEqual([]);
        const validateMs = performance.now() - started;
        const operation = getOperationAST(document)!;
        const estimate = responseModel.costOf(document, operation);
        started = performance.now();
        const cost = Object.fromEntries(responseModel.actualCostOf(document, operation, undefined, { node }, estimate));
        return { validateMs, priceMs: performance.now() - started, cost };
      };
      measure(); // warm-up
      const { validateMs, priceMs, cost } = measure();
      // api: node 1 + id 0 + x 0
      expect(cost).toEqual({ api: 1 });
      // Each type's plan read the plain fields again, and an object that fits all of them was priced once per type: 4 times validation at 250, 12 to 23 times at 500 to 700, and grew with n; where each condition selects a plain key again, still 12 to 14 times at 500 to 700.
      expect(priceMs, `actualCostOf ${priceMs.toFixed(1)} ms, validate ${validateMs.toFixed(1)} ms`).toBeLessThan(LINEAR * validateMs + 50);
    }
  });
});

/** `{ items(first: 1) { child { child … { id } } } }`, `depth` children deep, built without the parser (which stops near 2,000). */
function handBuilt(depth: number): [DocumentNode, OperationDefinitionNode] {
  let field: FieldNode = { kind: Kind.FIELD, name: { kind: Kind.NAME, value: 'id' } };
  for (let i = 0; i < depth; i++) {
    field = { kind: Kind.FIELD, name: { kind: Kind.NAME, value: 'child' }, selectionSet: { kind: Kind.SELECTION_SET, selections: [field] } };
  }
  const document = parse('{ items(first: 1) { id } }');
  const operation = document.definitions[0] as OperationDefinitionNode;
  const items = operation.selectionSet.selections[0] as FieldNode;
  (items as { selectionSet?: FieldNode['selectionSet'] }).selectionSet = { kind: Kind.SELECTION_SET, selections: [field] };
  return [document, operation];
}

describe('depth', () => {
  it('prices an operation nested far deeper than any call stack, and its response', () => {
    const [document, operation] = handBuilt(100_000);
    // api: items 1 × (1 + 100,000 children × 1); items: 1 token
    expect(Object.fromEntries(model.costOf(document, operation))).toEqual({ api: 100_001, items: 1 });
    let data: Record<string, unknown> = { id: '1' };
    for (let i = 0; i < 100_000; i++) data = { child: data };
    expect(Object.fromEntries(model.actualCostOf(document, operation, undefined, { items: [data] }))).toEqual({ api: 100_001, items: 1 });
  }, 120_000); // about 3 s alone (linear: 17 µs a level), past 20 s on a loaded machine; nothing here depends on time

  it('prices variables nested deeper than graphql-js coerces by what was sent', () => {
    // Whether graphql-js runs out of stack coercing them depends on how deep
    // its stack already is: pricing may run out where execution, on another
    // stack, does not. So what was sent is priced, every other variable too.
    const document = parse('query ($n: Int, $v: Nested) { items(first: $n) { id } nested(value: $v) }');
    let value: Record<string, unknown> = { n: 1 };
    for (let i = 0; i < 100_000; i++) value = { inner: value };
    expect(getVariableValues(schema, getOperationAST(document)!.variableDefinitions!, { n: 1000, v: value }).errors?.[0]?.message).toMatch(/call stack/);
    // api: items 1000 × (1 + 0) + nested (Nested 1 per level, 100,001 levels); items: 1
    expect(Object.fromEntries(model.costOf(document, getOperationAST(document)!, { n: 1000, v: value }))).toEqual({ api: 101_001, items: 1 });
    // As deep as graphql-js coerces, the same: Nested 1 per level.
    value = { n: 1 };
    for (let i = 0; i < 1000; i++) value = { inner: value };
    expect(model.costOf(document, getOperationAST(document)!, { n: 0, v: value }).get('api')).toBe(1001);
  });
});
