import { buildSchema, getOperationAST, parse, validate } from 'graphql';
import type { GraphQLSchema } from 'graphql';
import { describe, expect, it } from 'vitest';
import { CostModel } from '../src/cost/cost-model.js';
import { tokenBucketDirectiveTypeDefs } from '../src/directive.js';

const IBM_COST = `directive @cost(weight: String!) on ARGUMENT_DEFINITION | ENUM | FIELD_DEFINITION | INPUT_FIELD_DEFINITION | OBJECT | SCALAR`;
const LIST_SIZE = `directive @listSize(assumedSize: Int, slicingArguments: [String!], sizedFields: [String!], requireOneSlicingArgument: Boolean = true) on FIELD_DEFINITION`;

function schemaOf(sdl: string): GraphQLSchema {
  return buildSchema(`${tokenBucketDirectiveTypeDefs}\n${sdl}`);
}

function pricer(schema: GraphQLSchema, defaultListSize?: number, chargeIntrospection?: boolean) {
  const model = new CostModel(schema, { defaultListSize, chargeIntrospection });
  return (query: string, variables?: Record<string, unknown>): Record<string, number> => {
    const document = parse(query);
    expect(validate(schema, document)).toEqual([]);
    const operation = getOperationAST(document);
    if (operation == null) throw new Error('no operation');
    return Object.fromEntries(model.costOf(document, operation, variables));
  };
}

describe('complexity mode (no fixed cost)', () => {
  const costOf = pricer(
    schemaOf(`
      type Query {
        search(first: Int): [Post] @tokenBucket(name: "api")
        post: Post @tokenBucket(name: "api")
        count: Int @tokenBucket(name: "api")
        status: Status @tokenBucket(name: "api")
      }
      type Post { id: ID! title: String author: User comments(first: Int): [Comment] }
      type User { name: String }
      type Comment { text: String author: User }
      enum Status { UP DOWN }
    `),
  );

  it('weighs scalar and enum fields 0 and object fields 1', () => {
    expect(costOf('{ count }')).toEqual({ api: 0 });
    expect(costOf('{ status }')).toEqual({ api: 0 });
    expect(costOf('{ post { title } }')).toEqual({ api: 1 });
    expect(costOf('{ post { author { name } } }')).toEqual({ api: 2 });
  });

  it('charges the weight plus the list size times the sub-selection', () => {
    expect(costOf('{ search(first: 5) { title author { name } } }')).toEqual({ api: 6 });
    expect(costOf('{ search(first: 2) { comments(first: 3) { author { name } } } }')).toEqual({ api: 9 });
    expect(costOf('query ($n: Int) { search(first: $n) { author { name } } }', { n: 4 })).toEqual({ api: 5 });
  });

  it('sums every root field, counting aliases and repeated fragments', () => {
    expect(costOf('{ a: post { id } b: post { id } ...P ...P } fragment P on Query { post { author { name } } }')).toEqual({
      api: 6,
    });
  });

  it('assumes defaultListSize for an unsized list', () => {
    expect(costOf('{ search { author { name } } }')).toEqual({ api: 11 });
    expect(pricer(schemaOf('type Query { list: [Query] @tokenBucket(name: "api") id: ID }'), 3)('{ list { id } }')).toEqual({
      api: 1,
    });
  });
});

describe('@cost weights', () => {
  const costOf = pricer(
    schemaOf(`
      ${IBM_COST}
      ${LIST_SIZE}
      type Query {
        expensive: Int @tokenBucket(name: "api") @cost(weight: "2.5")
        post: Post @tokenBucket(name: "api")
        money: Money @tokenBucket(name: "api")
        cheapPost: Post @tokenBucket(name: "api") @cost(weight: "0")
      }
      type Post @cost(weight: "3") { id: ID! title: String @cost(weight: "0.5") }
      scalar Money @cost(weight: "4")
    `),
  );

  it('reads String weights the IBM way and rounds the total up once', () => {
    expect(costOf('{ expensive }')).toEqual({ api: 3 });
    expect(costOf('{ a: expensive b: expensive }')).toEqual({ api: 5 });
  });

  it("falls back to the return type's weight, for objects and scalars", () => {
    expect(costOf('{ post { id } }')).toEqual({ api: 3 });
    expect(costOf('{ post { title } }')).toEqual({ api: 4 });
    expect(costOf('{ money }')).toEqual({ api: 4 });
  });

  it("prefers the field's weight over its type's", () => {
    expect(costOf('{ cheapPost { id } }')).toEqual({ api: 0 });
  });

  it('reads Int and Float weights the Apollo way', () => {
    const ints = pricer(
      schemaOf(`
        directive @cost(weight: Int!) on FIELD_DEFINITION | OBJECT | SCALAR | ENUM | ARGUMENT_DEFINITION | INPUT_FIELD_DEFINITION
        type Query { a: Int @tokenBucket(name: "api") @cost(weight: 7) }
      `),
    );
    expect(ints('{ a }')).toEqual({ api: 7 });
    const floats = pricer(
      schemaOf(`
        directive @cost(weight: Float!) on FIELD_DEFINITION | OBJECT | SCALAR | ENUM | ARGUMENT_DEFINITION | INPUT_FIELD_DEFINITION
        type Query { a: Int @tokenBucket(name: "api") @cost(weight: 1.25) }
      `),
    );
    expect(floats('{ a }')).toEqual({ api: 2 });
    expect(floats('{ a b: a c: a d: a }')).toEqual({ api: 5 });
  });

  it('inherits @cost and @listSize from an interface field the type does not annotate', () => {
    const costOf = pricer(
      schemaOf(`
        ${IBM_COST}
        ${LIST_SIZE}
        type Query { feed: [Entry] @tokenBucket(name: "api") }
        interface Entry {
          score: Int @cost(weight: "4")
          related(limit: Int): [Entry] @listSize(slicingArguments: ["limit"], assumedSize: 2)
        }
        type Post implements Entry { score: Int related(limit: Int): [Entry] }
        type Note implements Entry { score: Int @cost(weight: "1") related(limit: Int): [Entry] @listSize(assumedSize: 1) }
      `),
      1,
    );
    // feed 1 + 1 × (related 1 + n × score 4): Post's related takes limit (3), Note's its own assumed size.
    expect(costOf('{ feed { related(limit: 3) { score } } }')).toEqual({ api: 14 });
    expect(costOf('{ feed { related { score } } }')).toEqual({ api: 10 });
  });

  it('ignores @cost and @listSize when the schema does not declare them', () => {
    const schema = buildSchema(
      `${tokenBucketDirectiveTypeDefs}
      type Query { a: Int @tokenBucket(name: "api") @cost(weight: "9") list: [Query] @tokenBucket(name: "api") @listSize(assumedSize: 1) }`,
      { assumeValidSDL: true },
    );
    expect(pricer(schema)('{ a list { a } }')).toEqual({ api: 1 });
  });
});

describe('@listSize', () => {
  const costOf = pricer(
    schemaOf(`
      ${IBM_COST}
      ${LIST_SIZE}
      input Page { limit: Int }
      type Query {
        search(limit: Int, first: Int): [Post] @tokenBucket(name: "api") @listSize(slicingArguments: ["limit"])
        bounded(limit: Int, page: Int = 5): [Post] @tokenBucket(name: "api") @listSize(slicingArguments: ["limit", "page"])
        paged(page: Page): [Post] @tokenBucket(name: "api") @listSize(slicingArguments: ["page.limit"], assumedSize: 7)
        posts: [Post] @tokenBucket(name: "api") @listSize(assumedSize: 50)
        recent(first: Int): [Post] @tokenBucket(name: "api") @listSize(assumedSize: 2)
        connection(first: Int, after: String): PostConnection @tokenBucket(name: "api") @listSize(slicingArguments: ["first"], sizedFields: ["edges", "nodes"])
        assumedConnection: PostConnection @tokenBucket(name: "api") @listSize(assumedSize: 3, sizedFields: ["edges"])
        relay(first: Int, last: Int): PostConnection @tokenBucket(name: "api") @listSize(sizedFields: ["edges"])
      }
      type Post { id: ID! author: User }
      type User { name: String }
      type PostConnection { edges: [PostEdge] nodes: [Post] totalCount: Int pageInfo: PageInfo }
      type PostEdge { node: Post }
      type PageInfo { hasNextPage: Boolean }
    `),
  );

  it('sizes a list by its declared slicing arguments instead of first/last', () => {
    expect(costOf('{ search(limit: 2, first: 100) { author { name } } }')).toEqual({ api: 3 });
    expect(costOf('{ search(first: 100) { author { name } } }')).toEqual({ api: 11 });
  });

  it('takes the largest slicing argument, schema defaults included', () => {
    expect(costOf('{ bounded(limit: 2) { author { name } } }')).toEqual({ api: 6 });
    expect(costOf('{ bounded(limit: 8) { author { name } } }')).toEqual({ api: 9 });
  });

  it('reads a slicing argument inside an input object', () => {
    expect(costOf('{ paged(page: { limit: 4 }) { author { name } } }')).toEqual({ api: 5 });
    expect(costOf('query ($p: Page) { paged(page: $p) { author { name } } }', { p: { limit: 1 } })).toEqual({ api: 2 });
    expect(costOf('{ paged { author { name } } }')).toEqual({ api: 8 });
  });

  it('uses assumedSize when no slicing argument is usable', () => {
    expect(costOf('{ posts { author { name } } }')).toEqual({ api: 51 });
    expect(costOf('{ recent { author { name } } }')).toEqual({ api: 3 });
    expect(costOf('{ recent(first: -1) { author { name } } }')).toEqual({ api: 3 });
    expect(costOf('{ recent(first: 4) { author { name } } }')).toEqual({ api: 5 });
  });

  it("gives a connection's size to its sized fields, not to the connection", () => {
    // connection 1 + edges (1 + 4 × (node 1 + author 1)) + nodes (1 + 4 × author 1)
    expect(costOf('{ connection(first: 4) { totalCount edges { node { author { name } } } nodes { author { name } } } }')).toEqual({
      api: 15,
    });
    expect(costOf('{ connection(first: 4) { pageInfo { hasNextPage } } }')).toEqual({ api: 2 });
    expect(costOf('{ connection(first: 2) { ...E ...E } } fragment E on PostConnection { edges { node { id } } }')).toEqual({
      api: 7,
    });
    expect(costOf('{ assumedConnection { edges { node { id } } } }')).toEqual({ api: 5 });
  });

  it('falls back to first/last for a connection, then to the sized field itself', () => {
    expect(costOf('{ relay(last: 3) { edges { node { id } } } }')).toEqual({ api: 5 });
    expect(costOf('{ relay { edges { node { id } } } }')).toEqual({ api: 12 });
    expect(costOf('{ connection { edges { node { id } } } }')).toEqual({ api: 12 });
  });
});

describe('type-level @tokenBucket', () => {
  const schema = schemaOf(`
      type Query @tokenBucket(name: "api") {
        posts(first: Int): [Post]
        search(first: Int): [Post] @tokenBucket(name: "api", cost: 100)
        stats: Stats @tokenBucket(name: "stats", cost: 1)
        count: Int
      }
      type Post { title: String author: User }
      type User @tokenBucket(name: "users", cost: 2) { name: String friends(first: Int): [User] }
      type Stats { count: Int }
    `);
  const costOf = pricer(schema);

  it("charges an operation's whole complexity", () => {
    expect(costOf('{ posts(first: 3) { author { name } } }')).toEqual({ api: 4, users: 6 });
    expect(costOf('{ posts(first: 3) { title } count }')).toEqual({ api: 1 });
  });

  it('gives way to a field-level directive for the same bucket', () => {
    expect(costOf('{ search(first: 3) { author { name } } }')).toEqual({ api: 100, users: 6 });
  });

  it('adds to field-level directives of other buckets', () => {
    expect(costOf('{ stats { count } }')).toEqual({ api: 1, stats: 1 });
  });

  it("applies to the type's own fields, wherever the type appears", () => {
    // users: each author's name (2) and friends (2), plus each of the 2 friends' names (2 × 2)
    expect(costOf('{ posts(first: 1) { author { name friends(first: 2) { name } } } }')).toEqual({ api: 3, users: 8 });
  });

  it('charges introspection on the query type, by its complexity, unless told not to', () => {
    const introspection = '{ __schema { types { name fields { name } } } __type(name: "Post") { name } }';
    // __schema 1 + types (1 + 10 x fields 1) = 12, __type 1
    expect(costOf(introspection)).toEqual({ api: 13 });
    expect(pricer(schema, undefined, false)(introspection)).toEqual({});
    // __typename weighs nothing and carries no bucket
    expect(costOf('{ __typename }')).toEqual({});
    expect(costOf('{ posts(first: 2) { __typename title } __typename }')).toEqual({ api: 1 });
  });
});

describe('interfaces and unions', () => {
  const costOf = pricer(
    schemaOf(`
      type Query {
        node(id: ID!): Node @tokenBucket(name: "api")
        search(first: Int): [SearchResult] @tokenBucket(name: "api")
        feed(first: Int): [Node]
        priced(first: Int): [Priced]
      }
      interface Node { id: ID! @tokenBucket(name: "ids", cost: 1) }
      interface Priced @tokenBucket(name: "priced", cost: 2) { price: Int }
      type Cheap implements Node & Priced {
        id: ID!
        price: Int
        label: String
        a: Int @tokenBucket(name: "a", cost: 3)
      }
      type Costly implements Node {
        id: ID! @tokenBucket(name: "ids", cost: 5)
        friends(first: Int): [Costly] @tokenBucket(name: "friends", cost: 2)
        b: Int @tokenBucket(name: "b", cost: 4)
      }
      type Boxed implements Priced @tokenBucket(name: "priced", cost: 9) { price: Int @tokenBucket(name: "priced", cost: 1) }
      union SearchResult = Cheap | Costly
    `),
  );

  it('charges the most expensive possible type of an interface', () => {
    expect(costOf('{ node(id: 1) { __typename } }')).toEqual({ api: 1 });
    expect(costOf('{ node(id: 1) { ... on Costly { friends(first: 3) { b } } } }')).toEqual({ api: 2, friends: 2, b: 12 });
  });

  it('charges the most expensive possible type of a union', () => {
    const query = '{ search(first: 2) { ... on Cheap { id } ... on Costly { friends(first: 5) { friends(first: 5) { b } } } } }';
    // Costly: friends 1 + 5 × (1 + 5 × 0) = 6, so api = 1 + 2 × 6; friends per Costly = 2 + 5 × 2.
    expect(costOf(query)).toEqual({ api: 13, friends: 24, ids: 2, b: 200 });
  });

  it('takes the maximum per bucket, even from different possible types', () => {
    expect(costOf('{ feed(first: 2) { ... on Cheap { a } ... on Costly { b } } }')).toEqual({ a: 6, b: 8 });
  });

  it("inherits an interface field's directive, unless the type's field sets the same bucket", () => {
    expect(costOf('{ feed(first: 2) { ... on Cheap { id } } }')).toEqual({ ids: 2 });
    expect(costOf('{ feed(first: 2) { ... on Costly { id } } }')).toEqual({ ids: 10 });
    expect(costOf('{ feed(first: 2) { id } }')).toEqual({ ids: 10 });
  });

  it("applies an interface's type-level directive to the fields it declares", () => {
    expect(costOf('{ feed(first: 3) { ... on Priced { price } } }')).toEqual({ priced: 6 });
    expect(costOf('{ feed(first: 3) { ... on Cheap { label } } }')).toEqual({});
  });

  it("lets a type's own field directive win over type-level ones for the same bucket", () => {
    expect(costOf('{ priced(first: 3) { ... on Boxed { price } } }')).toEqual({ priced: 3 });
    expect(costOf('{ priced(first: 3) { price } }')).toEqual({ priced: 6 });
  });
});
