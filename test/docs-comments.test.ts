// What a user's editor shows on hover: every option of every public options
// type, and every public constructor, has a doc comment, and an optional
// option's says its default.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
// Every public entry point of the package, as package.json exports them (./dist/src/x.js is src/x.ts).
const exportsField = (JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8')) as { exports: Record<string, unknown> }).exports;
const ENTRY_POINTS = Object.values(exportsField)
  .map((target) => (typeof target === 'object' && target !== null ? (target as { default?: string }).default : target))
  .filter((target): target is string => typeof target === 'string' && /^\.\/dist\/src\/.*\.js$/.test(target))
  .map((target) => target.replace(/^\.\/dist\//, '').replace(/\.js$/, '.ts'));
const program = ts.createProgram(
  ENTRY_POINTS.map((file) => `${ROOT}${file}`),
  { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, strict: true, skipLibCheck: true },
);
const checker = program.getTypeChecker();
const exported = ENTRY_POINTS.flatMap((file) => {
  const source = program.getSourceFile(`${ROOT}${file}`);
  const symbol = source && checker.getSymbolAtLocation(source);
  return symbol ? checker.getExportsOfModule(symbol) : [];
});

function resolved(symbol: ts.Symbol): ts.Symbol {
  return symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
}

const docs = (symbol: ts.Symbol): string => ts.displayPartsToString(symbol.getDocumentationComment(checker));

describe('doc comments of the public API', () => {
  it('reads the entry points', () => {
    expect(exported.map((symbol) => symbol.getName())).toEqual(expect.arrayContaining(['Rate', 'TokenBucket', 'RedisStore', 'tokenBucketPlugin', 'retryAfterLink', 'useTokenBucket']));
  });

  it('every option of an exported `…Options` type has one, and an optional one states its default', () => {
    const missing: string[] = [];
    for (const symbol of exported.map(resolved)) {
      if (!/Options$/.test(symbol.getName()) || !(symbol.flags & (ts.SymbolFlags.Interface | ts.SymbolFlags.TypeAlias))) continue;
      const type = checker.getDeclaredTypeOfSymbol(symbol);
      for (const property of checker.getPropertiesOfType(type)) {
        const text = docs(property);
        const where = `${symbol.getName()}.${property.getName()}`;
        if (text.trim() === '') missing.push(`${where}: no doc comment`);
        else if (property.flags & ts.SymbolFlags.Optional && !/default/i.test(text)) missing.push(`${where}: no default stated`);
      }
    }
    expect(missing).toEqual([]);
  });

  it('every exported class has one, and so does its constructor where it takes arguments', () => {
    const missing: string[] = [];
    for (const symbol of exported.map(resolved)) {
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
