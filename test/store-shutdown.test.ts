// A service shutting down during a Redis outage disconnects its client while the client waits to
// reconnect. ioredis then emits no 'end', and the store's own connection, which closes with the client,
// went on reconnecting: the process never exited. It must exit as it would without the store.
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, inject, it } from 'vitest';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const CHILD = join(ROOT, 'test', 'support', 'disconnect-child.ts');

/** Runs the child; resolves with its output once it exits, or says it did not within `ms` of its first line. */
function runChild(args: readonly string[], ms: number): Promise<{ exited: boolean; output: string[] }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', CHILD, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    const output: string[] = [];
    let stderr = '';
    child.stderr.on('data', (text: Buffer) => (stderr += text.toString()));
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (text: string) => output.push(...text.split('\n').filter((line) => line !== '')));
    // a hang guard, started once the child has connected
    let timer: NodeJS.Timeout | undefined;
    const guard = setInterval(() => {
      if (output.length === 0 || timer) return;
      timer = setTimeout(() => {
        child.kill('SIGKILL');
        resolve({ exited: false, output });
      }, ms);
    }, 20);
    child.on('exit', (code) => {
      clearInterval(guard);
      clearTimeout(timer);
      if (code !== 0 && code !== null) reject(new Error(`child exited ${code}: ${stderr}`));
      else resolve({ exited: true, output });
    });
  });
}

describe.each(['ioredis', 'iovalkey'] as const)('%s: a process whose client is disconnected while Redis is down', (family) => {
  it('exits', async () => {
    const { exited, output } = await runChild([family, inject('redisUrl'), `${family}-${Date.now()}`], 8_000);
    expect(output).toEqual([JSON.stringify({ allowed: true, remaining: 4 }), 'disconnected']);
    expect(exited).toBe(true);
  }, 30_000);
});
