// Test-side handles on the Node processes a scenario runs: replica servers
// and the load generator. Every wait has a deadline, output is drained (a
// full pipe would stall a server) and kept in a short tail, and whatever a
// test leaves running is killed when the test process exits.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { LoadConfig, LoadRecord } from './load.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const MARKER = /RELIABILITY-(UNHANDLED-REJECTION|UNCAUGHT-EXCEPTION)|Unhandled error event|UnhandledPromiseRejection/;
const TAIL_LINES = 40;
/** What the plugin logs each time the store fails or times out; replicas count these lines. */
export const STORE_FAILED = /graphql-token-bucket: store failed/;

const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

export class NodeProcess {
  readonly child: ChildProcess;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Lines that report an unhandled rejection, an uncaught exception or an unhandled ioredis error. */
  readonly markers: string[] = [];
  private readonly tail: string[] = [];
  private readonly counts = new Map<RegExp, number>();
  private readonly waiters: { pattern: RegExp; resolve: (line: string) => void }[] = [];

  constructor(
    readonly name: string,
    script: string,
    args: string[],
    env: Record<string, string>,
  ) {
    this.child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(new URL(script, import.meta.url)), ...args], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.add(this.child);
    this.exited = new Promise((resolve) => {
      this.child.once('exit', (code, signal) => {
        children.delete(this.child);
        resolve({ code, signal });
      });
    });
    for (const stream of [this.child.stdout, this.child.stderr]) {
      let partial = '';
      stream?.setEncoding('utf8');
      stream?.on('data', (text: string) => {
        const lines = (partial + text).split('\n');
        partial = lines.pop() ?? '';
        for (const line of lines) this.line(line);
      });
    }
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** How many output lines matched `pattern` since `watch(pattern)`. */
  count(pattern: RegExp): number {
    return this.counts.get(pattern) ?? 0;
  }

  watch(pattern: RegExp): void {
    if (!this.counts.has(pattern)) this.counts.set(pattern, 0);
  }

  output(): string {
    return this.tail.join('\n');
  }

  /** Resolves with the first line matching `pattern`; rejects when the process exits first or after `timeoutMs`. */
  waitForLine(pattern: RegExp, timeoutMs: number): Promise<string> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${this.name}: no line matching ${pattern} within ${timeoutMs} ms\n${this.output()}`)), timeoutMs);
      const waiter = {
        pattern,
        resolve: (line: string) => {
          clearTimeout(timer);
          resolve(line);
        },
      };
      this.waiters.push(waiter);
      void this.exited.then(({ code, signal }) => {
        clearTimeout(timer);
        reject(new Error(`${this.name} exited (${code ?? signal}) before printing ${pattern}\n${this.output()}`));
      });
    });
  }

  /** SIGTERM, SIGKILL after `graceMs`; resolves once the process is gone. */
  async stop(graceMs = 3_000): Promise<void> {
    if (!this.alive()) return;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }

  private line(line: string): void {
    if (MARKER.test(line)) this.markers.push(line);
    for (const pattern of this.counts.keys()) if (pattern.test(line)) this.counts.set(pattern, (this.counts.get(pattern) ?? 0) + 1);
    this.tail.push(line.length > 500 ? `${line.slice(0, 500)}…` : line);
    if (this.tail.length > TAIL_LINES) this.tail.shift();
    for (let i = this.waiters.length - 1; i >= 0; i--) {
      const waiter = this.waiters[i]!;
      if (waiter.pattern.test(line)) {
        this.waiters.splice(i, 1);
        waiter.resolve(line);
      }
    }
  }
}

export interface ReplicaEnv {
  REDIS_URL?: string;
  REDIS_CLUSTER_NODES?: string;
  PREFIX: string;
  CAPACITY: number;
  RATE_PER_SECOND: number;
  ON_STORE_ERROR?: 'allow' | 'deny';
  STORE_TIMEOUT_MS?: number;
}

export interface Replica extends NodeProcess {
  readonly url: string;
}

/** Starts replicas of the example server together; resolves once all listen. */
export async function startReplicas(count: number, env: ReplicaEnv): Promise<Replica[]> {
  const stringEnv = Object.fromEntries(Object.entries(env).map(([k, v]) => [k, String(v)]));
  const processes = Array.from({ length: count }, (_, i) => new NodeProcess(`replica ${i + 1}`, './replica-server.ts', [], stringEnv));
  for (const p of processes) p.watch(STORE_FAILED);
  try {
    const lines = await Promise.all(processes.map((p) => p.waitForLine(/^READY /, 30_000)));
    return processes.map((p, i) => Object.assign(p, { url: lines[i]!.slice('READY '.length).trim() }));
  } catch (error) {
    await Promise.all(processes.map((p) => p.stop()));
    throw error;
  }
}

export interface LoadRun {
  /** Epoch ms at which the first request went out. */
  started: Promise<number>;
  records: Promise<LoadRecord[]>;
  process: NodeProcess;
}

/** Starts the load generator process; `records` resolves when it has finished. */
export function startLoad(config: Omit<LoadConfig, 'recordsFile'>): LoadRun {
  const dir = mkdtempSync(join(tmpdir(), 'gtb-load-'));
  const recordsFile = join(dir, 'records.json');
  const child = new NodeProcess('load generator', './load.ts', [JSON.stringify({ ...config, recordsFile })], {});
  const started = child.waitForLine(/^LOAD-STARTED /, 30_000).then((line) => Number(line.split(' ')[1]));
  const records = (async () => {
    try {
      const { code, signal } = await child.exited;
      if (code !== 0) throw new Error(`load generator exited (${code ?? signal})\n${child.output()}`);
      return JSON.parse(readFileSync(recordsFile, 'utf8')) as LoadRecord[];
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  })();
  started.catch(() => {});
  return { started, records, process: child };
}

export async function stopAll(processes: readonly (NodeProcess | undefined)[]): Promise<void> {
  await Promise.all(processes.map((p) => p?.stop()));
}
