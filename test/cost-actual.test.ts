// `CostModel.actualCostOf`: the same formula over the response, each list's
// size replaced by the number of items it holds. The arithmetic is next to
// each number.
import { execute, getOperationAST, parse, validate } from 'graphql';
import { describe, expect, it } from 'vitest';
import { CostModel } from '../src/index.js';
import { costSchema, pricer } from './support/graphql.js';

const { costOf, actualCostOf } = pricer(
  costSchema(`
    type Query @tokenBucket(name: "api") {
      items(first: Int): [Item]
      item: Item
      search(first: Int): [Item] @tokenBucket(name: "search", cost: 2)
      nodes(first: Int): [Node]
      matrix(first: Int): [[Cell]]
      tags(first: Int): [String] @cost(weight: "1")
      conn(first: Int): Conn @listSize(slicingArguments: ["first"], sizedFields: ["edges"])
    }
    type Mutation @tokenBucket(name: "api") { touch(first: Int): [Item] }
    type Item {
      id: ID
      price: Int @tokenBucket(name: "price", cost: 1)
      child: Item
      tagged(tag: String @cost(weight: "1")): Int
    }
    interface Node { id: ID score: Int }
    type Doc implements Node { id: ID score: Int @cost(weight: "5") body: Body }
    type Image implements Node { id: ID score: Int }
    type Body { text: String }
    type Cell { v: Int }
    type Conn { edges: [Edge] }
    type Edge { cursor: String }
  `),
);

const items = (n: number, item: Record<string, unknown> = { id: '1' }) => Array.from({ length: n }, () => ({ ...item }));

describe('actualCostOf', () => {
  it('replaces each list’s size by the number of items returned', () => {
    expect(costOf('{ items(first: 100) { id } }')).toEqual({ api: 100 });
    expect(actualCostOf('{ items(first: 100) { id } }', { items: items(3) })).toEqual({ api: 3 }); // 3 × (1 + 0)
    // items 2 × (1 + child 1 × (1 + 0))
    expect(actualCostOf('{ items(first: 100) { child { id } } }', { items: items(2, { child: { id: '2' } }) })).toEqual({ api: 4 });
  });

  it('charges nothing below a null list or object', () => {
    expect(actualCostOf('{ items(first: 100) { child { id } } }', { items: null })).toEqual({ api: 0 });
    // item 1 × (1 + nothing below)
    expect(actualCostOf('{ item { child { child { id } } } }', { item: null })).toEqual({ api: 1 });
    // items 2 × 1, each child 1 (a null one's resolver ran: its own weight, nothing below)
    expect(actualCostOf('{ items(first: 9) { child { child { id } } } }', { items: [{ child: null }, { child: { child: null } }] })).toEqual({
      api: 5, // 2 + 1 + (1 + its null child 1)
    });
  });

  it('charges a fixed cost once per time its field appears in the response', () => {
    expect(costOf('{ items(first: 10) { price } }')).toEqual({ api: 10, price: 10 });
    expect(actualCostOf('{ items(first: 10) { price } }', { items: items(3, { price: 1 }) })).toEqual({ api: 3, price: 3 });
    // A null value still appears: its resolver ran.
    expect(actualCostOf('{ items(first: 10) { price } }', { items: items(2, { price: null }) })).toEqual({ api: 2, price: 2 });
    // search appears once, whatever it returns.
    expect(actualCostOf('{ search(first: 5) { id } }', { search: [] })).toEqual({ api: 0, search: 2 });
  });

  it('counts every level of a list of lists by what it holds', () => {
    // 2 + 1 cells, an inner null list holding nothing
    expect(actualCostOf('{ matrix(first: 5) { v } }', { matrix: [[{ v: 1 }, { v: 2 }], [{ v: 3 }], null] })).toEqual({ api: 3 });
  });

  it('multiplies a list of weighted scalars by what it holds', () => {
    expect(actualCostOf('{ tags(first: 1000) }', { tags: ['a', 'b', 'c'] })).toEqual({ api: 3 }); // 3 × 1
  });

  it('charges arguments once per time their field appears', () => {
    // items 3 × (1 + tagged (0 + tag 1))
    expect(actualCostOf('{ items(first: 10) { tagged(tag: "x") } }', { items: items(3, { tagged: 1 }) })).toEqual({ api: 6 });
  });

  it('sizes sized fields by what they hold', () => {
    expect(actualCostOf('{ conn(first: 50) { edges { cursor } } }', { conn: { edges: items(2, { cursor: 'c' }) } })).toEqual({
      api: 3, // conn 1 + edges 2 × (1 + 0)
    });
  });

  it('prices an object of an abstract type as the type __typename names', () => {
    const query = '{ nodes(first: 10) { __typename ... on Doc { body { text } } } }';
    const data = { nodes: [{ __typename: 'Doc', body: { text: 't' } }, { __typename: 'Image' }] };
    expect(actualCostOf(query, data)).toEqual({ api: 3 }); // Doc 1 + body 1, Image 1
  });

  it('tells the type by the keys graphql-js wrote, without __typename', () => {
    const query = '{ nodes(first: 10) { id ... on Doc { body { text } } } }';
    expect(actualCostOf(query, { nodes: [{ id: '1', body: { text: 't' } }, { id: '2' }] })).toEqual({ api: 3 });
  });

  it('charges the most expensive type an object could be when nothing tells them apart', () => {
    // { score } from a Doc costs 1 + 5, from an Image 1 + 0: nothing in the object says which.
    expect(actualCostOf('{ nodes(first: 10) { score } }', { nodes: [{ score: 1 }, { score: 2 }] })).toEqual({ api: 12 });
    expect(actualCostOf('{ nodes(first: 10) { __typename score } }', { nodes: [{ __typename: 'Image', score: 1 }] })).toEqual({ api: 1 });
  });

  it("charges a field selected twice under one response key once, as it ran once", () => {
    const query = '{ items(first: 5) { id } items(first: 5) { price } }';
    expect(costOf(query)).toEqual({ api: 5, price: 5 }); // merged: items(first: 5) { id price }, 5 × 1 each
    expect(actualCostOf(query, { items: items(3, { id: '1', price: 1 }) })).toEqual({ api: 3, price: 3 });
  });

  it("includes a mutation's base cost", () => {
    expect(actualCostOf('mutation { touch(first: 5) { id } }', { touch: [] })).toEqual({ api: 10 });
  });

  it('never exceeds the estimate, bucket by bucket, and keeps its buckets', () => {
    // Resolvers that return more than asked for are not charged more than was taken.
    expect(actualCostOf('{ items(first: 2) { price } }', { items: items(5, { price: 1 }) })).toEqual({ api: 2, price: 2 });
    expect(actualCostOf('{ search(first: 5) { price } }', null)).toEqual({ api: 0, search: 0, price: 0 });
  });
});

describe('actualCostOf on what graphql-js returns', () => {
  const schema = costSchema(`
    type Query @tokenBucket(name: "api") { search: [Result] @listSize(assumedSize: 1) }
    union Result = Cheap | Pricey
    type Cheap { name: String }
    type Pricey { name: String items(first: Int): [Item] }
    type Item { id: ID @tokenBucket(name: "item", cost: 1) }
  `);
  const model = new CostModel(schema);
  const price = async (query: string, rootValue: unknown) => {
    const document = parse(query);
    expect(validate(schema, document)).toEqual([]);
    const operation = getOperationAST(document)!;
    const result = await execute({ schema, document, rootValue, typeResolver: (value: { kind: string }) => value.kind });
    expect(result.errors).toBeUndefined();
    return { estimate: Object.fromEntries(model.costOf(document, operation)), actual: Object.fromEntries(model.actualCostOf(document, operation, undefined, result.data)) };
  };

  it('takes __typename only from a key that holds it for that type, not from a string field another type aliases there', async () => {
    // A Pricey whose name someone set to "Cheap", read under the key where a Cheap writes its __typename.
    const pricey = { kind: 'Pricey', name: 'Cheap', items: Array.from({ length: 100 }, (_, i) => ({ id: String(i) })) };
    for (const query of [
      '{ search { ... on Cheap { kind: __typename } ... on Pricey { kind: name items(first: 100) { id } } } }',
      '{ search { ... on Cheap { __typename } ... on Pricey { __typename: name items(first: 100) { id } } } }',
      '{ search { __typename ... on Cheap { kind: __typename } ... on Pricey { kind: name items(first: 100) { id } } } }',
    ]) {
      const { estimate, actual } = await price(query, { search: [pricey] });
      // search 1 × (Pricey 1 + items 100 × (1 + 0)); item: 100 ids
      expect(estimate, query).toEqual({ api: 101, item: 100 });
      expect(actual, query).toEqual({ api: 101, item: 100 });
      // A real Cheap is still told apart.
      expect((await price(query, { search: [{ kind: 'Cheap', name: 'x' }] })).actual, query).toEqual({ api: 1, item: 0 });
    }
  });
});

describe('actualCostOf of objects whose type the response does not tell', () => {
  const types = 400;
  const schema = costSchema(`
    type Query @tokenBucket(name: "api") { nodes(first: Int): [Node] }
    interface Node { id: ID }
    type A implements Node { id: ID f(list: [Int] @cost(weight: "1")): Int }
    type B implements Node { id: ID f(list: [Int] @cost(weight: "1")): Int }
    ${Array.from({ length: types }, (_, i) => `type T${i} implements Node { id: ID t${i}: Int }`).join('\n')}
  `);
  const model = new CostModel(schema);

  it('prices them as the most expensive type they could be, arguments included', async () => {
    const document = parse('{ nodes(first: 1) { ... on A { x: f(list: [1]) } ... on B { x: f(list: [1, 2, 3, 4, 5]) } } }');
    expect(validate(schema, document)).toEqual([]);
    const operation = getOperationAST(document)!;
    // nodes 1 × (Node 1 + B's x: list 1 + 5 elements × 1)
    expect(Object.fromEntries(model.costOf(document, operation))).toEqual({ api: 7 });
    // { x } could be an A's (1 + 2) or a B's (1 + 6).
    expect(Object.fromEntries(model.actualCostOf(document, operation, undefined, { nodes: [{ x: 1 }] }))).toEqual({ api: 7 });
  });

  it('prices a long list of them in about the time graphql-js takes to produce it', async () => {
    const count = 20_000;
    const document = parse(`{ nodes(first: ${count}) { id } }`);
    const operation = getOperationAST(document)!;
    const rootValue = { nodes: Array.from({ length: count }, (_, i) => ({ kind: `T${i % types}`, id: String(i) })) };
    const run = () => execute({ schema, document, rootValue, typeResolver: (value: { kind: string }) => value.kind }) as Promise<{ data: unknown }>;
    await run(); // warm-up
    let started = performance.now();
    const { data } = await run();
    const executeMs = performance.now() - started;
    model.actualCostOf(document, operation, undefined, data); // warm-up
    started = performance.now();
    const actual = Object.fromEntries(model.actualCostOf(document, operation, undefined, data));
    const priceMs = performance.now() - started;
    // nodes 20,000 × (1 + 0)
    expect(actual).toEqual({ api: count });
    // Each object priced once per type it could be (400, with { id } only), and each such price looked up among the others, took 6 s.
    expect(priceMs, `actualCostOf ${priceMs.toFixed(1)} ms, execute ${executeMs.toFixed(1)} ms`).toBeLessThan(3 * executeMs + 20);
  });
});

describe('actualCostOf on an interface of many types', () => {
  // 60 types in two classes: T0…T29 weigh `score` 5, T30…T59 weigh it 0.
  const types = Array.from({ length: 60 }, (_, i) => `type T${i} implements Node { id: ID score: Int${i < 30 ? ' @cost(weight: "5")' : ''} extra: Int }`);
  const { costOf, actualCostOf } = pricer(
    costSchema(`
      type Query @tokenBucket(name: "api") { node(id: ID): Node }
      interface Node { id: ID score: Int }
      ${types.join('\n')}
    `),
  );

  it('prices each object as its own type where __typename names it, a type of its class standing for it', () => {
    const query = `{ ${Array.from({ length: 40 }, (_, i) => `a${i}: node(id: "${i}") { __typename score }`).join(' ')} }`;
    // 40 × (Node 1 + score at most 5) = 240
    expect(costOf(query)).toEqual({ api: 240 });
    const data = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`a${i}`, { __typename: `T${Math.floor(i * 1.5)}`, score: 1 }]));
    // a0…a19 name T0…T28 (score 5): 20 × 6; a20…a39 name T30…T58 (score 0): 20 × 1
    expect(actualCostOf(query, data)).toEqual({ api: 140 });
  });

  it('prices an object whose type nothing tells as the most expensive type that could have produced it', () => {
    const query = `{ ${Array.from({ length: 40 }, (_, i) => `a${i}: node(id: "${i}") { score }`).join(' ')} }`;
    const data = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`a${i}`, { score: 1 }]));
    expect(actualCostOf(query, data)).toEqual({ api: 240 }); // 40 × (1 + 5)
  });

  it('tells a named type apart from its class where a fragment names it', () => {
    // T40 (class of score 0) with `extra` selected: 1 + extra 0; T41: 1. A T0 object: 1 + 5.
    const query = '{ a: node(id: "a") { __typename score ... on T40 { extra } } b: node(id: "b") { __typename score ... on T40 { extra } } }';
    const data = { a: { __typename: 'T40', score: 1, extra: 2 }, b: { __typename: 'T41', score: 1 } };
    expect(actualCostOf(query, data)).toEqual({ api: 2 });
    expect(actualCostOf(query, { a: { __typename: 'T0', score: 1 }, b: { __typename: 'T41', score: 1 } })).toEqual({ api: 7 });
  });
});

describe('actualCostOf of fields on an interface beside conditions on its types', () => {
  // Two classes by how they price the interface's fields: A1, A2 weigh `score` 5; B1, B2 weigh it 0. `x` weighs 3 on A2 and B1; `tagged` 1 with a tag.
  const common = 'id: ID tagged(tag: String @cost(weight: "1")): Int child: Node';
  const schema = costSchema(`
      type Query @tokenBucket(name: "api") { node: Node }
      interface Node { ${common} score: Int }
      type A1 implements Node { ${common} score: Int @cost(weight: "5") x: Int }
      type A2 implements Node { ${common} score: Int @cost(weight: "5") x: Int @cost(weight: "3") }
      type B1 implements Node { ${common} score: Int x: Int @cost(weight: "3") }
      type B2 implements Node { ${common} score: Int x: Int }
    `);
  const { costOf, actualCostOf } = pricer(schema);
  const conditions = '... on A1 { x } ... on A2 { x } ... on B1 { x } ... on B2 { x }';

  it('price the plain fields once per class beside the most expensive condition that could have run', () => {
    const query = `{ node { id score ${conditions} } }`;
    // The most a type could be: A2, node 1 + score 5 + x 3 = 9
    expect(costOf(query)).toEqual({ api: 9 });
    // Nothing tells the four apart: A1 1 + 5 + 0 = 6, A2 9, B1 1 + 0 + 3 = 4, B2 1; the most, 9
    expect(actualCostOf(query, { node: { id: '1', score: 1, x: 1 } })).toEqual({ api: 9 });
  });

  it('price the type __typename names, its plain fields on its class', () => {
    const query = `{ node { __typename id score ${conditions} } }`;
    expect(actualCostOf(query, { node: { __typename: 'A1', id: '1', score: 1, x: 1 } })).toEqual({ api: 6 }); // 1 + 5 + 0
    expect(actualCostOf(query, { node: { __typename: 'B1', id: '1', score: 1, x: 1 } })).toEqual({ api: 4 }); // 1 + 0 + 3
    expect(actualCostOf(query, { node: { __typename: 'B2', id: '1', score: 1, x: 1 } })).toEqual({ api: 1 }); // 1 + 0 + 0
  });

  it('merge a condition selecting a plain key again on that type alone', () => {
    const query = '{ node { id score ... on A2 { score x } ... on B1 { x } } }';
    // A2: score merged, 1 + 5 + 3 = 9; B1: 1 + 0 + 3 = 4
    expect(actualCostOf(query, { node: { id: '1', score: 1, x: 1 } })).toEqual({ api: 9 });
    // Without x: A1 or B2, 1 + 5 = 6 at most
    expect(actualCostOf(query, { node: { id: '1', score: 1 } })).toEqual({ api: 6 });
  });

  it('merge a plain key each condition selects again on its type alone, beside the rest of the plain fields', () => {
    const repeated = '... on A1 { score x } ... on A2 { score x } ... on B1 { score x } ... on B2 { score x }';
    const query = `{ node { id score ${repeated} } }`;
    // A2: node 1 + score 5 (once, merged) + x 3 = 9
    expect(costOf(query)).toEqual({ api: 9 });
    // Nothing tells the four apart: A1 1 + 5 + 0 = 6, A2 9, B1 1 + 0 + 3 = 4, B2 1; the most, 9
    expect(actualCostOf(query, { node: { id: '1', score: 1, x: 1 } })).toEqual({ api: 9 });
    const named = `{ node { __typename id score ${repeated} } }`;
    expect(actualCostOf(named, { node: { __typename: 'A1', id: '1', score: 1, x: 1 } })).toEqual({ api: 6 }); // 1 + 5 + 0
    expect(actualCostOf(named, { node: { __typename: 'B1', id: '1', score: 1, x: 1 } })).toEqual({ api: 4 }); // 1 + 0 + 3
    expect(actualCostOf(named, { node: { __typename: 'B2', id: '1', score: 1, x: 1 } })).toEqual({ api: 1 }); // 1 + 0 + 0
  });

  it('run a key selected again as its first node does, with the sub-selections of all', () => {
    // Arguments that differ (validation off): the plain node first, no tag, 1 + 0; the condition's first, its tag, 1 + 1
    const model = new CostModel(schema);
    const unvalidated = (query: string, node: Record<string, unknown>) => {
      const document = parse(query);
      return Object.fromEntries(model.actualCostOf(document, getOperationAST(document)!, undefined, { node }));
    };
    expect(unvalidated('{ node { __typename tagged ... on A2 { tagged(tag: "t") } } }', { __typename: 'A2', tagged: 1 })).toEqual({ api: 1 });
    expect(unvalidated('{ node { __typename ... on A2 { tagged(tag: "t") } tagged } }', { __typename: 'A2', tagged: 1 })).toEqual({ api: 2 });
    expect(unvalidated('{ node { __typename ... on A2 { tagged(tag: "t") } tagged } }', { __typename: 'B1', tagged: 1 })).toEqual({ api: 1 });
    expect(unvalidated('{ node { tagged ... on A2 { tagged(tag: "t") } ... on B1 { tagged(tag: "t") } } }', { tagged: 1 })).toEqual({ api: 1 });
    expect(unvalidated('{ node { ... on A2 { tagged(tag: "t") } tagged ... on B1 { x } } }', { tagged: 1 })).toEqual({ api: 2 });
    // On A2 the child reads score too: node 1 + child 1 + score 5 at most (any type's) = 7; on B1 only id, 1 + 1
    const query = '{ node { __typename id child { id } ... on A2 { child { score } } } }';
    expect(actualCostOf(query, { node: { __typename: 'A2', id: '1', child: { id: '2', score: 1 } } })).toEqual({ api: 7 });
    expect(actualCostOf(query, { node: { __typename: 'B1', id: '1', child: { id: '2' } } })).toEqual({ api: 2 });
  });
});
