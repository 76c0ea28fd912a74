// The names the directives go by: the one a schema's @link gives each
// (declared or not, code-first or SDL), their own names, and a name written
// with its @ in extensions. Each priced through a real Apollo Server.
import { GraphQLInt, GraphQLList, GraphQLObjectType, GraphQLSchema, parse } from 'graphql';
import type { FieldDefinitionNode, ObjectTypeDefinitionNode } from 'graphql';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryStore, Rate, TokenBucket } from '../src/index.js';
import { serveLimited } from './support/limited-servers.js';
import type { LimitedServer } from './support/limited-servers.js';

const api = new TokenBucket('api', 1000, Rate.perSecond(1));
let server: LimitedServer | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
});

/** What `query` is charged to `api` by Apollo Server serving `schema`, and what its logger warned. */
async function charged(schema: GraphQLSchema | string, query: string): Promise<{ cost: unknown; warnings: string[] }> {
  server = await serveLimited('Apollo Server', schema, {}, { store: new MemoryStore(), buckets: [api], reportCost: true });
  const answer = await server.post({ query });
  expect(answer.status).toBe(200);
  return { cost: (answer.body.extensions?.['rateLimit'] as Record<string, { cost: number }> | undefined)?.['api']?.cost, warnings: server.logger.warnings };
}

function fieldNode(directives: string): FieldDefinitionNode {
  return (parse(`type T { a: Int ${directives} }`).definitions[0] as ObjectTypeDefinitionNode).fields![0]!;
}

const LINK = `
  directive @link(url: String!, as: String, import: [Import]) repeatable on SCHEMA
  scalar Import
`;

describe('names a @link gives the directives', () => {
  it('a code-first schema that links the cost spec, renaming @cost, and declares nothing: the new name is read', async () => {
    const Query = new GraphQLObjectType({
      name: 'Query',
      extensions: { directives: { tokenBucket: { name: 'api' } } },
      fields: { a: { type: GraphQLInt, resolve: () => 1, astNode: fieldNode('@weight(weight: "50")') } },
    });
    const schema = new GraphQLSchema({
      query: Query,
      extensions: { directives: { link: [{ url: 'https://specs.apollo.dev/cost/v0.1', import: [{ name: '@cost', as: '@weight' }] }] } },
    });
    // Before: 0, no warning.
    expect(await charged(schema, '{ a }')).toEqual({ cost: 50, warnings: [] });
  });

  it('a served schema that imports @tokenBucket under another name: that name is read', async () => {
    const sdl = `${LINK}
      extend schema @link(url: "https://example.com/token-bucket/v0.1", import: [{ name: "@tokenBucket", as: "@limit" }])
      directive @limit(name: String!, cost: Int) repeatable on FIELD_DEFINITION | OBJECT | INTERFACE
      type Query { a: Int @limit(name: "api", cost: 77) }`;
    // Before: no bucket charged at all, no warning.
    expect(await charged(sdl, '{ a }')).toEqual({ cost: 77, warnings: [] });
  });

  it('and @tokenBucket under its own name in that schema is named in a warning', async () => {
    const sdl = `${LINK}
      extend schema @link(url: "https://example.com/token-bucket/v0.1", import: [{ name: "@tokenBucket", as: "@limit" }])
      directive @limit(name: String!, cost: Int) repeatable on FIELD_DEFINITION | OBJECT | INTERFACE
      directive @tokenBucket(name: String!, cost: Int) repeatable on FIELD_DEFINITION | OBJECT | INTERFACE
      type Query { a: Int @limit(name: "api", cost: 3) b: Int @tokenBucket(name: "api", cost: 5) }`;
    expect(await charged(sdl, '{ a b }')).toEqual({
      cost: 3,
      warnings: ["graphql-token-bucket: @tokenBucket on Query.b is not read: this schema's @link names the directive @limit"],
    });
  });
});

describe('names in extensions', () => {
  it("a name written with its @ ('@cost') in either form is read", async () => {
    for (const directives of [[{ name: '@cost', args: { weight: 50 } }], { '@cost': { weight: 50 } }]) {
      const Query = new GraphQLObjectType({
        name: 'Query',
        extensions: { directives: [{ name: '@tokenBucket', args: { name: 'api' } }] },
        fields: { a: { type: GraphQLInt, resolve: () => 1, extensions: { directives } } },
      });
      // Before: 0, no warning.
      expect(await charged(new GraphQLSchema({ query: Query }), '{ a }')).toEqual({ cost: 50, warnings: [] });
      await server?.stop();
      server = undefined;
    }
  });
});

describe('entries of the array form', () => {
  it("an entry with a key other than name and args (arguments:, a misspelt args) fails Apollo Server's start, naming it", async () => {
    const Row = new GraphQLObjectType({ name: 'Row', fields: { id: { type: GraphQLInt } } });
    for (const key of ['arguments', 'arg']) {
      const Query = new GraphQLObjectType({
        name: 'Query',
        extensions: { directives: [{ name: 'tokenBucket', args: { name: 'api' } }] },
        fields: { rows: { type: new GraphQLList(Row), extensions: { directives: [{ name: 'listSize', [key]: { assumedSize: 500 } }] } } },
      });
      // Before: started, and { rows { id } } was charged 10 (the default size) where 500 was written.
      await expect(serveLimited('Apollo Server', new GraphQLSchema({ query: Query }), {}, { store: new MemoryStore(), buckets: [api] })).rejects.toThrow(
        `@listSize on Query.rows: an extensions.directives entry holds "${key}", which is not name or args`,
      );
    }
  });
});

describe('declarations of these names with other arguments', () => {
  const TB = 'directive @tokenBucket(name: String!, cost: Int) repeatable on FIELD_DEFINITION | OBJECT | INTERFACE';

  it('another @listSize the schema declares (none of assumedSize, slicingArguments, sizedFields) is named in a warning, not read as one without arguments', async () => {
    const sdl = `${TB}
      directive @listSize(max: Int) on FIELD_DEFINITION
      type R { id: ID } type Query @tokenBucket(name: "api") { rows: [R] @listSize(max: 5000) }`;
    // Before: charged 10 (read as @listSize with no arguments), no warning.
    const { warnings } = await charged(sdl, '{ rows { id } }');
    expect(warnings).toEqual([expect.stringContaining('@listSize on Query.rows is not read: the schema declares another @listSize, which this package does not read')]);
  });

  it("an argument of a declared @cost or @listSize that the package does not read (graphql-cost-analysis's multipliers) fails the start, naming it", async () => {
    for (const [declaration, field, argument] of [
      ['directive @cost(weight: String!, multipliers: [String]) on FIELD_DEFINITION', 'rows(first: Int): [R] @cost(weight: "1", multipliers: ["first"])', 'multipliers'],
      ['directive @listSize(assumedSize: Int, max: Int) on FIELD_DEFINITION', 'rows: [R] @listSize(assumedSize: 1, max: 5000)', 'max'],
    ] as const) {
      const sdl = `${TB}\n${declaration}\ntype R { id: ID } type Query @tokenBucket(name: "api") { ${field} }`;
      // Before: started; the argument was left unread.
      await expect(serveLimited('Apollo Server', sdl, {}, { store: new MemoryStore(), buckets: [api] })).rejects.toThrow(
        new RegExp(`^@${declaration.slice(11, declaration.indexOf('('))} on Query\\.rows: unknown argument "${argument}" \\(astNode\\); the directive takes `),
      );
    }
  });
});
