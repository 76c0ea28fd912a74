// The manual's code blocks and links, checked without running anything:
// every block marked `<!-- file: … -->` is that example file as it is, every
// TypeScript program in the manual is such a block (or marked a fragment),
// and every link between pages reaches a page and a heading that exist.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { describe, expect, it } from 'vitest';
import { asShown, codeBlocks, manualPages, outputDifference } from './support/docs-blocks.js';
import { ROOT } from './support/example-process.js';

const pages = manualPages(ROOT);
const blocks = pages.flatMap((page) => codeBlocks(ROOT, page));
const where = (block: { page: string; line: number }): string => `${block.page}:${block.line}`;

describe('code blocks that show an example file', () => {
  const shown = blocks.filter((b) => b.mark?.kind === 'file');

  it.each(shown.map((b) => [where(b), b] as const))('%s is the file it names', (_, block) => {
    const file = join(ROOT, block.mark?.value ?? '');
    expect(existsSync(file), `${where(block)} names ${block.mark?.value ?? ''}, which does not exist`).toBe(true);
    expect(block.text.trimEnd()).toBe(asShown(readFileSync(file, 'utf8')));
  });

  it('the README shows the quick start', () => {
    expect(shown.some((b) => b.page === 'README.md' && b.mark?.value === 'examples/quick-start.ts')).toBe(true);
  });
});

describe('TypeScript programs in the manual', () => {
  it('each one that imports something is an example file (`<!-- file: … -->`) or says it is a fragment', () => {
    const unchecked = blocks
      .filter((b) => (b.lang === 'ts' || b.lang === 'typescript') && /^import\s/m.test(b.text) && b.mark?.kind !== 'file' && b.mark?.kind !== 'fragment')
      .map(where);
    expect(unchecked).toEqual([]);
  });
});

describe('runnable blocks', () => {
  it('each `<!-- run: … -->` block is a shell command followed by what it prints', () => {
    const wrong: string[] = [];
    for (const page of pages) {
      const list = codeBlocks(ROOT, page);
      list.forEach((block, i) => {
        if (block.mark?.kind !== 'run') return;
        if (block.lang !== 'sh') wrong.push(`${where(block)} is marked run but is not a sh block`);
        if (list[i + 1] === undefined) wrong.push(`${where(block)} is followed by no output block`);
      });
    }
    expect(wrong).toEqual([]);
  });

  it('the quick start, the dry run, the RateLimit fields and the retry link are among them', () => {
    const runs = blocks.filter((b) => b.mark?.kind === 'run');
    const on = (page: string, text: string): boolean => runs.some((b) => b.page === page && b.text.includes(text));
    expect(on('README.md', 'curl')).toBe(true);
    expect(on('docs/dry-runs-and-reports.md', 'GraphQL-Cost: validate')).toBe(true);
    expect(on('docs/headers.md', 'ratelimit')).toBe(true);
    expect(on('docs/clients.md', 'examples/apollo-client.ts')).toBe(true);
  });
});

describe('links between pages', () => {
  const slug = (heading: string): string =>
    heading
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\- _]/gu, '')
      .replace(/ /g, '-');
  const anchors = (page: string): Set<string> => {
    const found = new Set<string>();
    let fenced = false;
    for (const line of readFileSync(join(ROOT, page), 'utf8').split('\n')) {
      if (line.startsWith('```')) fenced = !fenced;
      const heading = /^#{1,6} (.*)$/.exec(line);
      if (heading && !fenced) found.add(slug(heading[1] ?? ''));
    }
    return found;
  };

  it.each(pages)('%s links only to pages and headings that exist', (page) => {
    const text = readFileSync(join(ROOT, page), 'utf8').replace(/```[\s\S]*?```/g, '').replace(/`[^`\n]*`/g, '');
    const broken: string[] = [];
    for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (target === undefined || /^[a-z]+:/.test(target)) continue;
      const [path = '', anchor] = target.split('#');
      const file = path === '' ? page : normalize(join(dirname(page), path));
      if (!existsSync(join(ROOT, file))) broken.push(`${target} (no ${file})`);
      else if (anchor !== undefined && file.endsWith('.md') && !anchors(file).has(anchor)) broken.push(`${target} (no heading #${anchor} in ${file})`);
    }
    expect(broken).toEqual([]);
  });
});

describe('comparing output', () => {
  it('takes a shown time as measured, within the time the commands ran plus a second or a tenth of it, and every other character as printed', () => {
    expect(outputDifference('{"retryAfter":14.952}\nHTTP 429', '{"retryAfter":14.21}\r\nHTTP 429\n')).toBeUndefined();
    expect(outputDifference('{"retryAfter":4.952}', '{"retryAfter":3.9}')).toContain('line 1');
    expect(outputDifference('{"retryAfter":59.958}', '{"retryAfter":54.1}')).toBeUndefined();
    expect(outputDifference('{"retryAfter":59.958}', '{"retryAfter":53.9}')).toContain('line 1');
    // … plus the time the commands took to run
    expect(outputDifference('{"retryAfter":59.958}', '{"retryAfter":51.262}', 8.7)).toBeUndefined();
    expect(outputDifference('served after 15.0 s', 'served after 0.0 s', 3)).toContain('line 1');
    expect(outputDifference('{"cost":2,"remaining":992}', '{"cost":20,"remaining":984}')).toContain('line 1');
    expect(outputDifference('a\nb', 'a')).toContain('line 2');
    expect(outputDifference('Date: …', 'Date: Wed, 02 Dec 2026 04:45:47 GMT')).toBeUndefined();
  });
});
