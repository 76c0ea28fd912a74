import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A throwaway `redis-server` owned by this process. */
export interface RedisServer {
  readonly url: string;
  /** Stops the server and removes its directory. Safe to call twice. */
  stop(): Promise<void>;
}

const READY = 'Ready to accept connections';
const START_TIMEOUT_MS = 10_000;
const STOP_TIMEOUT_MS = 5_000;

/**
 * Starts `redis-server` (`REDIS_SERVER` or the one on PATH) on a free
 * loopback port with persistence off, in a temporary directory. The server
 * is killed when this process exits, even if `stop` is never called.
 */
export async function startRedisServer(binary = process.env.REDIS_SERVER ?? 'redis-server'): Promise<RedisServer> {
  const dir = await mkdtemp(join(tmpdir(), 'tb-bench-redis-'));
  const port = await freePort();
  const child = spawn(
    binary,
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--daemonize', 'no'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  // A crash or Ctrl-C must not leave a server behind.
  const killOnExit = (): void => {
    child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  };
  process.on('exit', killOnExit);

  let log = '';
  const collect = (chunk: Buffer): void => {
    log = (log + chunk.toString('utf8')).slice(-4000);
  };
  child.stdout.on('data', collect);
  child.stderr.on('data', collect);

  const stop = async (): Promise<void> => {
    process.off('exit', killOnExit);
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
      await exited;
      clearTimeout(timer);
    }
    await rm(dir, { recursive: true, force: true });
  };

  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`redis-server did not start within ${START_TIMEOUT_MS} ms:\n${log}`)), START_TIMEOUT_MS);
      const done = (error?: Error): void => {
        clearTimeout(timer);
        child.stdout.off('data', onData);
        child.off('error', onError);
        child.off('exit', onExit);
        if (error) reject(error);
        else resolve();
      };
      const onData = (): void => {
        if (log.includes(READY)) done();
      };
      const onError = (error: Error): void => done(new Error(`cannot start ${binary}: ${error.message}`));
      const onExit = (code: number | null): void => done(new Error(`redis-server exited with code ${String(code)}:\n${log}`));
      child.stdout.on('data', onData);
      child.once('error', onError);
      child.once('exit', onExit);
    });
  } catch (error) {
    await stop();
    throw error;
  }
  return { url: `redis://127.0.0.1:${port}`, stop };
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => (port > 0 ? resolve(port) : reject(new Error('no free port'))));
    });
  });
}
