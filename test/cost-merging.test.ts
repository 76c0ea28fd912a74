// SPEC §2, "Merged fields": fields of one selection set sharing a response key
// run once (graphql-js CollectFields), so they are priced once, with their
// sub-selections merged, in the estimate, the actual cost and fixed costs.
import { buildSchema, execute, getOperationAST, parse } from 'graphql';
import { describe, expect, it } from 'vitest';
import { CostModel } from '../src/cost/cost-model.js';
import { tokenBucketDirectiveTypeDefs } from '../src/directive.js';
import { pricer } from './support/graphql.js';

const SDL = `${tokenBucketDirectiveTypeDefs}
  type Query @tokenBucket(name: "api") {
    viewer: User
    node(id: ID): Node
    search(first: Int): [Result]
    users(first: Int): [User] @tokenBucket(name: "users", cost: 2)
  }
  interface Node { id: ID }
  type User implements Node {
    id: ID
    name: String
    avatar: Image
    friends(first: Int): [User]
    posts(first: Int): [Post] @tokenBucket(name: "posts", cost: 1)
  }
  type Post implements Node { id: ID title: String comments(first: Int): [Post] }
  type Image { url: String }
  union Result = User | Post
`;
const schema = buildSchema(SDL);

const { costOf, actualCostOf } = pricer(schema);

/** What graphql-js returns for the operation, each list as long as its `first` (default 2), so the response walk sees real data. */
function run(query: string, variables?: Record<string, unknown>): unknown {
  const document = parse(query);
  const list = (args: { first?: number }, make: (i: number) => unknown) => Array.from({ length: args.first ?? 2 }, (_, i) => make(i));
  const user = (i: number): Record<string, unknown> => ({
    __typename: 'User',
    id: `u${i}`,
    name: 'n',
    avatar: { url: 'x' },
    friends: (args: { first?: number }) => list(args, user),
    posts: (args: { first?: number }) => list(args, post),
  });
  const post = (i: number): Record<string, unknown> => ({
    __typename: 'Post',
    id: `p${i}`,
    title: 't',
    comments: (args: { first?: number }) => list(args, post),
  });
  const root = {
    viewer: user(0),
    node: () => user(1),
    search: (args: { first?: number }) => list(args, (i) => (i % 2 === 0 ? user(i) : post(i))),
    users: (args: { first?: number }) => list(args, user),
  };
  const result = execute({ schema, document, rootValue: root, variableValues: variables, operationName: getOperationAST(document)?.name?.value });
  if ('then' in result) throw new Error('resolvers are synchronous');
  expect(result.errors).toBeUndefined();
  return result.data;
}

describe('fields sharing a response key', () => {
  it('are priced once when colocated fragments select the same list', () => {
    const split =
      '{ viewer { ...A ...B } } fragment A on User { friends(first: 50) { id avatar { url } } } fragment B on User { friends(first: 50) { name avatar { url } } }';
    const merged = '{ viewer { friends(first: 50) { id name avatar { url } } } }';
    // viewer 1 + friends 50 × (User 1 + avatar 1): 101, as the merged query; each copy priced was 201
    expect(costOf(split)).toEqual({ api: 101 });
    expect(costOf(merged)).toEqual({ api: 101 });
    expect(actualCostOf(split, run(split))).toEqual({ api: 101 });
  });

  it('merge through inline fragments and fields written twice', () => {
    // viewer 1 + friends 3 × (1 + avatar 1) = 7
    expect(costOf('{ viewer { friends(first: 3) { id } ... on User { friends(first: 3) { avatar { url } } } } }')).toEqual({ api: 7 });
    expect(costOf('{ viewer { friends(first: 3) { id } friends(first: 3) { avatar { url } } } }')).toEqual({ api: 7 });
    // Nested: friends' friends merge too. 1 + 2 × (1 + friends 4 × (1 + avatar 1)) = 19
    const nested = '{ viewer { friends(first: 2) { friends(first: 4) { id } } friends(first: 2) { friends(first: 4) { avatar { url } } } } }';
    expect(costOf(nested)).toEqual({ api: 19 });
    expect(actualCostOf(nested, run(nested))).toEqual({ api: 19 });
  });

  it('charge a fixed cost once per merged field', () => {
    const query = '{ ...U users(first: 3) { name } } fragment U on Query { users(first: 3) { id } }';
    // users: fixed 2, once; api: users 3 × (1 + 0) = 3
    expect(costOf(query)).toEqual({ api: 3, users: 2 });
    expect(actualCostOf(query, run(query))).toEqual({ api: 3, users: 2 });
    // posts: 1 per time it runs, once for the one viewer, not twice; api: viewer 1 + posts 5 × 1
    const posts = '{ viewer { posts(first: 5) { id } ... on User { posts(first: 5) { title } } } }';
    expect(costOf(posts)).toEqual({ api: 6, posts: 1 });
    expect(actualCostOf(posts, run(posts))).toEqual({ api: 6, posts: 1 });
    // Inside a list: once per user, 3, not 6
    const inList = '{ users(first: 3) { posts(first: 1) { id } posts(first: 1) { title } } }';
    expect(costOf(inList)).toEqual({ api: 6, users: 2, posts: 3 }); // api: 3 × (1 + posts 1 × 1)
    expect(actualCostOf(inList, run(inList))).toEqual({ api: 6, users: 2, posts: 3 });
  });

  it('do not merge under different aliases: each alias runs', () => {
    const query = '{ viewer { a: friends(first: 5) { id } b: friends(first: 5) { id } } }';
    expect(costOf(query)).toEqual({ api: 11 }); // 1 + 5 + 5
    expect(actualCostOf(query, run(query))).toEqual({ api: 11 });
    const fragments = '{ viewer { ...A ...B } } fragment A on User { a: friends(first: 5) { id } } fragment B on User { b: friends(first: 5) { id } }';
    expect(costOf(fragments)).toEqual({ api: 11 });
  });

  it('leave out what @skip and @include leave out, and merge the rest', () => {
    const query = 'query ($big: Boolean!) { viewer { friends(first: 4) { id } friends(first: 4) @include(if: $big) { avatar { url } } } }';
    expect(costOf(query, { big: true })).toEqual({ api: 9 }); // 1 + 4 × (1 + 1)
    expect(costOf(query, { big: false })).toEqual({ api: 5 }); // 1 + 4 × 1
    expect(actualCostOf(query, run(query, { big: true }), { big: true })).toEqual({ api: 9 });
  });

  it('merge on an abstract type only for the runtime types both apply to', () => {
    // On User, `... on User` and `... on Node` both apply: friends merges, 1 + 3 × (1 + avatar 1) = 7.
    // On Post, only `... on Node` applies, and it names no friends: 1. The most expensive possible type: 7.
    const query = '{ node { ... on User { friends(first: 3) { id } } ... on Node { ... on User { friends(first: 3) { avatar { url } } } } } }';
    expect(costOf(query)).toEqual({ api: 7 });
    // `x` is two fields on two types: for a User it is friends, for a Post comments; never both.
    const exclusive = '{ search(first: 2) { ... on User { x: friends(first: 10) { id } } ... on Post { x: comments(first: 3) { id } } } }';
    // search 2 × max(User 1 + 10, Post 1 + 3) = 22
    expect(costOf(exclusive)).toEqual({ api: 22 });
    // One User (1 + 10) and one Post (1 + 3): 15
    expect(actualCostOf(exclusive, run(exclusive))).toEqual({ api: 15 });
  });

  it('price the first field’s arguments where types that never meet name the same key', () => {
    // graphql-js allows `... on User { f: friends(first: 1) }` beside `... on User { f: friends(first: 1) }` only with equal arguments; sizes from each type's own field
    const query = '{ search(first: 1) { ... on User { f: friends(first: 8) { id } } ... on User { f: friends(first: 8) { name } } } }';
    expect(costOf(query)).toEqual({ api: 9 }); // 1 × (1 + 8 × 1)
  });

  it("price the first field's arguments, the ones that run, where validation that would refuse the document is off", () => {
    const model = new CostModel(schema);
    const price = (query: string) => {
      const document = parse(query);
      return Object.fromEntries(model.costOf(document, getOperationAST(document)!));
    };
    // users: fixed 2 once; api: the first field's 3 × 1, as graphql-js executes it with its first node's arguments
    const ran = (query: string): unknown[] => {
      const seen: unknown[] = [];
      void execute({ schema, document: parse(query), rootValue: { users: (args: { first: number }) => void seen.push(args.first) } });
      return seen;
    };
    const fragmentFirst = '{ ...U users(first: 100000) { name } } fragment U on Query { users(first: 3) { id } }';
    expect(ran(fragmentFirst)).toEqual([3]);
    expect(price(fragmentFirst)).toEqual({ api: 3, users: 2 });
    const fieldFirst = '{ users(first: 100000) { name } ...U } fragment U on Query { users(first: 3) { id } }';
    expect(ran(fieldFirst)).toEqual([100000]);
    expect(price(fieldFirst)).toEqual({ api: 100000, users: 2 });
  });

  it('price a field the interface does not declare on the types that have it, where validation is off', () => {
    const model = new CostModel(schema);
    const query = '{ node { comments(first: 1000) { id } } }';
    const document = parse(query);
    let comments = 0;
    const post = { __typename: 'Post', comments: ({ first }: { first: number }) => Array.from({ length: first }, () => ({ id: `c${comments++}` })) };
    const result = execute({ schema, document, rootValue: { node: post } });
    if ('then' in result) throw new Error('resolvers are synchronous');
    expect(comments).toBe(1000);
    // node 1 + comments 1000 × 1 = 1001, as on a Post; priced on User, which stands for Post's class by Node's fields, it was 1
    expect(Object.fromEntries(model.costOf(document, getOperationAST(document)!))).toEqual({ api: 1001 });
    expect(Object.fromEntries(model.actualCostOf(document, getOperationAST(document)!, undefined, result.data))).toEqual({ api: 1001 });
  });

  it('price fragments reached along many paths once, in time linear in the document', () => {
    // F0 spreads F1 and F2, F1 spreads F2 and F3, …: F30 and F31 reached along 2,178,309 paths, each node merged once (it threw a RangeError)
    const fragments = Array.from({ length: 30 }, (_, i) => `fragment F${i} on User { ...F${i + 1} ...F${i + 2} }`).join(' ');
    const query = `{ viewer { ...F0 } } ${fragments} fragment F30 on User { friends(first: 5) { id } } fragment F31 on User { friends(first: 5) { name } }`;
    // viewer 1 + friends 5 × 1 = 6
    expect(costOf(query)).toEqual({ api: 6 });
    expect(actualCostOf(query, run(query))).toEqual({ api: 6 });
  });

  it('price a cycle of fragments (validation off) wherever it is spread, as graphql-js runs the whole cycle from there', () => {
    const model = new CostModel(schema);
    const query =
      '{ viewer { ...A } users(first: 1) { ...C } } fragment A on User { ...B posts(first: 1000) { id } } fragment B on User { ...C } fragment C on User { ...A id }';
    const document = parse(query);
    let posts = 0;
    const user = () => ({ id: 'u', posts: ({ first }: { first: number }) => Array.from({ length: first }, () => ({ id: `p${posts++}` })) });
    const result = execute({ schema, document, rootValue: { viewer: user(), users: () => [user()] } });
    if ('then' in result) throw new Error('resolvers are synchronous');
    expect(posts).toBe(2000);
    // viewer 1 + posts 1000; users: fixed 2, api 1 × (1 + posts 1000): 2002. C's plan cut at A (below viewer) was kept as C's: 1002
    expect(Object.fromEntries(model.costOf(document, getOperationAST(document)!))).toEqual({ api: 2002, users: 2, posts: 2 });
  });

  it('price a fragment spread twice and the same fragment inside another once', () => {
    const query =
      '{ viewer { ...A ...B ...A } } fragment A on User { friends(first: 6) { id } } fragment B on User { ...A friends(first: 6) { name } avatar { url } }';
    // viewer 1 + friends 6 × 1 + avatar 1 = 8
    expect(costOf(query)).toEqual({ api: 8 });
    expect(actualCostOf(query, run(query))).toEqual({ api: 8 });
  });
});

describe('fields on an interface beside conditions on its types', () => {
  const feeds = buildSchema(`${tokenBucketDirectiveTypeDefs}
    type Query @tokenBucket(name: "api") { feed: Feed }
    interface Feed { id: ID items(first: Int): [Item] }
    type Item { id: ID }
    type A implements Feed { id: ID items(first: Int): [Item] a: Int }
    type B implements Feed { id: ID items(first: Int): [Item] b: Int }
    type C implements Feed { id: ID items(first: Int): [Item] }
  `);
  const model = new CostModel(feeds);
  const price = (query: string) => {
    const document = parse(query);
    return Object.fromEntries(model.costOf(document, getOperationAST(document)!));
  };
  /** The items graphql-js resolves for `query` when the feed is of `type`. */
  const items = (query: string, type: string): number => {
    let count = 0;
    const feed = { __typename: type, id: 'f', a: 1, b: 2, items: ({ first }: { first: number }) => Array.from({ length: first }, () => ({ id: `i${count++}` })) };
    void execute({ schema: feeds, document: parse(query), rootValue: { feed } });
    return count;
  };

  it('merge with a field of the same key under a condition, on that type only', () => {
    // On A, items merges: feed 1 + items 3 × (Item 1 + 0) = 4, not 7; on B and C the same items: 4
    const query = '{ feed { id items(first: 3) { id } ... on A { items(first: 3) { id } a } ... on B { b } } }';
    expect(items(query, 'A')).toBe(3);
    expect(price(query)).toEqual({ api: 4 });
  });

  it("price the merged key's first field, the one that runs, where validation that would refuse the document is off", () => {
    // On A the condition's items(first: 300) comes first and runs: 1 + 300; on B and C only items(first: 3): 1 + 3
    const conditionFirst = '{ feed { ... on A { items(first: 300) { id } } items(first: 3) { id } ... on B { b } } }';
    expect(items(conditionFirst, 'A')).toBe(300);
    expect(items(conditionFirst, 'B')).toBe(3);
    expect(price(conditionFirst)).toEqual({ api: 301 });
    // The plain items(first: 3) first: it runs on A too, 1 + 3 on every type
    const fieldFirst = '{ feed { items(first: 3) { id } ... on A { items(first: 300) { id } } ... on B { b } } }';
    expect(items(fieldFirst, 'A')).toBe(3);
    expect(price(fieldFirst)).toEqual({ api: 4 });
    // Through a fragment spread inside the condition, before the plain field: 1 + 300
    const throughFragment = '{ feed { ... on A { ...Big } items(first: 3) { id } ... on B { b } } } fragment Big on A { items(first: 300) { id } }';
    expect(items(throughFragment, 'A')).toBe(300);
    expect(price(throughFragment)).toEqual({ api: 301 });
  });
});

describe('conditions on other interfaces', () => {
  const paged = pricer(
    buildSchema(`${tokenBucketDirectiveTypeDefs}
      type Query @tokenBucket(name: "api") { node: Node }
      interface Node { id: ID }
      interface Paged { rows(first: Int): [Row] }
      type Row { id: ID }
      type A implements Node & Paged { id: ID rows(first: Int): [Row] }
      type D implements Node & Paged { id: ID rows(first: Int): [Row] @tokenBucket(name: "rows", cost: 7) }
      type B implements Node & Paged { id: ID rows(first: Int): [Row] @tokenBucket(name: "rows", cost: 7) extra(first: Int): [Row] }
      type C implements Node { id: ID }
    `),
  );

  it('price the types each condition applies to by what its fields cost on them', () => {
    // A: node 1 + rows 5 × 1 = 6; B and D: 6 and their rows' fixed 7; C: 1. The most expensive per bucket: api 6, rows 7
    expect(paged.costOf('{ node { ... on Paged { rows(first: 5) { id } } } }')).toEqual({ api: 6, rows: 7 });
    expect(paged.costOf('{ node { ...P } } fragment P on Paged { rows(first: 5) { id } }')).toEqual({ api: 6, rows: 7 });
    // A type named inside the condition is priced on its own, not as D, whose fields of Paged price alike: B's extra, 1 + 1,000 × 1
    const nested = '{ node { ... on Paged { ... on B { extra(first: 1000) { id } } } } }';
    expect(paged.costOf(nested)).toEqual({ api: 1001 });
    const extra = Array.from({ length: 1000 }, (_, i) => ({ id: String(i) }));
    expect(paged.actualCostOf(nested, { node: { extra } })).toEqual({ api: 1001 });
    expect(paged.costOf('{ node { ...P } } fragment P on Paged { ...Q } fragment Q on B { extra(first: 1000) { id } }')).toEqual({ api: 1001 });
  });
});

describe('fields under @defer', () => {
  // An executor with incremental delivery (graphql-tools, as Yoga runs it) collects a deferred fragment on its own and runs its fields again.
  const deferring = pricer(buildSchema(`${SDL}\ndirective @defer(if: Boolean, label: String) on FRAGMENT_SPREAD | INLINE_FRAGMENT`));

  it('are priced apart from the same key outside the deferred fragment, as they run apart', () => {
    // viewer 1 + friends 5 + the deferred friends 5 × (1 + avatar 1) = 16
    const inline = '{ viewer { friends(first: 5) { id } ... @defer { friends(first: 5) { avatar { url } } } } }';
    expect(deferring.costOf(inline)).toEqual({ api: 16 });
    // The response holds both under one key: each part priced on it, 16 again.
    const friends = Array.from({ length: 5 }, (_, i) => ({ id: `u${i}`, avatar: { url: 'x' } }));
    expect(deferring.actualCostOf(inline, { viewer: { friends } })).toEqual({ api: 16 });
    const spread = '{ viewer { friends(first: 5) { id } ...D @defer } } fragment D on User { friends(first: 5) { avatar { url } } }';
    expect(deferring.costOf(spread)).toEqual({ api: 16 });
    // A deferred fragment's own repeated keys still merge: 1 + 5 × (1 + 1)
    expect(deferring.costOf('{ viewer { ... @defer { friends(first: 5) { id } friends(first: 5) { avatar { url } } } } }')).toEqual({ api: 11 });
  });

  it('merge when the defer is turned off, from a literal or a variable', () => {
    // 1 + 5 × (1 + 1) = 11
    expect(deferring.costOf('{ viewer { friends(first: 5) { id } ... @defer(if: false) { friends(first: 5) { avatar { url } } } } }')).toEqual({ api: 11 });
    const query = 'query ($d: Boolean) { viewer { friends(first: 5) { id } ... @defer(if: $d) { friends(first: 5) { avatar { url } } } } }';
    expect(deferring.costOf(query, { d: false })).toEqual({ api: 11 });
    expect(deferring.costOf(query, { d: true })).toEqual({ api: 16 });
  });
});
