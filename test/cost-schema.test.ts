import {
  DirectiveLocation,
  GraphQLDirective,
  GraphQLFloat,
  GraphQLID,
  GraphQLInt,
  GraphQLList,
  GraphQLNonNull,
  GraphQLObjectType,
  GraphQLSchema,
  GraphQLString,
  buildSchema,
  getOperationAST,
  parse,
  specifiedDirectives,
} from 'graphql';
import { describe, expect, it } from 'vitest';
import { CostModel, DEFAULT_LIST_SIZE } from '../src/cost/cost-model.js';
import { tokenBucketDirectiveTypeDefs } from '../src/directive.js';

function costOf(model: CostModel, query: string): Record<string, number> {
  const document = parse(query);
  const operation = getOperationAST(document);
  if (operation == null) throw new Error('no operation');
  return Object.fromEntries(model.costOf(document, operation));
}

function sdl(body: string): GraphQLSchema {
  return buildSchema(`${tokenBucketDirectiveTypeDefs}\n${body}`);
}

/** A code-first schema whose Query.field carries the given directives in `extensions`. */
function codeFirst(directives: Record<string, unknown>, extra: GraphQLDirective[] = []): GraphQLSchema {
  return new GraphQLSchema({
    query: new GraphQLObjectType({
      name: 'Query',
      fields: { field: { type: GraphQLInt, extensions: { directives } } },
    }),
    directives: [...specifiedDirectives, ...extra],
  });
}

describe('annotations and buckets', () => {
  it('lists every @tokenBucket with its schema coordinate', () => {
    const model = new CostModel(
      sdl(`
        type Query @tokenBucket(name: "api") {
          search: [Item] @tokenBucket(name: "search", cost: 5) @tokenBucket(name: "api", cost: 2)
          plain: Int
        }
        interface Node @tokenBucket(name: "nodes", cost: 1) { id: ID! @tokenBucket(name: "ids") }
        type Item implements Node { id: ID! }
      `),
    );
    expect(model.annotations).toEqual([
      { coordinate: 'Query', bucket: 'api', cost: null },
      { coordinate: 'Query.search', bucket: 'search', cost: 5 },
      { coordinate: 'Query.search', bucket: 'api', cost: 2 },
      { coordinate: 'Node', bucket: 'nodes', cost: 1 },
      { coordinate: 'Node.id', bucket: 'ids', cost: null },
    ]);
    expect([...model.buckets]).toEqual(['api', 'search', 'nodes', 'ids']);
  });

  it('has no buckets and charges nothing for a schema without @tokenBucket', () => {
    const model = new CostModel(buildSchema('type Query { a: Int }'));
    expect(model.annotations).toEqual([]);
    expect(model.buckets.size).toBe(0);
    expect(costOf(model, '{ a }')).toEqual({});
  });

  it('defaults the list size to DEFAULT_LIST_SIZE', () => {
    expect(DEFAULT_LIST_SIZE).toBe(10);
    const model = new CostModel(sdl('type Query { list: [Query] @tokenBucket(name: "api") a: Int @tokenBucket(name: "a", cost: 1) }'));
    // api: 10 × (Query 1 + a 0) = 10; a: 1 token in each of 10 items
    expect(costOf(model, '{ list { a } }')).toEqual({ api: 10, a: 10 });
  });
});

describe('code-first schemas', () => {
  it('reads directives from extensions, with or without a declaration', () => {
    const Item = new GraphQLObjectType({
      name: 'Item',
      fields: { id: { type: GraphQLID }, name: { type: GraphQLString } },
    });
    const Query = new GraphQLObjectType({
      name: 'Query',
      extensions: { directives: { tokenBucket: { name: 'api' } } },
      fields: {
        items: {
          type: new GraphQLList(Item),
          args: { first: { type: GraphQLInt } },
          extensions: { directives: { tokenBucket: [{ name: 'items', cost: 3 }] } },
        },
        item: { type: Item },
      },
    });
    const model = new CostModel(new GraphQLSchema({ query: Query }));
    expect(model.annotations).toEqual([
      { coordinate: 'Query', bucket: 'api', cost: null },
      { coordinate: 'Query.items', bucket: 'items', cost: 3 },
    ]);
    // api: items 2 × (Item 1 + id 0) + item 1 = 3; items: its fixed 3
    expect(costOf(model, '{ items(first: 2) { id } item { name } }')).toEqual({ api: 3, items: 3 });
  });

  it('reads @cost and @listSize from extensions when declared', () => {
    const cost = new GraphQLDirective({
      name: 'cost',
      locations: [DirectiveLocation.FIELD_DEFINITION, DirectiveLocation.OBJECT],
      args: { weight: { type: new GraphQLNonNull(GraphQLFloat) } },
    });
    const listSize = new GraphQLDirective({
      name: 'listSize',
      locations: [DirectiveLocation.FIELD_DEFINITION],
      args: { assumedSize: { type: GraphQLInt }, slicingArguments: { type: new GraphQLList(new GraphQLNonNull(GraphQLString)) } },
    });
    const Item: GraphQLObjectType = new GraphQLObjectType({
      name: 'Item',
      extensions: { directives: { cost: { weight: 2 } } },
      fields: () => ({ id: { type: GraphQLID }, owner: { type: Item } }),
    });
    const Query = new GraphQLObjectType({
      name: 'Query',
      fields: {
        items: {
          type: new GraphQLList(Item),
          args: { take: { type: GraphQLInt } },
          extensions: { directives: { tokenBucket: [{ name: 'api' }], listSize: { slicingArguments: ['take'], assumedSize: 4 } } },
        },
        heavy: {
          type: GraphQLInt,
          extensions: { directives: { tokenBucket: { name: 'api' }, cost: { weight: 1.5 } } },
        },
      },
    });
    const model = new CostModel(new GraphQLSchema({ query: Query, directives: [...specifiedDirectives, cost, listSize] }));
    // items: 3 × (Item's weight 2 + owner 2) = 12
    expect(costOf(model, '{ items(take: 3) { owner { id } } }')).toEqual({ api: 12 });
    // items at its assumed size: 4 × (2 + 2) = 16, heavy 1.5: 17.5, rounded up
    expect(costOf(model, '{ items { owner { id } } heavy }')).toEqual({ api: 18 });
  });
});

describe('start-up errors', () => {
  it('rejects a negative or fractional fixed cost, naming the coordinate', () => {
    expect(() => new CostModel(sdl('type Query { a: Int @tokenBucket(name: "api", cost: -1) }'))).toThrow(
      /@tokenBucket on Query\.a: cost must be a non-negative integer/,
    );
    expect(() => new CostModel(codeFirst({ tokenBucket: { name: 'api', cost: 1.5 } }))).toThrow(/Query\.field: cost/);
    expect(() => new CostModel(codeFirst({ tokenBucket: { name: 'api', cost: '3' } }))).toThrow(/Query\.field: cost/);
    expect(() => new CostModel(codeFirst({ tokenBucket: { name: 'api', cost: Number.POSITIVE_INFINITY } }))).toThrow(/Query\.field/);
  });

  it('rejects a missing or empty bucket name', () => {
    expect(() => new CostModel(codeFirst({ tokenBucket: { cost: 1 } }))).toThrow(/@tokenBucket on Query\.field: name/);
    expect(() => new CostModel(codeFirst({ tokenBucket: { name: '' } }))).toThrow(/@tokenBucket on Query\.field: name/);
  });

  it('rejects one bucket twice on one coordinate with different costs', () => {
    expect(
      () => new CostModel(sdl('type Query { a: Int @tokenBucket(name: "api", cost: 1) @tokenBucket(name: "api", cost: 2) }')),
    ).toThrow(/Query\.a: bucket "api" appears twice/);
  });

  it('rejects a @cost weight that is not a finite non-negative number', () => {
    const decl = 'directive @cost(weight: String!) on FIELD_DEFINITION | OBJECT | SCALAR | ENUM';
    for (const weight of ['"abc"', '"-1"', '""', '"Infinity"']) {
      expect(() => new CostModel(sdl(`${decl}\ntype Query { a: Int @cost(weight: ${weight}) }`))).toThrow(
        /@cost on Query\.a: weight must be a finite non-negative number/,
      );
    }
    expect(() => new CostModel(sdl(`${decl}\ntype Query { a: Thing }\ntype Thing @cost(weight: "x") { b: Int }`))).toThrow(
      /@cost on Thing: weight/,
    );
  });

  it('rejects malformed @listSize arguments', () => {
    const decl = 'directive @listSize(assumedSize: Int, slicingArguments: [String!], sizedFields: [String!]) on FIELD_DEFINITION';
    expect(() => new CostModel(sdl(`${decl}\ntype Query { a: [Int] @listSize(assumedSize: -1) }`))).toThrow(
      /@listSize on Query\.a: assumedSize/,
    );
    expect(() => new CostModel(sdl(`${decl}\ntype Query { a(first: Int): [Int] @listSize(slicingArguments: ["limit"]) }`))).toThrow(
      /@listSize on Query\.a: slicing argument "limit"/,
    );
    expect(
      () => new CostModel(sdl(`${decl}\ntype Query { a(first: Int): Conn @listSize(sizedFields: ["edge"]) }\ntype Conn { edges: [Int] }`)),
    ).toThrow(/@listSize on Query\.a: sized field "edge" is not a field of Conn/);
  });

  it('rejects a bad defaultListSize', () => {
    const schema = sdl('type Query { a: Int }');
    for (const defaultListSize of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => new CostModel(schema, { defaultListSize })).toThrow(RangeError);
    }
    expect(() => new CostModel(schema, { defaultListSize: 0 })).not.toThrow();
  });

  it('rejects something that is not a schema', () => {
    expect(() => new CostModel({} as GraphQLSchema)).toThrow(/schema/i);
  });
});
