// SPEC §2, "arguments": `@cost` on arguments and input fields, the arithmetic next to each number.
import { describe, expect, it } from 'vitest';
import { costSchema, pricer } from './support/graphql.js';

const { costOf } = pricer(
  costSchema(`
    input Filter {
      text: String
      tags: [String] @cost(weight: "2")
      nested: Filter
      heavy: Int @cost(weight: "5")
      level: Level
    }
    enum Level @cost(weight: "3") { LOW HIGH }
    scalar Json
    scalar Money @cost(weight: "4")
    type Query @tokenBucket(name: "api") {
      find(id: ID): Item
      costly(x: Int @cost(weight: "10")): Int
      filtered(filter: Filter): Int
      weighted(filter: Filter @cost(weight: "7")): Int
      many(ids: [Int] @cost(weight: "10")): Int
      plainList(ids: [Int]): Int
      money(amount: Money): Int
      level(l: Level): Int
      json(j: Json): Int
      items(first: Int, filter: Filter): [Item]
    }
    type Item { id: ID tagged(tag: String @cost(weight: "1")): Int }
  `),
);

describe('argument costs', () => {
  it('charges an argument its @cost when given, nothing otherwise', () => {
    expect(costOf('{ find(id: 5) { id } }')).toEqual({ api: 1 }); // Item 1, id has no @cost
    expect(costOf('{ costly(x: 3) }')).toEqual({ api: 10 });
    expect(costOf('{ costly }')).toEqual({ api: 0 });
    expect(costOf('{ costly(x: null) }')).toEqual({ api: 0 }); // a null costs nothing
  });

  it("charges a scalar or enum argument its type's @cost", () => {
    expect(costOf('{ money(amount: 5) }')).toEqual({ api: 4 });
    expect(costOf('{ level(l: LOW) }')).toEqual({ api: 3 });
  });

  it('charges an input object 1 (or its argument’s @cost) plus its fields, recursively', () => {
    expect(costOf('{ filtered(filter: {}) }')).toEqual({ api: 1 });
    expect(costOf('{ filtered(filter: { text: "a" }) }')).toEqual({ api: 1 }); // 1 + text 0
    expect(costOf('{ filtered(filter: { heavy: 1 }) }')).toEqual({ api: 6 }); // 1 + 5
    expect(costOf('{ filtered(filter: { nested: { heavy: 1 } }) }')).toEqual({ api: 7 }); // 1 + (1 + 5)
    expect(costOf('{ filtered(filter: { level: HIGH }) }')).toEqual({ api: 4 }); // 1 + Level's 3
    expect(costOf('{ weighted(filter: { heavy: 1 }) }')).toEqual({ api: 12 }); // the argument's 7 + 5
  });

  it('charges a list its @cost plus each element’s', () => {
    expect(costOf('{ many(ids: [1, 2, 3]) }')).toEqual({ api: 40 }); // 10 + 3 × 10
    expect(costOf('{ many(ids: 5) }')).toEqual({ api: 20 }); // a single value is a list of one: 10 + 10
    expect(costOf('{ many(ids: []) }')).toEqual({ api: 10 });
    expect(costOf('{ plainList(ids: [1, 2]) }')).toEqual({ api: 0 });
    expect(costOf('{ filtered(filter: { tags: ["a", "b"] }) }')).toEqual({ api: 7 }); // 1 + (2 + 2 × 2)
  });

  it('prices a custom scalar holding an object as one value', () => {
    expect(costOf('{ json(j: { a: 1, b: [1, 2] }) }')).toEqual({ api: 0 });
    expect(costOf('query ($j: Json) { json(j: $j) }', { j: { a: { b: { c: 1 } } } })).toEqual({ api: 0 });
  });

  it('prices variables by their values, or the operation’s default for them', () => {
    // 1 + heavy 5 + tags (2 + 1 × 2)
    expect(costOf('query ($f: Filter) { filtered(filter: $f) }', { f: { heavy: 2, tags: ['x'] } })).toEqual({ api: 10 });
    expect(costOf('query ($f: Filter) { filtered(filter: $f) }', {})).toEqual({ api: 0 });
    expect(costOf('query ($f: Filter = { heavy: 1 }) { filtered(filter: $f) }', {})).toEqual({ api: 6 });
    expect(costOf('query ($n: Filter) { filtered(filter: { nested: $n }) }', { n: { heavy: 1 } })).toEqual({ api: 7 });
    expect(costOf('query ($ids: [Int]) { many(ids: $ids) }', { ids: [1, 2] })).toEqual({ api: 30 }); // 10 + 2 × 10
    // One variable for two fields: priced for each.
    expect(costOf('query ($f: Filter) { a: filtered(filter: $f) b: filtered(filter: $f) }', { f: { heavy: 1 } })).toEqual({ api: 12 });
  });

  it("adds a field's argument cost outside its own list size, inside its parents'", () => {
    // items 3 × (1 + 0) + filter (1 + 5)
    expect(costOf('{ items(first: 3, filter: { heavy: 1 }) { id } }')).toEqual({ api: 9 });
    // items 3 × (1 + tagged (0 + tag 1))
    expect(costOf('{ items(first: 3) { tagged(tag: "x") } }')).toEqual({ api: 6 });
  });
});
