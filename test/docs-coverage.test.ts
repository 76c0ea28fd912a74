// Every option and every error code of the package is in the manual with an
// example: each property of an exported `…Options` type, and each
// `extensions.code` the source sets, is named in a code block of docs/; and
// each error code has its row in the table of docs/responses.md. An option or
// a code added without its page fails here.
import { readFileSync, readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { codeBlocks, manualPages } from './support/docs-blocks.js';
import { ROOT } from './support/example-process.js';
import { optionTypes } from './support/public-api.js';

const examples = manualPages(ROOT)
  .filter((page) => page.startsWith('docs/'))
  .flatMap((page) => codeBlocks(ROOT, page))
  .map((block) => block.text)
  .join('\n');
const shownInAnExample = (name: string): boolean => new RegExp(`(?<![\\w$])${name}(?![\\w$])`).test(examples);

function sources(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? sources(join(dir, entry.name)) : entry.name.endsWith('.ts') ? [relative(ROOT, join(ROOT, dir, entry.name))] : [],
  );
}

/** Every `code: 'X'` or `code: CONSTANT` the source writes, constants resolved through their `export const CONSTANT = 'X'`. */
function errorCodes(): Set<string> {
  const text = sources('src').map((file) => readFileSync(join(ROOT, file), 'utf8')).join('\n');
  const constants = new Map([...text.matchAll(/export const ([A-Z_]+) = '([A-Z_]+)'/g)].map(([, name = '', value = '']) => [name, value]));
  const codes = new Set<string>();
  for (const [, literal, constant] of text.matchAll(/\bcode: (?:'([A-Z_]+)'|([A-Z_]+)\b)/g)) {
    const code = literal ?? constants.get(constant ?? '');
    if (code === undefined) throw new Error(`code: ${constant ?? ''} names no exported string constant`);
    codes.add(code);
  }
  return codes;
}

describe('the manual names everything the package has', () => {
  it('reads the options and the codes', () => {
    expect(optionTypes().map((type) => type.name)).toEqual(expect.arrayContaining(['TokenBucketPluginOptions', 'RedisStoreOptions', 'RetryAfterLinkOptions']));
    expect([...errorCodes()]).toEqual(expect.arrayContaining(['RATE_LIMITED', 'RATE_LIMITER_UNAVAILABLE', 'BAD_REQUEST']));
  });

  it('every option of every exported options type appears in an example of docs/', () => {
    const missing = optionTypes().flatMap(({ name, properties }) =>
      properties.map((property) => property.getName()).filter((option) => !shownInAnExample(option)).map((option) => `${name}.${option}`),
    );
    expect(missing).toEqual([]);
  });

  it('every error code the package answers with has its row in docs/responses.md and appears in an example of docs/', () => {
    const table = readFileSync(join(ROOT, 'docs/responses.md'), 'utf8');
    const missing: string[] = [];
    for (const code of errorCodes()) {
      if (!new RegExp(`^\\| \`${code}\` \\|`, 'm').test(table)) missing.push(`${code}: no row in docs/responses.md`);
      if (!shownInAnExample(code)) missing.push(`${code}: in no example`);
    }
    expect(missing).toEqual([]);
  });
});
