// Apollo Server with the limiter in a child process of its own with a
// 512 MB heap (test/support/hostile-server.ts), for tests that send it
// documents built to make pricing take memory.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { waitFor } from './graphql.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface HostileChild {
  readonly url: string;
  readonly process: ChildProcess;
  /** What it printed so far, stdout and stderr. */
  output(): string;
  stop(): void;
}

/** Starts it over HOSTILE_SCHEMA, or NARROWED_SCHEMA, and waits until it listens. */
export async function startHostileChild(schema: 'hostile' | 'narrowed' = 'hostile'): Promise<HostileChild> {
  const child = spawn(process.execPath, ['--max-old-space-size=512', '--import', 'tsx', 'test/support/hostile-server.ts', schema], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => void (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => void (output += chunk.toString()));
  await waitFor(`the server to listen (output: ${output})`, 120_000, () => {
    if (child.exitCode !== null) throw new Error(`the server exited with ${child.exitCode}: ${output}`);
    return /listening at (\S+)/.test(output);
  });
  return {
    url: /listening at (\S+)/.exec(output)![1]!,
    process: child,
    output: () => output,
    stop: () => {
      if (child.exitCode === null) child.kill();
    },
  };
}
