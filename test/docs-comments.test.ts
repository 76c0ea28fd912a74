// What a user's editor shows on hover: every option of every public options
// type, and every public constructor, has a doc comment, and an optional
// option's says its default.
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { checker, exported, optionTypes } from './support/public-api.js';

const docs = (symbol: ts.Symbol): string => ts.displayPartsToString(symbol.getDocumentationComment(checker));

describe('doc comments of the public API', () => {
  it('reads the entry points', () => {
    expect(exported.map((symbol) => symbol.getName())).toEqual(expect.arrayContaining(['Rate', 'TokenBucket', 'RedisStore', 'tokenBucketPlugin', 'retryAfterLink', 'useTokenBucket']));
  });

  it('every option of an exported `…Options` type has one, and an optional one states its default', () => {
    const missing: string[] = [];
    for (const { name, properties } of optionTypes()) {
      for (const property of properties) {
        const text = docs(property);
        const where = `${name}.${property.getName()}`;
        if (text.trim() === '') missing.push(`${where}: no doc comment`);
        else if (property.flags & ts.SymbolFlags.Optional && !/default/i.test(text)) missing.push(`${where}: no default stated`);
      }
    }
    expect(missing).toEqual([]);
  });

  it('every exported class has one, and so does its constructor where it takes arguments', () => {
    const missing: string[] = [];
    for (const symbol of exported) {
      if (!(symbol.flags & ts.SymbolFlags.Class)) continue;
      if (docs(symbol).trim() === '') missing.push(`${symbol.getName()}: no doc comment`);
      const constructors = symbol.members?.get(ts.InternalSymbolName.Constructor)?.declarations ?? [];
      for (const declaration of constructors) {
        const parameters = (declaration as ts.ConstructorDeclaration).parameters;
        if (parameters.length > 0 && ts.getJSDocTags(declaration).length === 0 && ts.getJSDocCommentsAndTags(declaration).length === 0) {
          missing.push(`${symbol.getName()} constructor: no doc comment`);
        }
      }
      for (const [name, member] of symbol.exports ?? new Map<ts.__String, ts.Symbol>()) {
        if (member.flags & ts.SymbolFlags.Method && docs(member).trim() === '') missing.push(`${symbol.getName()}.${String(name)}: no doc comment`);
      }
    }
    expect(missing).toEqual([]);
  });
});
