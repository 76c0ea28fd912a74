// The package's public API as its users' editors see it: every entry point
// package.json exports (./dist/src/x.js is src/x.ts), read by TypeScript.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const exportsField = (JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8')) as { exports: Record<string, unknown> }).exports;
export const ENTRY_POINTS = Object.values(exportsField)
  .map((target) => (typeof target === 'object' && target !== null ? (target as { default?: string }).default : target))
  .filter((target): target is string => typeof target === 'string' && /^\.\/dist\/src\/.*\.js$/.test(target))
  .map((target) => target.replace(/^\.\/dist\//, '').replace(/\.js$/, '.ts'));
const program = ts.createProgram(
  ENTRY_POINTS.map((file) => `${ROOT}${file}`),
  { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, strict: true, skipLibCheck: true },
);
export const checker = program.getTypeChecker();

function resolved(symbol: ts.Symbol): ts.Symbol {
  return symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
}

/** Every symbol an entry point exports, aliases resolved to what they name. */
export const exported: ts.Symbol[] = ENTRY_POINTS.flatMap((file) => {
  const source = program.getSourceFile(`${ROOT}${file}`);
  const symbol = source && checker.getSymbolAtLocation(source);
  return symbol ? checker.getExportsOfModule(symbol).map(resolved) : [];
});

/** Every exported `…Options` type (an interface or a type alias), with its properties. */
export function optionTypes(): { name: string; properties: ts.Symbol[] }[] {
  return exported
    .filter((symbol) => /Options$/.test(symbol.getName()) && symbol.flags & (ts.SymbolFlags.Interface | ts.SymbolFlags.TypeAlias))
    .map((symbol) => ({ name: symbol.getName(), properties: checker.getPropertiesOfType(checker.getDeclaredTypeOfSymbol(symbol)) }));
}
