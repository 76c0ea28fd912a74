import { readFileSync } from 'node:fs';
import { buildSchema, isDirective } from 'graphql';
import { describe, expect, it } from 'vitest';
import { tokenBucketDirectiveTypeDefs } from '../src/directive.js';

const sdlFile = readFileSync(new URL('../schema/token-bucket.graphql', import.meta.url), 'utf8');

function withoutComments(sdl: string): string {
  return sdl
    .split('\n')
    .filter((line) => !line.trim().startsWith('#'))
    .join('\n')
    .trim();
}

describe('tokenBucketDirectiveTypeDefs', () => {
  it('is the same SDL as schema/token-bucket.graphql', () => {
    expect(withoutComments(sdlFile)).toBe(tokenBucketDirectiveTypeDefs.trim());
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
