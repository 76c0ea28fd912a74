import { readFileSync } from 'node:fs';
import type { GraphQLDirective} from 'graphql';
import { GraphQLObjectType, GraphQLSchema, GraphQLString, buildSchema, isDirective, printSchema, specifiedDirectives } from 'graphql';
import { describe, expect, it } from 'vitest';
import { costDirective, costDirectiveTypeDefs, listSizeDirective, tokenBucketDirective, tokenBucketDirectiveTypeDefs } from '../src/index.js';

const read = (file: string): string => readFileSync(new URL(`../schema/${file}`, import.meta.url), 'utf8');

function withoutComments(sdl: string): string {
  return sdl
    .split('\n')
    .filter((line) => !line.trim().startsWith('#'))
    .join('\n')
    .trim();
}

/** A schema's SDL with only the given directives besides the specified ones. */
function printed(directives: readonly GraphQLDirective[]): string {
  const query = new GraphQLObjectType({ name: 'Query', fields: { a: { type: GraphQLString } } });
  return printSchema(new GraphQLSchema({ query, directives: [...specifiedDirectives, ...directives] }));
}

describe('tokenBucketDirectiveTypeDefs', () => {
  it('is the same SDL as schema/token-bucket.graphql', () => {
    expect(withoutComments(read('token-bucket.graphql'))).toBe(tokenBucketDirectiveTypeDefs.trim());
  });

  it('declares a repeatable directive on fields, objects and interfaces', () => {
    const schema = buildSchema(`${tokenBucketDirectiveTypeDefs}\ntype Query { a: Int }`);
    const directive = schema.getDirective('tokenBucket');
    expect(isDirective(directive)).toBe(true);
    expect(directive?.isRepeatable).toBe(true);
    expect(directive?.locations).toEqual(['FIELD_DEFINITION', 'OBJECT', 'INTERFACE']);
    expect(directive?.args.map((a) => `${a.name}: ${String(a.type)}`)).toEqual(['name: String!', 'cost: Int']);
  });
});

describe('costDirectiveTypeDefs', () => {
  it('is the same SDL as schema/cost.graphql', () => {
    expect(withoutComments(read('cost.graphql'))).toBe(costDirectiveTypeDefs.trim());
  });

  it("declares @cost the IBM way (weight: String!) and @listSize as Apollo Router reads it", () => {
    const schema = buildSchema(`${costDirectiveTypeDefs}\ntype Query { a: Int }`);
    expect(schema.getDirective('cost')?.args.map((a) => `${a.name}: ${String(a.type)}`)).toEqual(['weight: String!']);
    expect(schema.getDirective('listSize')?.args.map((a) => `${a.name}: ${String(a.type)}`)).toEqual([
      'assumedSize: Int',
      'slicingArguments: [String!]',
      'sizedFields: [String!]',
      'requireOneSlicingArgument: Boolean',
    ]);
  });
});

describe('tokenBucketDirective, costDirective, listSizeDirective', () => {
  it('are graphql-js directives that print as the SDL the package exports', () => {
    for (const directive of [tokenBucketDirective, costDirective, listSizeDirective]) expect(isDirective(directive)).toBe(true);
    const fromSdl = buildSchema(`${tokenBucketDirectiveTypeDefs}\n${costDirectiveTypeDefs}\ntype Query { a: String }`);
    expect(printed([tokenBucketDirective, costDirective, listSizeDirective])).toBe(printSchema(fromSdl));
  });
});
