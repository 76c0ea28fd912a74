// Slicing arguments at start-up: a path that passes through a list is
// refused (a list's elements do not give one size), and one whose value is
// not an Int is named in a warning, once, through the server's logger; and
// requireOneSlicingArgument, which never lets a client choose the smaller.
import { ApolloServer } from '@apollo/server';
import { buildSchema } from 'graphql';
import { describe, expect, it } from 'vitest';
import { CostModel, MemoryStore, Rate, TokenBucket, costDirectiveTypeDefs, tokenBucketDirectiveTypeDefs, tokenBucketPlugin } from '../src/index.js';
import { captureLogger } from './support/graphql.js';
import { TRANSPORTS, serveLimited } from './support/limited-servers.js';
import { serveMercurius } from './support/mercurius.js';

const DIRECTIVES = `${tokenBucketDirectiveTypeDefs}\n${costDirectiveTypeDefs}`;

function model(sdl: string): CostModel {
  return new CostModel(buildSchema(`${DIRECTIVES}\n${sdl}`));
}

describe('a slicing path through a list', () => {
  it('is refused at start-up, naming the field and the path, at any depth', () => {
    const types = `
      input Page { first: Int }
      input Search { pages: [Page!] page: Page nested: [[Page]] scalar: JSON }
      scalar JSON
      type Row { id: ID }
    `;
    const cases: [string, string][] = [
      ['rows(pages: [Page!]): [Row]', 'pages.first'],
      ['rows(pages: [Page!]!): [Row]', 'pages.first'],
      ['rows(input: Search): [Row]', 'input.pages.first'],
      ['rows(input: [Search]): [Row]', 'input.page.first'],
      ['rows(input: Search): [Row]', 'input.nested.first'],
    ];
    for (const [field, path] of cases) {
      expect(() => model(`${types} type Query @tokenBucket(name: "api") { ${field} @listSize(slicingArguments: ["${path}"]) }`), `${field} ${path}`).toThrow(
        new RegExp(`^@listSize on Query\\.rows: slicing argument "${path.replaceAll('.', '\\.')}" passes through a list \\(.* is \\[`),
      );
    }
  });

  it('and a path into anything but an input object field is refused too', () => {
    const types = 'input Page { first: Int } scalar JSON type Row { id: ID }';
    for (const [field, path, why] of [
      ['rows(filter: JSON): [Row]', 'filter.first', /filter \(JSON\) has no input field "first"/],
      ['rows(page: Page): [Row]', 'page.frist', /page \(Page\) has no input field "frist"/],
      ['rows(page: Page): [Row]', 'page..first', /page \(Page\) has no input field ""/],
      ['rows(first: Int): [Row]', 'first.value', /first \(Int\) has no input field "value"/],
    ] as const) {
      expect(() => model(`${types} type Query @tokenBucket(name: "api") { ${field} @listSize(slicingArguments: ["${path}"]) }`)).toThrow(why);
    }
  });

  it('fails Apollo Server\'s start, where 0.3 charged 2 tokens for rows(pages: { first: 5000 })', async () => {
    const server = new ApolloServer({
      typeDefs: `${DIRECTIVES}
        input Page { first: Int }
        type Row { id: ID }
        type Query @tokenBucket(name: "api") { rows(pages: [Page!]): [Row] @listSize(slicingArguments: ["pages.first"]) }`,
      resolvers: { Query: { rows: (_: unknown, { pages }: { pages: { first: number }[] }) => Array.from({ length: pages[0]?.first ?? 0 }, (_x, i) => ({ id: i })) } },
      logger: captureLogger(),
      plugins: [tokenBucketPlugin({ store: new MemoryStore(), buckets: [new TokenBucket('api', 1000, Rate.perSecond(1))], identify: () => 'u' })],
    });
    await expect(server.start()).rejects.toThrow('@listSize on Query.rows: slicing argument "pages.first" passes through a list (pages is [Page!])');
    await server.stop().catch(() => undefined);
  });

  it('a slicing argument that is an input object, or a list of lists, fails the start too (they were charged 11 tokens for 500 rows, and 1)', async () => {
    const rows = (n: number) => Array.from({ length: n }, (_, i) => ({ id: i }));
    for (const [field, why] of [
      ['rows(page: Page): [Row] @listSize(slicingArguments: ["page"])', 'slicing argument "page" is an input object (page: Page), which is no size: name the field in it that is ("page.first")'],
      ['rows(ids: [[ID!]!]): [Row] @listSize(slicingArguments: ["ids"])', 'slicing argument "ids" is a list of lists (ids: [[ID!]!]): only its outer elements would be counted'],
    ] as const) {
      const server = new ApolloServer({
        typeDefs: `${DIRECTIVES}
input Page { first: Int }
type Row { id: ID }
type Query @tokenBucket(name: "api") { ${field} }`,
        resolvers: { Query: { rows: (_: unknown, args: { page?: { first: number }; ids?: string[][] }) => rows(args.page?.first ?? args.ids?.flat().length ?? 0) } },
        logger: captureLogger(),
        plugins: [tokenBucketPlugin({ store: new MemoryStore(), buckets: [new TokenBucket('api', 1000, Rate.perSecond(1))], identify: () => 'u' })],
      });
      await expect(server.start()).rejects.toThrow(`@listSize on Query.rows: ${why}`);
      await server.stop().catch(() => undefined);
    }
  });

  it('a @listSize on a field that is not a list and names no sized fields sizes nothing: refused', () => {
    expect(() => model('type Query @tokenBucket(name: "api") { count(first: Int): Int @listSize(slicingArguments: ["first"]) }')).toThrow(
      '@listSize on Query.count: the field is not a list and @listSize names no sizedFields, so it sizes nothing',
    );
  });
});

describe('a slicing argument that is not an Int', () => {
  const sdl = `${DIRECTIVES}
    input Search { first: String limit: Int }
    scalar Long
    type Row { id: ID }
    type Query @tokenBucket(name: "api") {
      byString(first: String): [Row]
      byFloat(last: Float): [Row]
      byLong(take: Long): [Row] @listSize(slicingArguments: ["take"])
      bySearch(input: Search): [Row] @listSize(slicingArguments: ["input.first", "input.limit"])
      byInt(first: Int!): [Row]
      byIds(ids: [ID!]): [Row] @listSize(slicingArguments: ["ids"])
    }
  `;

  it('is named in one start-up warning; an Int or a list (counted by its elements) is not', () => {
    expect(new CostModel(buildSchema(sdl)).warnings).toEqual([
      'graphql-token-bucket: slicing arguments that are not Int: Query.byString(first: String), Query.byFloat(last: Float), Query.byLong(take: Long), Query.bySearch(input.first: String). ' +
        "A size is read from such a value as the largest of Number, parseFloat and parseInt (of a string, of what an object converts to, of a list's first element); " +
        'a resolver that reads it otherwise may do more work than is charged: declare them Int',
    ]);
  });

  it.each(TRANSPORTS)("is warned about once through %s's logger", async (transport) => {
    const server = await serveLimited(transport, sdl, {}, { store: new MemoryStore(), buckets: [new TokenBucket('api', 100, Rate.perSecond(1))] });
    try {
      expect((await server.post({ query: '{ byString(first: "0x10") { id } }' })).status).toBe(200);
      expect(server.logger.warnings).toEqual([expect.stringContaining('slicing arguments that are not Int: Query.byString(first: String)')]);
    } finally {
      await server.stop();
    }
  });

  it("is warned about once through mercuriusTokenBucket's logger", async () => {
    const logger = captureLogger();
    const server = await serveMercurius({ schema: sdl, limits: { store: new MemoryStore(), buckets: [new TokenBucket('api', 100, Rate.perSecond(1))], identify: () => 'u', logger } });
    try {
      expect((await server.post({ query: '{ byString(first: "0x10") { id } }' })).status).toBe(200);
      expect(logger.warnings).toEqual([expect.stringContaining('slicing arguments that are not Int: Query.byString(first: String)')]);
    } finally {
      await server.close();
    }
  });
});

describe('requireOneSlicingArgument', () => {
  it('never lets two slicing arguments charge the smaller, nor none charge less than the assumed size (through Apollo Server)', async () => {
    const server = await serveLimited(
      'Apollo Server',
      `${DIRECTIVES}
        type R { id: ID }
        type Query @tokenBucket(name: "api") {
          rows(first: Int, last: Int): [R] @listSize(slicingArguments: ["first", "last"], requireOneSlicingArgument: true, assumedSize: 7)
        }`,
      { Query: { rows: (_: unknown, { first, last }: { first?: number; last?: number }) => Array.from({ length: Math.max(first ?? 0, last ?? 0, first === undefined && last === undefined ? 7 : 0) }, (_x, i) => ({ id: i })) } },
      { store: new MemoryStore(), buckets: [new TokenBucket('api', 10_000, Rate.perSecond(1))], reportCost: true },
    );
    try {
      for (const [query, rows] of [
        ['{ rows(first: 1, last: 500) { id } }', 500],
        ['{ rows(last: 3, first: 40) { id } }', 40],
        ['{ rows { id } }', 7],
      ] as const) {
        const answer = await server.post({ query });
        expect((answer.body.data as { rows: unknown[] }).rows).toHaveLength(rows);
        expect((answer.body.extensions?.['rateLimit'] as { api: { cost: number } }).api.cost, query).toBe(rows);
      }
    } finally {
      await server.stop();
    }
  });
});
