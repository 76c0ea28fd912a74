// The manual's code blocks and the marks that tie them to something checked
// (docs/internals.md, "Code blocks the tests check"):
//
//   <!-- file: examples/x.ts -->   the next block is that file, from its first import on
//   <!-- fragment -->              the next block imports something but is not a whole program
//   <!-- run: SETUP -->            the next block is a shell command; the code block after it
//                                  is what it prints, against the server SETUP names
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

export interface CodeBlock {
  /** The page, relative to the repository's root. */
  page: string;
  /** 1-based line of the opening fence. */
  line: number;
  /** The info string's first word (`ts`, `sh`, `json`, …), or ''. */
  lang: string;
  text: string;
  /** The `<!-- … -->` mark right before the block (blank lines between allowed), if any. */
  mark: { kind: 'file' | 'fragment' | 'run'; value: string } | undefined;
}

const MARK = /^<!--\s*(file|fragment|run)\s*:?\s*(.*?)\s*-->$/;

export function codeBlocks(root: string, page: string): CodeBlock[] {
  const lines = readFileSync(join(root, page), 'utf8').split('\n');
  const blocks: CodeBlock[] = [];
  let mark: CodeBlock['mark'];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? '';
    const found = MARK.exec(line.trim());
    if (found) {
      mark = { kind: found[1] as 'file' | 'fragment' | 'run', value: found[2] ?? '' };
      continue;
    }
    const fence = /^(`{3,})\s*([\w-]*)/.exec(line);
    if (fence) {
      const close = fence[1] ?? '```';
      const body: string[] = [];
      const start = i;
      for (i++; i < lines.length && !(lines[i] ?? '').startsWith(close); i++) body.push(lines[i] ?? '');
      blocks.push({ page, line: start + 1, lang: fence[2] ?? '', text: body.join('\n'), mark });
      mark = undefined;
      continue;
    }
    if (line.trim() !== '') mark = undefined;
  }
  return blocks;
}

/** Every page of the manual: README.md, CHANGELOG.md and docs/**.md. */
export function manualPages(root: string): string[] {
  const pages = ['README.md', 'CHANGELOG.md', 'examples/README.md'];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
      if (entry.isDirectory()) walk(join(dir, entry.name));
      else if (entry.name.endsWith('.md')) pages.push(relative(root, join(root, dir, entry.name)));
    }
  };
  walk('docs');
  return pages;
}

/** Entry points as a user imports them, for the paths an example imports them by. */
const ENTRY_POINTS: [RegExp, string][] = [
  [/'(?:\.\.\/)+src\/index\.js'/g, "'graphql-token-bucket'"],
  [/'(?:\.\.\/)+src\/client\.js'/g, "'graphql-token-bucket/client'"],
  [/'(?:\.\.\/)+src\/apollo-client\.js'/g, "'graphql-token-bucket/apollo-client'"],
  [/'(?:\.\.\/)+src\/([\w-]+)\/index\.js'/g, "'graphql-token-bucket/$1'"],
];

/** An example file as the manual shows it: from its first import on, importing the package by its published names. */
export function asShown(source: string): string {
  const start = source.search(/^import /m);
  let text = start < 0 ? source : source.slice(start);
  for (const [from, to] of ENTRY_POINTS) text = text.replace(from, to);
  return text.trimEnd();
}

/**
 * Whether `printed` is what `shown` says, line by line: trailing white space
 * and `\r` ignored; `…` in a shown line stands for any text; a number with a
 * decimal point stands for a time in seconds measured while the commands
 * ran, which may be off by `runSeconds` (how long they took: a wait shrinks
 * and a duration grows while they run) plus a second or a tenth of it,
 * whichever is more. Returns the first difference, or undefined.
 */
export function outputDifference(shown: string, printed: string, runSeconds = 0): string | undefined {
  const want = trimLines(shown);
  const got = trimLines(printed);
  for (let i = 0; i < Math.max(want.length, got.length); i++) {
    const w = want[i];
    const g = got[i];
    if (w === undefined || g === undefined || !lineMatches(w, g, runSeconds)) {
      return `line ${i + 1}:\n  shown:   ${w ?? '(nothing)'}\n  printed: ${g ?? '(nothing)'}`;
    }
  }
  return undefined;
}

function trimLines(text: string): string[] {
  const lines = text.split('\n').map((l) => l.replace(/\s+$/, ''));
  while (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  return lines;
}

const TIME = /-?\d+\.\d+/g;

function lineMatches(shown: string, printed: string, runSeconds: number): boolean {
  const times: number[] = [];
  const pattern = shown
    .split('…')
    .map((part) =>
      part
        .split(TIME)
        .map((text) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
        .join('(-?\\d+(?:\\.\\d+)?)'),
    )
    .join('.*');
  for (const m of shown.matchAll(TIME)) times.push(Number(m[0]));
  const match = new RegExp(`^${pattern}$`).exec(printed);
  if (!match) return false;
  return times.every((t, i) => Math.abs(Number(match[i + 1]) - t) < runSeconds + Math.max(1, Math.abs(t) / 10));
}
