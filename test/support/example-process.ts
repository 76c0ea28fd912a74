// Runs an example as a user runs it (`npx tsx examples/x.ts`): a child
// process on a free port, read until it says where it listens.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { waitFor } from './graphql.js';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface ExampleProcess {
  /** What the process printed so far, stdout and stderr interleaved. */
  readonly output: string;
  readonly port: number;
  /** Waits until the output matches, or fails naming what was printed. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<RegExpExecArray>;
  stop(): Promise<void>;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

/** Starts `examples/<file>` with tsx (a built `.js` file with node alone), PORT a free port, and `env` on top of this process's environment. */
export async function startExample(file: string, env: Record<string, string> = {}): Promise<ExampleProcess> {
  const port = await freePort();
  let output = '';
  const child: ChildProcess = spawn(process.execPath, file.endsWith('.js') ? [file] : ['--import', 'tsx', file], {
    cwd: ROOT,
    env: { ...process.env, PORT: String(port), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.on('data', (chunk: Buffer) => void (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => void (output += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    get output() {
      return output;
    },
    port,
    async waitFor(pattern, timeoutMs = 180_000) {
      let match: RegExpExecArray | null = null;
      try {
        await waitFor(`${file} to print ${String(pattern)}`, timeoutMs, () => (match = pattern.exec(output)) !== null || child.exitCode !== null);
      } catch (error) {
        throw new Error(`${(error as Error).message}; it printed:\n${output}`, { cause: error });
      }
      if (match === null) throw new Error(`${file} exited (${String(child.exitCode)}) before printing ${String(pattern)}; it printed:\n${output}`);
      return match;
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const killed = setTimeout(() => child.kill('SIGKILL'), 5_000);
        await exited;
        clearTimeout(killed);
      }
    },
  };
}
