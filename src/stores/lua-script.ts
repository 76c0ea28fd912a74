import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ScriptClient } from './redis-client.js';

/** Finds `lua/` whether this file runs from `src/stores` or `dist/src/stores`. */
function luaDirectory(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    const candidate = join(dir, 'lua');
    if (existsSync(join(candidate, 'acquire.lua'))) return candidate;
    dir = dirname(dir);
  }
  throw new Error('graphql-token-bucket: the lua/ directory is missing from the installed package');
}

/**
 * A file of `lua/` with each `--#include name.lua` line (alone on its line)
 * replaced by that file, indented as the line: code two scripts share is
 * written once.
 */
function assemble(dir: string, fileName: string): string {
  return readFileSync(join(dir, fileName), 'utf8').replace(/^([ \t]*)--#include ([\w.-]+\.lua)[ \t]*$/gm, (_line, indent: string, part: string) =>
    assemble(dir, part)
      .replace(/\n$/, '')
      .split('\n')
      .map((line) => (line === '' ? line : indent + line))
      .join('\n'),
  );
}

/**
 * A Lua script of `lua/` (its includes expanded) and its SHA-1, which the clients run by EVALSHA,
 * falling back to EVAL when the server does not have it cached (after
 * SCRIPT FLUSH, a restart or a failover; see redis-client.ts).
 */
export class LuaScript {
  readonly source: string;
  readonly sha: string;
  /** The shared acquire script (`Script.shared`). */
  readonly shared: boolean;
  /** Sent by source every time (`Script.bySource`). */
  readonly bySource: boolean;

  /**
   * `header`: a first line put before the file, such as the flags of a Redis 7 script
   * (`#!lua flags=…`), which Redis reads only there.
   */
  constructor(fileName: string, options: { shared?: boolean; header?: string; bySource?: boolean } = {}) {
    const body = assemble(luaDirectory(), fileName);
    this.source = options.header === undefined ? body : `${options.header}\n${body}`;
    this.sha = createHash('sha1').update(this.source).digest('hex');
    this.shared = options.shared === true;
    this.bySource = options.bySource === true;
  }

  run(client: ScriptClient, keys: readonly string[], args: readonly (string | number)[]): Promise<unknown> {
    return client.runScript(this, keys, args);
  }
}
