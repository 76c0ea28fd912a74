// What an object type takes from the interfaces it implements, where it
// says nothing itself: one value they agree on. Interfaces that give one
// implementation different annotations at the same level (two interface
// fields, or two interface types) are copies that differ, refused at
// start-up as copies in two forms are; before, the first interface the
// type named won, so `implements A & B` charged 1 token for 1,000 rows
// where `implements B & A` charged 1,000.
import { ApolloServer } from '@apollo/server';
import { GraphQLInt, GraphQLInterfaceType, GraphQLList, GraphQLObjectType, GraphQLSchema } from 'graphql';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryStore, Rate, TokenBucket, costDirectiveTypeDefs, tokenBucketDirectiveTypeDefs, tokenBucketPlugin } from '../src/index.js';
import { captureLogger } from './support/graphql.js';
import { serveLimited } from './support/limited-servers.js';
import type { LimitedServer } from './support/limited-servers.js';

const DIRECTIVES = `${tokenBucketDirectiveTypeDefs}\n${costDirectiveTypeDefs}`;
const buckets = [new TokenBucket('api', 100_000, Rate.perSecond(1)), new TokenBucket('x', 1000, Rate.perSecond(1))];
/** Query.o's object: graphql-js' default resolvers read its properties (and call `rows` with the arguments). */
const o = { p: 1, q: 1, f: 1, list: [1, 2, 3], rows: ({ first }: { first?: number }) => Array.from({ length: first ?? 1 }, (_, i) => ({ id: i })) };
const resolvers = { Query: { o: () => o } };

/** Apollo Server's start with the limiter on `sdl`: the error it fails with, or undefined. */
async function startError(sdl: string): Promise<string | undefined> {
  const server = new ApolloServer({
    typeDefs: `${DIRECTIVES}\n${sdl}`,
    resolvers,
    logger: captureLogger(),
    plugins: [tokenBucketPlugin({ store: new MemoryStore(), buckets, identify: () => 'u' })],
  });
  try {
    await server.start();
    return undefined;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  } finally {
    await server.stop().catch(() => undefined);
  }
}

let server: LimitedServer | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
});

const TYPES = 'type R { id: ID } type Query { o: O }';

describe('two interfaces that give one implementation different annotations', () => {
  it.each(['A & B', 'B & A'])('type-level @tokenBucket with different costs (implements %s): the start fails, naming the type and both', async (order) => {
    const error = await startError(`
      interface A @tokenBucket(name: "api", cost: 1) { id: ID }
      interface B @tokenBucket(name: "api") { id: ID }
      type O implements ${order} { id: ID rows(first: Int): [R] }
      ${TYPES}`);
    expect(error).toMatch(/^@tokenBucket on O: bucket "api" has different costs on the interfaces it implements, (A \(1\) and B \(its complexity\)|B \(its complexity\) and A \(1\)); give O its own @tokenBucket\(name: "api"\)$/);
  });

  it('a field-level @tokenBucket with different costs: the start fails, naming the field', async () => {
    const error = await startError(`
      interface A { f: Int @tokenBucket(name: "x", cost: 1) }
      interface B { f: Int @tokenBucket(name: "x", cost: 50) }
      type O implements A & B { f: Int }
      ${TYPES}`);
    expect(error).toBe('@tokenBucket on O.f: bucket "x" has different costs on the interfaces it implements, A.f (1) and B.f (50); give O.f its own @tokenBucket(name: "x")');
  });

  it('@cost on the field, or on one of its arguments, with different weights: the start fails', async () => {
    expect(
      await startError(`
        interface A { p: Int @cost(weight: "1") }
        interface B { p: Int @cost(weight: "100") }
        type O implements A & B @tokenBucket(name: "api") { p: Int }
        ${TYPES}`),
    ).toBe('@cost on O.p: different weights on the interfaces it implements, A.p (1) and B.p (100); give O.p its own');
    expect(
      await startError(`
        interface A { q(x: Int @cost(weight: "1")): Int }
        interface B { q(x: Int @cost(weight: "100")): Int }
        type O implements A & B @tokenBucket(name: "api") { q(x: Int): Int }
        ${TYPES}`),
    ).toBe('@cost on O.q(x:): different weights on the interfaces it implements, A.q(x:) (1) and B.q(x:) (100); give O.q(x:) its own');
  });

  it('@listSize with different arguments: the start fails', async () => {
    const error = await startError(`
      interface A { list: [Int] @listSize(assumedSize: 1) }
      interface B { list: [Int] @listSize(assumedSize: 1000) }
      type O implements A & B @tokenBucket(name: "api") { list: [Int] }
      ${TYPES}`);
    expect(error).toMatch(/^@listSize on O\.list: different arguments on the interfaces it implements, A\.list \(.*\) and B\.list \(.*\); give O\.list its own$/);
  });

  it('in extensions as in SDL: graphql-js interfaces annotated in extensions.directives', async () => {
    const A = new GraphQLInterfaceType({ name: 'A', fields: { p: { type: GraphQLInt, extensions: { complexity: 1 } } } });
    const B = new GraphQLInterfaceType({ name: 'B', fields: { p: { type: GraphQLInt, extensions: { directives: [{ name: 'cost', args: { weight: '100' } }] } } } });
    const O = new GraphQLObjectType({ name: 'O', interfaces: [A, B], fields: { p: { type: GraphQLInt } } });
    const Query = new GraphQLObjectType({ name: 'Query', extensions: { directives: { tokenBucket: { name: 'api' } } }, fields: { o: { type: new GraphQLList(O) } } });
    await expect(serveLimited('Apollo Server', new GraphQLSchema({ query: Query }), {}, { store: new MemoryStore(), buckets })).rejects.toThrow(
      '@cost on O.p: different weights on the interfaces it implements, A.p (1) and B.p (100); give O.p its own',
    );
  });
});

describe('what the implementation takes where its interfaces agree, or where it says', () => {
  it('interfaces that agree (or one that says nothing) give their annotation; the type\'s own wins over theirs', async () => {
    server = await serveLimited(
      'Apollo Server',
      `${DIRECTIVES}
        interface A @tokenBucket(name: "api", cost: 1) { p: Int @cost(weight: "100") f: Int @tokenBucket(name: "x", cost: 1) }
        interface B @tokenBucket(name: "api") { p: Int @cost(weight: "100") f: Int @tokenBucket(name: "x", cost: 50) }
        interface C { p: Int }
        type O implements A & B & C @tokenBucket(name: "api") { p: Int f: Int @tokenBucket(name: "x", cost: 5) rows(first: Int): [R] }
        ${TYPES}`,
      resolvers,
      { store: new MemoryStore(), buckets, reportCost: true },
    );
    const answer = await server.post({ query: '{ o { p f rows(first: 1000) { id } } }' });
    expect(answer.body.errors).toBeUndefined();
    // api (O's own, its complexity): p 100 (A and B agree) + rows 1000 × 1; x: O.f's own 5
    expect(answer.body.extensions?.['rateLimit']).toEqual({ api: { cost: 1100, remaining: 98_900, capacity: 100_000 }, x: { cost: 5, remaining: 995, capacity: 1000 } });
  });
});
