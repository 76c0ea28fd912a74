// SPEC §7, pricing against a supergraph composed with @apollo/composition:
// @key, @provides (with its @external) and @override change nothing a client could
// use to pay less for the same work; entity fetches are those of the plan
// Apollo's query planner makes from the supergraph.
import { composeServices } from '@apollo/composition';
import { getOperationAST, parse } from 'graphql';
import { describe, expect, it } from 'vitest';
import { CostModel, supergraphPricing } from '../src/index.js';
import { MAX_PLANNED_LABELS, MAX_PLANNED_SELECTIONS } from '../src/cost/query-plans.js';

const FEDERATION = '@link(url: "https://specs.apollo.dev/federation/v2.9", import: ["@key", "@external", "@provides", "@override", "@shareable", "@cost"])';

function supergraph(subgraphs: Record<string, string>): string {
  const result = composeServices(Object.entries(subgraphs).map(([name, sdl]) => ({ name, typeDefs: parse(`extend schema ${FEDERATION}\n${sdl}`), url: `http://${name}` })));
  if (result.errors !== undefined) throw new Error(result.errors.map((e) => e.message).join('; '));
  return result.supergraphSdl;
}

function price(sdl: string, query: string): number | undefined {
  const source = supergraphPricing(sdl);
  const model = new CostModel(source.schema, { ...source, rules: new Map([['Query', [{ bucket: 'api', cost: null }]]]) });
  const document = parse(query);
  return model.costOf(document, getOperationAST(document)!, {}).get('api');
}

const users = 'type User @key(fields: "id") { id: ID! name: String @shareable bio: String @cost(weight: 4) }';

describe('pricing a composed supergraph', () => {
  it('@provides: a field the parent subgraph provides is never priced below its own subgraph', () => {
    const plain = supergraph({
      posts: 'type Query { posts: [Post!]! } type Post @key(fields: "id") { id: ID! author: User } type User @key(fields: "id") { id: ID! }',
      users,
    });
    const provided = supergraph({
      posts: 'type Query { posts: [Post!]! } type Post @key(fields: "id") { id: ID! author: User @provides(fields: "name") } type User @key(fields: "id") { id: ID! name: String @external }',
      users,
    });
    const query = '{ posts { author { name bio } } }';
    // posts 10 × (Post 1 + author (User 1 + bio 4 + one fetch from users 1)) = 70
    expect(price(plain, query)).toBe(70);
    expect(price(provided, query)).toBe(70);
  });

  it('@key: a field another subgraph resolves costs its weight and its fetch; the key alone fetches nothing', () => {
    const sdl = supergraph({
      posts: 'type Query { post: Post } type Post @key(fields: "id") { id: ID! author: User } type User @key(fields: "id") { id: ID! }',
      users,
    });
    // post (Post 1 + author (User 1 + bio 4 + fetch from users 1)) = 7
    expect(price(sdl, '{ post { author { bio } } }')).toBe(7);
    // Only the key: nothing to fetch.
    expect(price(sdl, '{ post { author { id __typename } } }')).toBe(2);
  });

  it('@override: the field is fetched from the subgraph that took it over', () => {
    const sdl = supergraph({
      posts: 'type Query { post: Post } type Post @key(fields: "id") { id: ID! title: String @override(from: "legacy") @cost(weight: 2) }',
      legacy: 'type Post @key(fields: "id") { id: ID! title: String @cost(weight: 2) }',
    });
    // post (Post 1 + title 2), no fetch: the posts subgraph resolves title now.
    expect(price(sdl, '{ post { title } }')).toBe(3);
  });

  it('aliases of fields of one subgraph are one fetch per object; @skip leaves a fetch out', () => {
    const sdl = supergraph({
      posts: 'type Query { post: Post } type Post @key(fields: "id") { id: ID! author: User } type User @key(fields: "id") { id: ID! }',
      users,
    });
    // post 1 + author (1 + a: bio 4 + b: bio 4 + one fetch from users 1) = 11
    expect(price(sdl, '{ post { author { a: bio b: bio } } }')).toBe(11);
    // post 1 + author 1, nothing fetched
    expect(price(sdl, '{ post { author { bio @skip(if: true) } } }')).toBe(2);
  });
});

describe("pricing a supergraph's query plans (what Apollo Gateway runs, and Apollo Router with overrideLabels: 'both')", () => {
  const api = new Map([['Query', [{ bucket: 'api', cost: null }]]]);
  const charge = (source: ReturnType<typeof supergraphPricing>, query: string): number | undefined => {
    const model = new CostModel(source.schema, { ...source, rules: api });
    const document = parse(query);
    return model.costOf(document, getOperationAST(document)!, {}).get('api');
  };
  // inventory serves stock; pricing takes price over from it for the requests its label says.
  const sdl = supergraph({
    inventory: 'type Query { stock(first: Int = 10): [Product!]! } type Product @key(fields: "id") { id: ID! price: Int }',
    pricing: 'type Product @key(fields: "id") { id: ID! price: Int @override(from: "inventory", label: "percent(10)") }',
  });

  it('is the plan Apollo Gateway makes, from its own planner', () => {
    const source = supergraphPricing(sdl);
    expect(source.plans).toBeDefined();
    expect(source.withoutPlans).toBeUndefined();
    // No label set: price comes with the stock, from inventory. stock 10 × Product 1 = 10
    expect(charge(source, '{ stock { price } }')).toBe(10);
    // The bound (Hive Gateway's) counts either side of the label: 10 × (1 + fetches from inventory and pricing 2) = 30
    expect(charge({ ...source, plans: undefined }, '{ stock { price } }')).toBe(30);
  });

  it("overrideLabels: 'both' prices each object at the dearer of the plans with and without the labels", () => {
    // Every label set: price from pricing, one entity fetch per product. 10 × (1 + 1) = 20
    expect(charge(supergraphPricing(sdl, { overrideLabels: 'both' }), '{ stock { price } }')).toBe(20);
    expect(charge(supergraphPricing(sdl, { overrideLabels: 'unset' }), '{ stock { price } }')).toBe(10);
  });

  it("overrideLabels: 'both' prices every setting of several labels, not only all set and none set", () => {
    // catalog lists products; pricing takes price and stock over from inventory, each by a label of its own.
    const labelled = (labels: string[]) =>
      supergraph({
        catalog: 'type Query { products(first: Int = 10): [Product!]! } type Product @key(fields: "id") { id: ID! }',
        inventory: `type Product @key(fields: "id") { id: ID! ${labels.map((_, i) => `f${i}: Int`).join(' ')} }`,
        pricing: `type Product @key(fields: "id") { id: ID! ${labels.map((label, i) => `f${i}: Int @override(from: "inventory", label: "${label}")`).join(' ')} }`,
      });
    const two = labelled(['percent(10)', 'percent(20)']);
    const query = '{ products { f0 f1 } }';
    // None set, or both: one entity fetch per product, from inventory or from pricing. 10 × (1 + 1) = 20
    expect(charge(supergraphPricing(two), query)).toBe(20);
    // One set and not the other (a request in 10 % × 80 %): a fetch from each. 10 × (1 + 2) = 30
    expect(charge(supergraphPricing(two, { overrideLabels: 'both' }), query)).toBe(30);
    // Four plans per operation: each is planned up to a quarter of MAX_PLANNED_SELECTIONS (products, f0, f1 and the padding), the bound beyond.
    const padding = (n: number) => Array.from({ length: n }, (_, i) => `t${i}: __typename`).join(' ');
    const limit = MAX_PLANNED_SELECTIONS / 4;
    expect(charge(supergraphPricing(two, { overrideLabels: 'both' }), `{ products { f0 f1 } ${padding(limit - 3)} }`)).toBe(30);
    // The bound: either side of each label a fetch of its own. 10 × (1 + 2 × 2) = 50
    expect(charge(supergraphPricing(two, { overrideLabels: 'both' }), `{ products { f0 f1 } ${padding(limit - 2)} }`)).toBe(50);
    // Beyond MAX_PLANNED_LABELS, the bound. 10 × (1 + 2 × 4) = 90
    const many = labelled(Array.from({ length: MAX_PLANNED_LABELS + 1 }, (_, i) => `percent(${i + 1})`));
    expect(charge(supergraphPricing(many, { overrideLabels: 'both' }), '{ products { f0 f1 f2 f3 } }')).toBe(90);
  });

  it(`an operation of more than ${MAX_PLANNED_SELECTIONS} selections, its fragments spread out, is priced by the bound, not planned`, () => {
    const source = supergraphPricing(sdl);
    const padding = (n: number) => Array.from({ length: n }, (_, i) => `t${i}: __typename`).join(' ');
    // The plan: 10; the bound: 30 (above). The selections: stock, price and the padding.
    expect(charge(source, `{ stock { price } ${padding(MAX_PLANNED_SELECTIONS - 2)} }`)).toBe(10);
    expect(charge(source, `{ stock { price } ${padding(MAX_PLANNED_SELECTIONS - 1)} }`)).toBe(30);
    // A fragment of 40 spread 30 times is 1,200 selections, written once.
    const fragment = `fragment F on Query { ${padding(38)} }`;
    expect(charge(source, `{ stock { price } ${Array.from({ length: 30 }, () => '...F').join(' ')} } ${fragment}`)).toBe(30);
    // Spread in itself (what validation would refuse): given up at the limit, not followed for ever.
    expect(charge(source, '{ stock { price } ...G } fragment G on Query { t: __typename ...G }')).toBe(30);
  });

  it('refuses options it does not know, by name', () => {
    expect(() => supergraphPricing(sdl, { overrideLabel: 'both' } as never)).toThrow(new TypeError('supergraphPricing: unknown option "overrideLabel" (options: overrideLabels)'));
    expect(() => supergraphPricing(sdl, { overrideLabels: 'all' } as never)).toThrow(/must be 'unset' or 'both', got "all"/);
  });
});
