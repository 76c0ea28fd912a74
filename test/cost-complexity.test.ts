// SPEC §2, "Complexity": one test per rule, the arithmetic next to each number.
import { buildSchema, execute, getIntrospectionQuery, getOperationAST, parse } from 'graphql';
import type { GraphQLObjectType } from 'graphql';
import { describe, expect, it } from 'vitest';
import { tokenBucketDirectiveTypeDefs } from '../src/directive.js';
import { costSchema, pricer } from './support/graphql.js';

describe('cost(field) = count × (weight + cost(sub-selections)) + cost(arguments)', () => {
  const { costOf } = pricer(
    costSchema(`
      type Query @tokenBucket(name: "api") {
        post: Post
        posts(first: Int): [Post]
        count: Int
        status: Status
      }
      type Post { id: ID! title: String author: User comments(first: Int): [Comment] }
      type User { name: String }
      type Comment { text: String author: User }
      enum Status { UP DOWN }
    `),
  );

  it('weighs a scalar or enum 0 and an object 1', () => {
    expect(costOf('{ count }')).toEqual({ api: 0 });
    expect(costOf('{ status }')).toEqual({ api: 0 });
    expect(costOf('{ post { title } }')).toEqual({ api: 1 }); // 1 × (1 + 0)
    expect(costOf('{ post { author { name } } }')).toEqual({ api: 2 }); // 1 × (1 + 1 × (1 + 0))
  });

  it("multiplies a list's own weight by its size, with its sub-selections", () => {
    // posts: 5 × (Post 1 + title 0 + author 1 × (1 + 0)) = 10
    expect(costOf('{ posts(first: 5) { title author { name } } }')).toEqual({ api: 10 });
    // posts: 2 × (1 + comments 3 × (1 + author 1)) = 2 × 7 = 14
    expect(costOf('{ posts(first: 2) { comments(first: 3) { author { name } } } }')).toEqual({ api: 14 });
    // A list of size 0 costs nothing.
    expect(costOf('{ posts(first: 0) { author { name } } }')).toEqual({ api: 0 });
  });

  it('sums every root field, counting aliases, and a repeated fragment once', () => {
    // a 1, b 1, and P (post: 1 × (1 + author 1) = 2) once: graphql-js collects ...P once
    expect(costOf('{ a: post { id } b: post { id } ...P ...P } fragment P on Query { post { author { name } } }')).toEqual({
      api: 4,
    });
  });

  it('weighs __typename 0', () => {
    expect(costOf('{ posts(first: 3) { __typename } __typename }')).toEqual({ api: 3 }); // 3 × (1 + 0) + 0
  });
});

describe('weights', () => {
  const { costOf } = pricer(
    costSchema(`
      type Query @tokenBucket(name: "api") {
        expensive: Int @cost(weight: "2.5")
        post: Post
        cheapPost: Post @cost(weight: "0")
        money: Money
        tags(first: Int): [String] @cost(weight: "1")
        blobs(first: Int): [Blob]
        level: Level
      }
      type Post @cost(weight: "3") { id: ID! title: String @cost(weight: "0.5") }
      scalar Money @cost(weight: "4")
      scalar Blob @cost(weight: "5")
      enum Level @cost(weight: "6") { LOW HIGH }
    `),
  );

  it('reads String weights the IBM way and rounds the total up once', () => {
    expect(costOf('{ expensive }')).toEqual({ api: 3 }); // 2.5, rounded up
    expect(costOf('{ a: expensive b: expensive }')).toEqual({ api: 5 }); // 2.5 + 2.5
  });

  it("falls back to the named type's weight: object, scalar and enum", () => {
    expect(costOf('{ post { id } }')).toEqual({ api: 3 }); // Post weighs 3
    expect(costOf('{ post { title } }')).toEqual({ api: 4 }); // 3 + 0.5 = 3.5, rounded up
    expect(costOf('{ money }')).toEqual({ api: 4 });
    expect(costOf('{ level }')).toEqual({ api: 6 });
  });

  it("prefers the field's weight over its type's", () => {
    expect(costOf('{ cheapPost { id } }')).toEqual({ api: 0 });
  });

  it('multiplies a list of weighted scalars by its size', () => {
    expect(costOf('{ tags(first: 1000000) }')).toEqual({ api: 1_000_000 }); // 1,000,000 × 1
    expect(costOf('{ blobs(first: 1000000) }')).toEqual({ api: 5_000_000 }); // 1,000,000 × Blob's 5
  });

  it('reads Int and Float weights the Apollo way', () => {
    const ints = pricer(
      buildSchema(`${tokenBucketDirectiveTypeDefs}
        directive @cost(weight: Int!) on FIELD_DEFINITION | OBJECT | SCALAR | ENUM | ARGUMENT_DEFINITION | INPUT_FIELD_DEFINITION
        type Query { a: Int @tokenBucket(name: "api") @cost(weight: 7) }`),
    );
    expect(ints.costOf('{ a }')).toEqual({ api: 7 });
    const floats = pricer(
      buildSchema(`${tokenBucketDirectiveTypeDefs}
        directive @cost(weight: Float!) on FIELD_DEFINITION | OBJECT | SCALAR | ENUM | ARGUMENT_DEFINITION | INPUT_FIELD_DEFINITION
        type Query { a: Int @tokenBucket(name: "api") @cost(weight: 1.25) }`),
    );
    expect(floats.costOf('{ a }')).toEqual({ api: 2 }); // 1.25, rounded up
    expect(floats.costOf('{ a b: a c: a d: a }')).toEqual({ api: 5 }); // 4 × 1.25
  });

  it('inherits @cost and @listSize from an interface field the type does not annotate', () => {
    const { costOf } = pricer(
      costSchema(`
        type Query { feed: [Entry] @tokenBucket(name: "api") }
        interface Entry {
          score: Int @cost(weight: "4")
          related(limit: Int): [Entry] @listSize(slicingArguments: ["limit"], assumedSize: 2)
        }
        type Post implements Entry { score: Int related(limit: Int): [Entry] }
        type Note implements Entry { score: Int @cost(weight: "1") related(limit: Int): [Entry] @listSize(assumedSize: 1) }
      `),
      { defaultListSize: 1 },
    );
    // feed: 1 × (1 + related), the most expensive type's related:
    // Post 3 × (1 + score 4) = 15 (Note: its own assumed size 1 × (1 + 1) = 2) → 16
    expect(costOf('{ feed { related(limit: 3) { score } } }')).toEqual({ api: 16 });
    // Post: assumed 2 × (1 + 4) = 10 → 11
    expect(costOf('{ feed { related { score } } }')).toEqual({ api: 11 });
  });
});

describe("a mutation's base cost", () => {
  const { costOf } = pricer(
    costSchema(`
      type Query { a: Int }
      type Mutation @tokenBucket(name: "api") {
        touch: Int
        create(first: Int): [Item] @tokenBucket(name: "writes", cost: 1)
        flag: Int @tokenBucket(name: "flags")
      }
      type Item { id: ID }
    `),
  );

  it('adds 10 to the complexity a type-level directive on the mutation type charges', () => {
    expect(costOf('mutation { touch }')).toEqual({ api: 10 }); // 10 + 0
    // 10 + create 4 × (1 + 0)
    expect(costOf('mutation { create(first: 4) { id } }')).toEqual({ api: 14, writes: 1 });
    // Once per operation, not per root field.
    expect(costOf('mutation { a: touch b: touch }')).toEqual({ api: 10 });
  });

  it('is not part of a fixed cost or a field-level directive', () => {
    // flags: flag's own complexity 0; api: 10 + flag 0
    expect(costOf('mutation { flag }')).toEqual({ api: 10, flags: 0 });
  });

  it('is charged even when every root field is skipped', () => {
    expect(costOf('mutation { touch @skip(if: true) }')).toEqual({ api: 10 });
  });
});

describe('abstract types: the most expensive possible type', () => {
  const { costOf } = pricer(
    costSchema(`
      type Query {
        node(id: ID!): Node @tokenBucket(name: "api")
        search(first: Int): [SearchResult] @tokenBucket(name: "api")
        feed(first: Int): [Node]
      }
      interface Node { id: ID! @tokenBucket(name: "ids", cost: 1) }
      type Cheap implements Node { id: ID! label: String a: Int @tokenBucket(name: "a", cost: 3) }
      type Costly implements Node {
        id: ID! @tokenBucket(name: "ids", cost: 5)
        friends(first: Int): [Costly] @tokenBucket(name: "friends", cost: 2)
        b: Int @tokenBucket(name: "b", cost: 4)
      }
      union SearchResult = Cheap | Costly
    `),
  );

  it('charges an interface as its most expensive possible type', () => {
    expect(costOf('{ node(id: 1) { __typename } }')).toEqual({ api: 1 }); // 1 × (1 + 0)
    // api: 1 × (1 + friends 3 × (1 + 0)) = 4; friends: 2 once; b: 3 × 4 = 12
    expect(costOf('{ node(id: 1) { ... on Costly { friends(first: 3) { b } } } }')).toEqual({ api: 4, friends: 2, b: 12 });
  });

  it('charges a union as its most expensive possible type, not the sum of its fragments', () => {
    const query = '{ search(first: 2) { ... on Cheap { id } ... on Costly { friends(first: 5) { friends(first: 5) { b } } } } }';
    // Costly: friends 5 × (1 + friends 5 × (1 + 0)) = 30, so api = 2 × (1 + 30) = 62 (Cheap: 2 × 1);
    // friends per Costly: 2 + 5 × 2 = 12, × 2 = 24; ids: Cheap's id, 1 per item, 2;
    // b: 4 × 5 × 5 per Costly, × 2 = 200
    expect(costOf(query)).toEqual({ api: 62, friends: 24, ids: 2, b: 200 });
  });

  it('takes the maximum per bucket, even from different possible types', () => {
    // a: 2 × 3 (Cheap), b: 2 × 4 (Costly)
    expect(costOf('{ feed(first: 2) { ... on Cheap { a } ... on Costly { b } } }')).toEqual({ a: 6, b: 8 });
  });

  it('finds the most expensive type among many that price the interface alike', () => {
    // 50 types alike, one whose id weighs 7, one whose type-level directive charges "t", one with a costly field of its own.
    const alike = Array.from({ length: 50 }, (_, i) => `type A${i} implements Named { id: ID name: String x${i}: Int }`);
    const { costOf: price } = pricer(
      costSchema(`
        type Query @tokenBucket(name: "api") { named(first: Int): [Named] }
        interface Named { id: ID name: String }
        ${alike.join('\n')}
        type Heavy implements Named { id: ID @cost(weight: "7") name: String }
        type Charged implements Named @tokenBucket(name: "t", cost: 2) { id: ID name: String }
        type Deep implements Named { id: ID name: String items(first: Int): [Named] }
      `),
    );
    // api: 3 × (1 + Heavy's id 7); t: Charged's id and name, 2 each, 3 times
    expect(price('{ named(first: 3) { id name } }')).toEqual({ api: 24, t: 12 });
    // Deep's items: 3 × (1 + items 4 × (1 + Heavy's 7)) = 99 beats Heavy's 3 × (1 + 7) = 24;
    // t: Deep's items, each a Charged id at most: 3 × 4 × 2 = 24 beats Charged's own 3 × 2
    expect(price('{ named(first: 3) { id ... on Deep { items(first: 4) { id } } } }')).toEqual({ api: 99, t: 24 });
    // A fragment on one of the alike types prices that type on its own: 3 × (1 + x7 0 + Named 1 × …)
    expect(price('{ named(first: 3) { ...on A7 { x7 } name } }')).toEqual({ api: 3, t: 6 });
  });
});

describe('type-level and interface-level @tokenBucket', () => {
  const { costOf } = pricer(
    costSchema(`
      type Query @tokenBucket(name: "api") {
        posts(first: Int): [Post]
        search(first: Int): [Post] @tokenBucket(name: "api", cost: 100)
        stats: Stats @tokenBucket(name: "stats", cost: 1)
        books(first: Int): [Book]
        nodes(first: Int): [Node]
        count: Int
      }
      type Post { title: String author: User }
      type User @tokenBucket(name: "users", cost: 2) { name: String friends(first: Int): [User] }
      type Stats { count: Int }
      type Book @tokenBucket(name: "book", cost: 1) { title: String }
      interface Node @tokenBucket(name: "node", cost: 1) { id: ID! }
      type Doc implements Node { id: ID! secret: String }
      type Image implements Node { id: ID! url: String }
    `),
  );

  it("charges an operation's whole complexity", () => {
    // api: posts 3 × (1 + author 1) = 6; users: name, 2 per author, 3 authors
    expect(costOf('{ posts(first: 3) { author { name } } }')).toEqual({ api: 6, users: 6 });
    expect(costOf('{ posts(first: 3) { title } count }')).toEqual({ api: 3 }); // 3 × (1 + 0) + 0
  });

  it('gives way to a field-level directive for the same bucket', () => {
    expect(costOf('{ search(first: 3) { author { name } } }')).toEqual({ api: 100, users: 6 });
  });

  it('adds to field-level directives of other buckets', () => {
    expect(costOf('{ stats { count } }')).toEqual({ api: 1, stats: 1 });
  });

  it("applies to the type's own fields, wherever the type appears", () => {
    // api: posts 1 × (1 + author (1 + friends 2 × 1)) = 4;
    // users: name 2 + friends 2 + 2 friends' names × 2 = 8
    expect(costOf('{ posts(first: 1) { author { name friends(first: 2) { name } } } }')).toEqual({ api: 4, users: 8 });
  });

  it("charges __typename on an object type like the type's other fields", () => {
    // book: 1 per __typename, 4 books; api: books 4 × (1 + 0)
    expect(costOf('{ books(first: 4) { __typename } }')).toEqual({ api: 4, book: 4 });
    // api: Query's __typename weighs 0
    expect(costOf('{ __typename }')).toEqual({ api: 0 });
  });

  it("applies an interface's directive to its implementing types' fields, through fragments too", () => {
    // node: secret, 1 per Doc among 3 nodes; api: 3 × (1 + 0)
    expect(costOf('{ nodes(first: 3) { ... on Doc { secret } } }')).toEqual({ api: 3, node: 3 });
    expect(costOf('{ nodes(first: 3) { ...D } } fragment D on Doc { secret }')).toEqual({ api: 3, node: 3 });
    expect(costOf('{ nodes(first: 3) { __typename } }')).toEqual({ api: 3, node: 3 });
    expect(costOf('{ nodes(first: 3) { id ... on Image { url } } }')).toEqual({ api: 3, node: 6 }); // Image: id + url
  });

  it('charges introspection on the query type, by its complexity, unless told not to', () => {
    const schema = costSchema('type Query @tokenBucket(name: "api") { a: Int }');
    const introspection = '{ __schema { types { name fields { name } } } __type(name: "Query") { name } }';
    // Introspection's lists are as long as the schema makes them, at most:
    // 12 types (Query, Int, String, Boolean and 8 introspection types), and
    // 11 fields on the type with the most (__Type).
    // __schema 1 × (1 + types 12 × (1 + fields 11 × (1 + 0))) = 145, __type 1
    expect(Object.keys(schema.getTypeMap())).toHaveLength(12);
    expect(Object.keys((schema.getType('__Type') as GraphQLObjectType).getFields())).toHaveLength(11);
    expect(pricer(schema).costOf(introspection)).toEqual({ api: 146 });
    expect(pricer(schema, { chargeIntrospection: false }).costOf(introspection)).toEqual({});
  });

  it('charges introspection at least what it returns, however large the schema', async () => {
    // 60 types of 15 fields with 2 arguments each: far past the default list size.
    const types = Array.from({ length: 60 }, (_, i) =>
      `type T${i} { ${Array.from({ length: 15 }, (_, j) => `f${j}(a: Int, b: String): T${(i + 1) % 60}`).join(' ')} }`,
    );
    const schema = costSchema(`type Query @tokenBucket(name: "api") { t: T0 }\n${types.join('\n')}`);
    const { model } = pricer(schema);
    const objects = (value: unknown): number =>
      Array.isArray(value)
        ? value.reduce((n: number, v) => n + objects(v), 0)
        : value !== null && typeof value === 'object'
          ? 1 + Object.values(value).reduce((n: number, v) => n + objects(v), 0)
          : 0;
    for (const query of [
      getIntrospectionQuery(),
      '{ __schema { types { fields { args { type { name } } } } } }',
      '{ __schema { types { fields { type { fields { type { fields { name } } } } } } } }',
      '{ __type(name: "T0") { fields { type { fields { type { interfaces { name } possibleTypes { name } } } } } } }',
    ]) {
      const document = parse(query);
      const result = await execute({ schema, document });
      expect(result.errors).toBeUndefined();
      // Every object returned weighs 1 (`data` itself is none).
      expect(model.costOf(document, getOperationAST(document)!).get('api'), query).toBeGreaterThanOrEqual(objects(result.data) - 1);
    }
  });
});

describe('directive names', () => {
  const body = `
    type Query @tokenBucket(name: "api") {
      a: Int @weight(weight: 7)
      list(take: Int): [Item] @size(slicingArguments: ["take"])
      items(first: Int): [Item]
    }
    type Item { id: ID }
  `;
  const declarations = `
    directive @link(url: String, as: String, for: link__Purpose, import: [link__Import]) repeatable on SCHEMA
    scalar link__Import
    enum link__Purpose { SECURITY EXECUTION }
    directive @weight(weight: Int!) on FIELD_DEFINITION | OBJECT | SCALAR | ENUM | ARGUMENT_DEFINITION | INPUT_FIELD_DEFINITION
    directive @size(assumedSize: Int, slicingArguments: [String!], sizedFields: [String!], requireOneSlicingArgument: Boolean = false) on FIELD_DEFINITION
  `;

  it('reads @cost and @listSize under the names a cost spec @link imports them as', () => {
    const schema = buildSchema(`${tokenBucketDirectiveTypeDefs}
      extend schema @link(url: "https://specs.apollo.dev/cost/v0.1", import: [{ name: "@cost", as: "@weight" }, { name: "@listSize", as: "@size" }])
      ${declarations} ${body}`);
    const { costOf } = pricer(schema);
    expect(costOf('{ a }')).toEqual({ api: 7 });
    expect(costOf('{ list(take: 3) { id } }')).toEqual({ api: 3 }); // 3 × (1 + 0)
  });

  it('reads @cost under its own name when the link imports only @listSize, and the namespace name otherwise', () => {
    const schema = buildSchema(`${tokenBucketDirectiveTypeDefs}
      extend schema @link(url: "https://specs.apollo.dev/cost/v0.1", import: ["@listSize"])
      ${declarations.replace('@weight(', '@cost(').replace('@size(', '@listSize(')}
      ${body.replace('@weight(', '@cost(').replace('@size(', '@listSize(')}`);
    expect(pricer(schema).costOf('{ a list(take: 3) { id } }')).toEqual({ api: 10 }); // 7 + 3
    const renamed = buildSchema(`${tokenBucketDirectiveTypeDefs}
      extend schema @link(url: "https://specs.apollo.dev/cost/v0.1", as: "price")
      ${declarations.replace('@weight(', '@price(').replace('@size(', '@price__listSize(')}
      ${body.replace('@weight(', '@price(').replace('@size(', '@price__listSize(')}`);
    expect(pricer(renamed).costOf('{ a list(take: 3) { id } }')).toEqual({ api: 10 });
  });

  it('reads them through an Apollo Federation link too', () => {
    const schema = buildSchema(`${tokenBucketDirectiveTypeDefs}
      extend schema @link(url: "https://specs.apollo.dev/federation/v2.9", import: ["@cost"])
      ${declarations.replace('@weight(', '@cost(').replace('@size(', '@federation__listSize(')}
      ${body.replace('@weight(', '@cost(').replace('@size(', '@federation__listSize(')}`);
    expect(pricer(schema).costOf('{ a list(take: 3) { id } }')).toEqual({ api: 10 });
  });

  it('reads @cost under its own name when a Federation link does not import it', () => {
    const schema = buildSchema(`${tokenBucketDirectiveTypeDefs}
      extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key"])
      ${declarations.replace('@weight(', '@cost(').replace('@size(', '@listSize(')}
      ${body.replace('@weight(', '@cost(').replace('@size(', '@listSize(')}`);
    expect(pricer(schema).costOf('{ a list(take: 3) { id } }')).toEqual({ api: 10 }); // 7 + 3
  });

  it('ignores a directive the link does not name', () => {
    // With the link, @weight is not the cost directive: a weighs 0; the list's size is the default 10.
    const schema = buildSchema(`${tokenBucketDirectiveTypeDefs}
      extend schema @link(url: "https://specs.apollo.dev/cost/v0.1", import: ["@listSize"])
      ${declarations} ${body}`);
    expect(pricer(schema).costOf('{ a list(take: 3) { id } }')).toEqual({ api: 10 });
  });
});

describe('which directive wins', () => {
  const { costOf } = pricer(
    costSchema(`
      type Query { feed(first: Int): [Node] priced(first: Int): [Priced] }
      interface Node { id: ID! @tokenBucket(name: "ids", cost: 1) }
      interface Priced @tokenBucket(name: "priced", cost: 2) { price: Int }
      type Cheap implements Node & Priced { id: ID! price: Int label: String }
      type Costly implements Node { id: ID! @tokenBucket(name: "ids", cost: 5) }
      type Boxed implements Priced @tokenBucket(name: "priced", cost: 9) { price: Int @tokenBucket(name: "priced", cost: 1) }
    `),
  );

  it("inherits an interface field's directive, unless the type's field sets the same bucket", () => {
    // ids: 2 × 1; priced: Cheap is a Priced, whose directive charges every Cheap field 2
    expect(costOf('{ feed(first: 2) { ... on Cheap { id } } }')).toEqual({ ids: 2, priced: 4 });
    expect(costOf('{ feed(first: 2) { ... on Costly { id } } }')).toEqual({ ids: 10 }); // 2 × 5
    expect(costOf('{ feed(first: 2) { id } }')).toEqual({ ids: 10, priced: 4 }); // 2 × max(1, 5); 2 × Cheap's 2
  });

  it('lets a field’s own directive win over type-level ones, and a type’s over its interfaces’', () => {
    expect(costOf('{ priced(first: 3) { ... on Boxed { price } } }')).toEqual({ priced: 3 }); // 3 × Boxed.price's 1
    expect(costOf('{ priced(first: 3) { price } }')).toEqual({ priced: 6 }); // 3 × max(Cheap 2, Boxed 1)
    expect(costOf('{ priced(first: 3) { ... on Boxed { __typename } } }')).toEqual({ priced: 27 }); // 3 × Boxed's 9
    // Cheap's own field, charged by its interface Priced: 3 × 2
    expect(costOf('{ feed(first: 3) { ... on Cheap { label } } }')).toEqual({ priced: 6 });
  });
});
