// A schema for hostile operations whose resolvers honour every size the cost
// model assumes: a list field returns exactly as many items as the model
// charges for (its largest usable slicing argument, fractions rounded up,
// BigInts and numeric strings by value, else `@listSize(assumedSize:)`, else
// the default list size; every inner level of a list of lists the default
// list size), every object field returns an object. So the values a request
// produces, each weighed as the model weighs it, are the most that honest
// resolvers could do for what the limiter charged.
import { makeExecutableSchema } from '@graphql-tools/schema';
import { GraphQLScalarType, Kind } from 'graphql';
import type { GraphQLSchema } from 'graphql';
import { tokenBucketDirectiveTypeDefs } from '../../../src/index.js';

/** `defaultListSize` of the hostile server's plugin and of the test's CostModel. */
export const HOSTILE_DEFAULT_LIST_SIZE = 3;
/**
 * The API's page size limit: resolvers return at most this many items. Real
 * APIs need one: under the IBM defaults a scalar weighs 0, so a list of
 * scalars costs its field's weight (1) whatever its size. The cap cannot hide
 * an under-count: it only trims lists the model already priced larger.
 */
export const MAX_LIST = 100;
export const API_CAPACITY = 10_000;
export const SEARCH_CAPACITY = 1_000;

export const hostileTypeDefs = `${tokenBucketDirectiveTypeDefs}
directive @listSize(assumedSize: Int, slicingArguments: [String!], sizedFields: [String!], requireOneSlicingArgument: Boolean = true) on FIELD_DEFINITION
directive @cost(weight: String!) on ARGUMENT_DEFINITION | ENUM | FIELD_DEFINITION | INPUT_FIELD_DEFINITION | OBJECT | SCALAR

scalar BigInt
input Nested { inner: Nested n: Int }

type Query @tokenBucket(name: "api") {
  items(first: Int, last: Int): [Item!]!
  item(id: ID): Item
  search(term: String, first: Int = 2): [Item!]! @tokenBucket(name: "search", cost: 2)
  nodes(first: Int): [Node!]!
  page(first: Int = 4): Page @listSize(slicingArguments: ["first"], sizedFields: ["items"])
  echo(text: String): String
  matrix(first: Int): [[Item!]!]!
  byFloat(first: Float): [Item!]!
  byBig(first: BigInt): [Item!]!
  byString(first: String): [Item!]!
  scores(first: Int): [Int!]! @cost(weight: "2")
  nested(input: Nested): Int
}

type Mutation @tokenBucket(name: "api") {
  touch(first: Int): [Item!]! @tokenBucket(name: "search", cost: 1)
}

interface Node {
  id: ID!
  children(first: Int): [Node!]!
}

type Item implements Node {
  id: ID!
  name: String
  children(first: Int): [Node!]!
  tags(first: Int): [Tag!]! @listSize(assumedSize: 2)
  owner: Owner!
}

type Tag implements Node {
  id: ID!
  label: String
  children(first: Int): [Node!]!
}

union Owner = Item | Tag

type Page {
  items: [Item!]!
  total: Int
}
`;

/** Weights the schema gives with `@cost`; any other field weighs 1 when composite, 0 when not. */
export const HOSTILE_WEIGHTS: Readonly<Record<string, number>> = { 'Query.scores': 2 };

interface Entity {
  kind: 'Item' | 'Tag';
  id: string;
}

/**
 * The size a resolver reads from its arguments: the largest number >= 0
 * among `values` (a fraction rounded up, a BigInt or a numeric string by
 * value), else `assumed`; at most MAX_LIST.
 */
export function honouredSize(values: readonly unknown[], assumed: number): number {
  let size: number | null = null;
  for (const value of values) {
    const number = typeof value === 'bigint' ? Number(value) : typeof value === 'string' && value.trim() !== '' ? Number(value) : value;
    if (typeof number === 'number' && number >= 0 && (size === null || Math.ceil(number) > size)) size = Math.ceil(number);
  }
  return Math.min(size ?? assumed, MAX_LIST);
}

/** A BigInt scalar as servers write one: literals and variables become `bigint`s. */
const BigIntScalar = new GraphQLScalarType({
  name: 'BigInt',
  parseValue: (value) => BigInt(value as string),
  parseLiteral: (ast) => (ast.kind === Kind.INT || ast.kind === Kind.STRING ? BigInt(ast.value) : undefined),
  serialize: (value) => String(value),
});

let serial = 0;
const entity = (kind: Entity['kind']): Entity => ({ kind, id: String((serial += 1)) });
const items = (n: number): Entity[] => Array.from({ length: n }, () => entity('Item'));
const mixed = (n: number): Entity[] => Array.from({ length: n }, (_, i) => entity(i % 2 === 0 ? 'Item' : 'Tag'));

interface SizeArgs {
  first?: unknown;
  last?: unknown;
}

export const hostileResolvers = {
  BigInt: BigIntScalar,
  Query: {
    items: (_: unknown, { first, last }: SizeArgs) => items(honouredSize([first, last], HOSTILE_DEFAULT_LIST_SIZE)),
    item: () => entity('Item'),
    search: (_: unknown, { first }: SizeArgs) => items(honouredSize([first], HOSTILE_DEFAULT_LIST_SIZE)),
    nodes: (_: unknown, { first }: SizeArgs) => mixed(honouredSize([first], HOSTILE_DEFAULT_LIST_SIZE)),
    // The sized `items` of a page: the page's own size, else what `items` alone would be assumed.
    page: (_: unknown, { first }: SizeArgs) => ({ size: honouredSize([first], HOSTILE_DEFAULT_LIST_SIZE) }),
    echo: (_: unknown, { text }: { text?: string | null }) => text ?? null,
    matrix: (_: unknown, { first }: SizeArgs) => Array.from({ length: honouredSize([first], HOSTILE_DEFAULT_LIST_SIZE) }, () => items(HOSTILE_DEFAULT_LIST_SIZE)),
    byFloat: (_: unknown, { first }: SizeArgs) => items(honouredSize([first], HOSTILE_DEFAULT_LIST_SIZE)),
    byBig: (_: unknown, { first }: SizeArgs) => items(honouredSize([first], HOSTILE_DEFAULT_LIST_SIZE)),
    byString: (_: unknown, { first }: SizeArgs) => items(honouredSize([first], HOSTILE_DEFAULT_LIST_SIZE)),
    scores: (_: unknown, { first }: SizeArgs) => Array.from({ length: honouredSize([first], HOSTILE_DEFAULT_LIST_SIZE) }, (_v, i) => i),
    nested: () => 1,
  },
  Mutation: {
    touch: (_: unknown, { first }: SizeArgs) => items(honouredSize([first], HOSTILE_DEFAULT_LIST_SIZE)),
  },
  Node: {
    __resolveType: (node: Entity) => node.kind,
  },
  Owner: {
    __resolveType: (owner: Entity) => owner.kind,
  },
  Item: {
    name: (item: Entity) => `item ${item.id}`,
    children: (_: Entity, { first }: SizeArgs) => mixed(honouredSize([first], HOSTILE_DEFAULT_LIST_SIZE)),
    tags: (_: Entity, { first }: SizeArgs) => Array.from({ length: honouredSize([first], 2) }, () => entity('Tag')),
    owner: (item: Entity) => entity(Number(item.id) % 2 === 0 ? 'Item' : 'Tag'),
  },
  Tag: {
    label: (tag: Entity) => `tag ${tag.id}`,
    children: (_: Entity, { first }: SizeArgs) => mixed(honouredSize([first], HOSTILE_DEFAULT_LIST_SIZE)),
  },
  Page: {
    items: (page: { size: number }) => items(page.size),
    total: (page: { size: number }) => page.size,
  },
};

/** The hostile schema with its resolvers, for the server and for the test's own `CostModel`. */
export function hostileSchema(): GraphQLSchema {
  return makeExecutableSchema({ typeDefs: hostileTypeDefs, resolvers: hostileResolvers });
}
