import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Cluster, Redis } from 'ioredis';

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
 * A Lua script run by EVALSHA, falling back to EVAL when the server does not
 * have it cached (after SCRIPT FLUSH, a restart or a failover): one round
 * trip in the common case, and the next EVALSHA finds it loaded again.
 */
export class LuaScript {
  readonly source: string;
  readonly sha: string;

  constructor(fileName: string) {
    this.source = readFileSync(join(luaDirectory(), fileName), 'utf8');
    this.sha = createHash('sha1').update(this.source).digest('hex');
  }

  async run(client: Redis | Cluster, keys: readonly string[], args: readonly (string | number)[]): Promise<unknown> {
    try {
      return await client.evalsha(this.sha, keys.length, ...keys, ...args);
    } catch (error) {
      if (error instanceof Error && error.message.startsWith('NOSCRIPT')) {
        return await client.eval(this.source, keys.length, ...keys, ...args);
      }
      throw error;
    }
  }
}
