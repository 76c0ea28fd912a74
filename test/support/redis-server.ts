// Real redis-server processes for tests: a standalone server a test can crash,
// restart and freeze, and a small Redis Cluster. Every wait polls the server
// with a deadline; nothing sleeps and hopes.
//
// Talks to Redis over a bare socket (see `command`) so that starting a server
// does not depend on the client library under test.
import { execFileSync, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { accessSync, constants, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';

export interface RedisServerOptions {
  /** Port to listen on; default: a free port (retried if another process takes it first). */
  port?: number;
  /** Extra redis-server arguments, after ours, so they win: e.g. `['--maxmemory', '10mb']`. */
  args?: string[];
}

export interface RedisServerProcess {
  readonly host: string;
  readonly port: number;
  /** `redis://127.0.0.1:<port>` */
  readonly url: string;
  /** pid of the current process (changes on restart). */
  readonly pid: number;
  /** Graceful stop (SIGTERM, then SIGKILL after 3 s); waits for exit, removes the data dir. Idempotent. */
  stop(): Promise<void>;
  /** SIGKILL, like a crash; waits for exit. The port stays reserved for `restart()`. */
  kill(): Promise<void>;
  /** Kills if running, then starts again on the same port with empty data; resolves once PING answers. */
  restart(): Promise<void>;
  /** SIGSTOP: the server accepts connections but answers nothing until `resume()`. */
  pause(): Promise<void>;
  /** SIGCONT; resolves once PING answers. */
  resume(): Promise<void>;
}

export interface RedisClusterOptions {
  /** default 3 */
  masters?: number;
  /** default 0 */
  replicasPerMaster?: number;
  /** cluster-node-timeout: how long before a silent node is failed over; default 5000 ms. */
  nodeTimeoutMs?: number;
}

export interface RedisClusterProcess {
  /** Masters first (in slot order), then replicas. */
  readonly nodes: { host: string; port: number }[];
  /** Same order as `nodes`. */
  readonly servers: RedisServerProcess[];
  /**
   * Resolves once every running node reports cluster_state:ok with all slots
   * served, e.g. after a restart (a restarted master refuses writes for ~2 s)
   * or a failover. Throws after `timeoutMs` (default 30 s).
   */
  waitUntilHealthy(timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

const HOST = '127.0.0.1';
const START_TIMEOUT_MS = 15_000;
const CLUSTER_TIMEOUT_MS = 30_000;
const STOP_GRACE_MS = 3_000;
const CLUSTER_SLOTS = 16_384;
const CLUSTER_CONFIG_FILE = 'nodes.conf';

// ---------------------------------------------------------------- binaries

/** `REDIS_SERVER_BIN` if set, else `redis-server` from PATH; null when there is none. */
export function findRedisServerBinary(): string | null {
  const fromEnv = process.env['REDIS_SERVER_BIN'];
  if (fromEnv) return isExecutable(fromEnv) ? fromEnv : null;
  return findOnPath('redis-server');
}

function findOnPath(name: string): string | null {
  const dirs = (process.env['PATH'] ?? '').split(delimiter).filter(Boolean);
  for (const dir of [...dirs, '/usr/local/bin', '/usr/bin', '/usr/sbin', '/opt/homebrew/bin']) {
    const candidate = join(dir, name);
    if (isExecutable(candidate)) return candidate;
  }
  return null;
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function requireBinary(): string {
  const binary = findRedisServerBinary();
  if (binary === null) {
    throw new Error(
      'redis-server was not found on PATH. Install it (`apt-get install -y redis-server`, ' +
        '`brew install redis`) or point REDIS_SERVER_BIN at it.',
    );
  }
  return binary;
}

const versions = new Map<string, [number, number]>();

/** [major, minor] of a redis-server binary, from `redis-server --version`. */
function binaryVersion(binary: string): [number, number] {
  let version = versions.get(binary);
  if (version === undefined) {
    const out = execFileSync(binary, ['--version'], { encoding: 'utf8' });
    const match = /v=(\d+)\.(\d+)/.exec(out);
    version = match ? [Number(match[1]), Number(match[2])] : [0, 0];
    versions.set(binary, version);
  }
  return version;
}

// ---------------------------------------------------------------- ports

// Ports this process has handed out: the kernel readily returns a just-closed
// port to the next bind(0), so two servers starting together could get the same one.
const handedOut = new Set<number>();

/** A TCP port on 127.0.0.1 that was free a moment ago and that this process has not handed out before. */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = await anyFreePort();
    if (!handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error('could not find a free TCP port');
}

function anyFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, HOST, () => {
      const address = server.address();
      server.close(() => {
        if (address !== null && typeof address === 'object') resolve(address.port);
        else reject(new Error('could not read the port of a listening socket'));
      });
    });
  });
}

function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, HOST, () => server.close(() => resolve(true)));
  });
}

/** Redis < 7 puts the cluster bus on port + 10000, so both must be free. */
async function freePortWithImplicitBus(): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 20_000);
    if (handedOut.has(port) || handedOut.has(port + 10_000)) continue;
    if ((await portIsFree(port)) && (await portIsFree(port + 10_000))) {
      handedOut.add(port).add(port + 10_000);
      return port;
    }
  }
  throw new Error('found no free port p with p + 10000 free as well (Redis Cluster bus)');
}

// ---------------------------------------------------------------- RESP over a bare socket

type Reply = string | number | null | Error | Reply[];

/** Sends commands on one connection and returns their replies; rejects on connect error or timeout. */
function command(port: number, commands: string[][], timeoutMs = 2_000, host = HOST): Promise<Reply[]> {
  return new Promise((resolve, reject) => {
    const socket = createConnection({ host, port });
    let buffer = Buffer.alloc(0);
    const timer = setTimeout(() => fail(new Error(`no reply from ${host}:${port} within ${timeoutMs} ms`)), timeoutMs);
    const fail = (error: Error) => {
      clearTimeout(timer);
      socket.destroy();
      reject(error);
    };
    socket.once('error', fail);
    socket.once('close', () => fail(new Error(`${host}:${port} closed the connection`)));
    socket.on('data', (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      const replies: Reply[] = [];
      let offset = 0;
      while (replies.length < commands.length) {
        const parsed = parseReply(buffer, offset);
        if (parsed === undefined) return;
        replies.push(parsed[0]);
        offset = parsed[1];
      }
      clearTimeout(timer);
      socket.removeAllListeners('close');
      socket.destroy();
      resolve(replies);
    });
    socket.write(commands.map(encodeCommand).join(''));
  });
}

function encodeCommand(args: string[]): string {
  return `*${args.length}\r\n` + args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('');
}

function parseReply(buffer: Buffer, offset: number): [Reply, number] | undefined {
  const end = buffer.indexOf('\r\n', offset);
  if (end === -1) return undefined;
  const line = buffer.toString('utf8', offset + 1, end);
  const next = end + 2;
  switch (String.fromCharCode(buffer[offset] ?? 0)) {
    case '+':
      return [line, next];
    case '-':
      return [new Error(line), next];
    case ':':
      return [Number(line), next];
    case '$': {
      const length = Number(line);
      if (length < 0) return [null, next];
      if (buffer.length < next + length + 2) return undefined;
      return [buffer.toString('utf8', next, next + length), next + length + 2];
    }
    case '*': {
      const count = Number(line);
      if (count < 0) return [null, next];
      const items: Reply[] = [];
      let at = next;
      for (let i = 0; i < count; i++) {
        const item = parseReply(buffer, at);
        if (item === undefined) return undefined;
        items.push(item[0]);
        at = item[1];
      }
      return [items, at];
    }
    default:
      throw new Error(`unexpected RESP reply: ${JSON.stringify(line)}`);
  }
}

async function call(port: number, ...args: string[]): Promise<string> {
  const [reply] = await command(port, [args]);
  if (reply instanceof Error) throw new Error(`${args.slice(0, 3).join(' ')} on port ${port}: ${reply.message}`);
  return String(reply);
}

// ---------------------------------------------------------------- waiting

/** A server that cannot start; retrying the same port would not help unless `addressInUse`. */
class LaunchError extends Error {
  constructor(
    message: string,
    readonly addressInUse: boolean,
  ) {
    super(message);
  }
}

/**
 * Calls `probe` until it returns a value other than undefined; throws with the last reason after `timeoutMs`.
 * A `LaunchError` from the probe is final and thrown at once.
 */
async function waitUntil<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    let last: string;
    try {
      const value = await probe();
      if (value !== undefined) return value;
      last = 'condition not met yet';
    } catch (error) {
      if (error instanceof LaunchError) throw error;
      last = error instanceof Error ? error.message : String(error);
    }
    if (Date.now() >= deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${last})`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function hasExited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

/** Resolves true when the child exits within `timeoutMs`. Its timer keeps the event loop alive. */
function waitForExit(child: ChildProcess, timeoutMs: number): Promise<boolean> {
  if (hasExited(child)) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(hasExited(child)), timeoutMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/** Linux process state letter from /proc ('T' when stopped); null where /proc is unavailable. */
function processState(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  } catch {
    return null;
  }
}

// ---------------------------------------------------------------- cleanup on exit

interface Killable {
  killNow(): void;
}

// One registry and one 'exit' listener per process, however many times test
// isolation re-imports this module.
const REGISTRY = Symbol.for('graphql-token-bucket.test.redis-servers');
const running: Set<Killable> = ((globalThis as Record<symbol, Set<Killable> | undefined>)[REGISTRY] ??= (() => {
  const set = new Set<Killable>();
  // 'exit' runs on normal exit and process.exit(); a watchdog per server covers the rest (signals, crashes).
  process.once('exit', () => {
    for (const server of set) server.killNow();
  });
  return set;
})());

/**
 * A detached shell that SIGKILLs the server and removes its directory once this
 * process is gone, whatever way it went (SIGKILL, crash). Exits on its own after that.
 */
function spawnWatchdog(pid: number, dir: string): ChildProcess {
  const script = 'while kill -0 "$1" 2>/dev/null; do sleep 1; done; kill -9 "$2" 2>/dev/null; rm -rf "$3"';
  const watchdog = spawn('/bin/sh', ['-c', script, 'redis-watchdog', String(process.pid), String(pid), dir], {
    detached: true,
    stdio: 'ignore',
  });
  watchdog.on('error', () => {});
  watchdog.unref();
  return watchdog;
}

function signal(pid: number | undefined, name: NodeJS.Signals): void {
  if (pid === undefined) return;
  try {
    process.kill(pid, name);
  } catch {
    // already gone
  }
}

// ---------------------------------------------------------------- one server

class ManagedRedisServer implements RedisServerProcess {
  readonly host = HOST;
  #child: ChildProcess | undefined;
  #watchdog: ChildProcess | undefined;
  #pid = 0;
  #stopped = false;

  constructor(
    readonly binary: string,
    readonly port: number,
    readonly dir: string,
    readonly args: readonly string[],
    /** Cluster bus port when given explicitly (Redis >= 7). */
    readonly busPort: number | undefined,
  ) {}

  get url(): string {
    return `redis://${this.host}:${this.port}`;
  }

  get pid(): number {
    return this.#pid;
  }

  get isRunning(): boolean {
    return this.#child !== undefined && !hasExited(this.#child);
  }

  async launch(): Promise<void> {
    const args = [
      '--port', String(this.port),
      '--bind', this.host,
      '--save', '',
      '--appendonly', 'no',
      '--protected-mode', 'no',
      '--daemonize', 'no',
      '--dir', this.dir,
      '--logfile', join(this.dir, 'redis.log'),
      ...this.args,
    ];
    const child = spawn(this.binary, args, { cwd: this.dir, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    let spawnError: Error | undefined;
    child.on('error', (error) => (spawnError = error));
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (text: string) => (stderr = (stderr + text).slice(-4_000)));
    // A server a test forgot to stop must not keep the worker alive; the exit hook and watchdog kill it.
    child.unref();
    (child.stderr as { unref?: () => void } | null)?.unref?.();
    this.#child = child;
    this.#stopped = false;
    if (child.pid !== undefined) {
      this.#pid = child.pid;
      this.#watchdog = spawnWatchdog(child.pid, this.dir);
    }
    running.add(this);

    try {
      await waitUntil(`redis-server on port ${this.port} to answer PING`, START_TIMEOUT_MS, async () => {
        if (spawnError !== undefined) throw new LaunchError(`could not start ${this.binary}: ${spawnError.message}`, false);
        if (hasExited(child)) {
          const log = this.#logTail();
          throw new LaunchError(
            `redis-server on port ${this.port} exited (${child.exitCode ?? child.signalCode}) during startup:\n${stderr}${log}`,
            /Address already in use/i.test(stderr + log),
          );
        }
        const [pong, info] = await command(this.port, [['PING'], ['INFO', 'server']], 1_000);
        // The pid check makes sure we reached our process, not another one that won a race for the port.
        return pong === 'PONG' && typeof info === 'string' && info.includes(`process_id:${child.pid}\r`) ? true : undefined;
      });
    } catch (error) {
      this.killNow();
      await waitForExit(child, STOP_GRACE_MS);
      if (error instanceof LaunchError) throw error;
      throw new LaunchError(`${(error as Error).message}\n${stderr}${this.#logTail()}`, false);
    }
  }

  #logTail(): string {
    try {
      return readFileSync(join(this.dir, 'redis.log'), 'utf8').split('\n').slice(-15).join('\n');
    } catch {
      return '';
    }
  }

  /** Synchronous SIGKILL of the server and its watchdog; for exit paths. */
  killNow(): void {
    if (this.#child !== undefined && !hasExited(this.#child)) signal(this.#child.pid, 'SIGKILL');
    this.#dropWatchdog();
    running.delete(this);
  }

  #dropWatchdog(): void {
    const watchdog = this.#watchdog;
    this.#watchdog = undefined;
    if (watchdog?.pid !== undefined) signal(-watchdog.pid, 'SIGKILL');
  }

  async kill(): Promise<void> {
    const child = this.#child;
    this.killNow();
    if (child !== undefined && !(await waitForExit(child, STOP_GRACE_MS))) {
      throw new Error(`redis-server pid ${child.pid} did not exit after SIGKILL`);
    }
  }

  async stop(): Promise<void> {
    if (this.#stopped) return;
    const child = this.#child;
    if (child !== undefined && !hasExited(child)) {
      signal(child.pid, 'SIGTERM');
      signal(child.pid, 'SIGCONT'); // a paused server handles SIGTERM only once it runs again
      if (!(await waitForExit(child, STOP_GRACE_MS))) await this.kill();
    }
    this.killNow();
    this.#stopped = true;
    rmSync(this.dir, { recursive: true, force: true });
  }

  async restart(): Promise<void> {
    await this.kill();
    // Empty data, but a cluster node keeps its identity and slots so it rejoins its cluster.
    for (const entry of safeReaddir(this.dir)) {
      if (entry !== CLUSTER_CONFIG_FILE) rmSync(join(this.dir, entry), { recursive: true, force: true });
    }
    mkdirSync(this.dir, { recursive: true }); // restart() after stop() needs it back
    await this.launch();
  }

  async pause(): Promise<void> {
    this.#requireRunning('pause');
    signal(this.#pid, 'SIGSTOP');
    if (processState(this.#pid) === null) return;
    await waitUntil(`pid ${this.#pid} to stop`, 5_000, async () => (processState(this.#pid) === 'T' ? true : undefined));
  }

  async resume(): Promise<void> {
    this.#requireRunning('resume');
    signal(this.#pid, 'SIGCONT');
    await waitUntil(`redis-server on port ${this.port} to answer PING after SIGCONT`, START_TIMEOUT_MS, async () => {
      const [pong] = await command(this.port, [['PING']], 1_000);
      return pong === 'PONG' ? true : undefined;
    });
  }

  #requireRunning(action: string): void {
    if (!this.isRunning) throw new Error(`cannot ${action} redis-server on port ${this.port}: it is not running`);
  }
}

function safeReaddir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

interface LaunchOptions extends RedisServerOptions {
  /** Start with cluster-enabled yes; the value is cluster-node-timeout in ms. */
  clusterNodeTimeoutMs?: number;
}

async function launchServer(options: LaunchOptions): Promise<ManagedRedisServer> {
  const binary = requireBinary();
  const clustered = options.clusterNodeTimeoutMs !== undefined;
  const explicitBus = clustered && binaryVersion(binary)[0] >= 7;
  const attempts = options.port === undefined ? 5 : 1;
  for (let attempt = 1; ; attempt++) {
    const port = options.port ?? (clustered && !explicitBus ? await freePortWithImplicitBus() : await freePort());
    const busPort = explicitBus ? await freePort() : undefined;
    const args = [...(options.args ?? [])];
    if (clustered) {
      args.unshift(
        '--cluster-enabled', 'yes',
        '--cluster-config-file', CLUSTER_CONFIG_FILE,
        '--cluster-node-timeout', String(options.clusterNodeTimeoutMs),
        ...(busPort !== undefined ? ['--cluster-port', String(busPort)] : []),
      );
    }
    const dir = mkdtempSync(join(tmpdir(), 'gtb-redis-'));
    const server = new ManagedRedisServer(binary, port, dir, args, busPort);
    try {
      await server.launch();
      return server;
    } catch (error) {
      rmSync(dir, { recursive: true, force: true });
      if (!(error instanceof LaunchError && error.addressInUse && attempt < attempts)) throw error;
    }
  }
}

/** Starts a standalone redis-server in a temp dir, without persistence; resolves once PING answers. */
export function startRedisServer(opts: RedisServerOptions = {}): Promise<RedisServerProcess> {
  return launchServer(opts);
}

// ---------------------------------------------------------------- cluster

/**
 * Starts `masters` × (1 + `replicasPerMaster`) cluster-enabled servers, splits the
 * 16384 slots evenly over the masters and resolves once every node reports
 * cluster_state:ok and sees the same topology.
 */
export async function startRedisCluster(opts: RedisClusterOptions = {}): Promise<RedisClusterProcess> {
  const masters = opts.masters ?? 3;
  const replicas = opts.replicasPerMaster ?? 0;
  const nodeTimeoutMs = opts.nodeTimeoutMs ?? 5_000;
  if (!Number.isInteger(masters) || masters < 1) throw new RangeError('a cluster needs at least one master');
  if (!Number.isInteger(replicas) || replicas < 0) throw new RangeError('replicasPerMaster must be a non-negative integer');
  const binary = requireBinary();
  const [major, minor] = binaryVersion(binary);
  const v7 = major >= 7;
  const total = masters * (1 + replicas);

  const started = await Promise.allSettled(
    Array.from({ length: total }, () => launchServer({ clusterNodeTimeoutMs: nodeTimeoutMs })),
  );
  const servers = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const stop = async () => {
    await Promise.all(servers.map((s) => s.stop()));
  };
  const failed = started.find((r) => r.status === 'rejected');
  if (failed !== undefined) {
    await stop();
    throw failed.reason;
  }

  try {
    const ids = await Promise.all(servers.map((s) => call(s.port, 'CLUSTER', 'MYID')));
    // Distinct epochs up front, as redis-cli does, so nodes need not resolve collisions.
    await Promise.all(servers.map((s, i) => call(s.port, 'CLUSTER', 'SET-CONFIG-EPOCH', String(i + 1))));
    for (let m = 0; m < masters; m++) {
      const first = Math.floor((m * CLUSTER_SLOTS) / masters);
      const last = Math.floor(((m + 1) * CLUSTER_SLOTS) / masters) - 1;
      const port = servers[m]!.port;
      if (v7) await call(port, 'CLUSTER', 'ADDSLOTSRANGE', String(first), String(last));
      else await call(port, 'CLUSTER', 'ADDSLOTS', ...Array.from({ length: last - first + 1 }, (_, i) => String(first + i)));
    }
    const seed = servers[0]!;
    await Promise.all(
      servers.slice(1).map((s) => {
        const bus = seed.busPort !== undefined ? [String(seed.busPort)] : [];
        return call(s.port, 'CLUSTER', 'MEET', seed.host, String(seed.port), ...bus);
      }),
    );
    await waitUntil(`all ${total} cluster nodes to meet`, CLUSTER_TIMEOUT_MS, async () => {
      for (const s of servers) {
        const lines = parseClusterNodes(await call(s.port, 'CLUSTER', 'NODES'));
        if (lines.length !== total || lines.some((l) => /handshake|noaddr|fail/.test(l.flags) || l.link !== 'connected')) {
          return undefined;
        }
      }
      return true;
    });
    for (let r = masters; r < total; r++) {
      await call(servers[r]!.port, 'CLUSTER', 'REPLICATE', ids[(r - masters) % masters]!);
    }
    await waitUntil(`Redis Cluster (${masters} masters, ${replicas} replicas each) to be ready`, CLUSTER_TIMEOUT_MS, async () => {
      for (const s of servers) {
        const info = await call(s.port, 'CLUSTER', 'INFO');
        if (!info.includes('cluster_state:ok') || !info.includes(`cluster_slots_ok:${CLUSTER_SLOTS}`)) return undefined;
        const lines = parseClusterNodes(await call(s.port, 'CLUSTER', 'NODES'));
        for (let i = 0; i < total; i++) {
          const line = lines.find((l) => l.id === ids[i]);
          const expected = i < masters ? 'master' : 'slave';
          if (line === undefined || !line.flags.split(',').includes(expected) || line.link !== 'connected') return undefined;
          if (i >= masters && line.master !== ids[(i - masters) % masters]) return undefined;
        }
      }
      for (const s of servers.slice(masters)) {
        if (!(await call(s.port, 'INFO', 'replication')).includes('master_link_status:up')) return undefined;
      }
      return true;
    });
  } catch (error) {
    await stop();
    throw new Error(`could not form a Redis Cluster with redis-server ${major}.${minor}: ${(error as Error).message}`, {
      cause: error,
    });
  }

  return {
    nodes: servers.map((s) => ({ host: s.host, port: s.port })),
    servers,
    waitUntilHealthy: async (timeoutMs = CLUSTER_TIMEOUT_MS) => {
      await waitUntil('every running cluster node to report cluster_state:ok', timeoutMs, async () => {
        for (const s of servers.filter((server) => server.isRunning)) {
          const info = await call(s.port, 'CLUSTER', 'INFO');
          if (!info.includes('cluster_state:ok') || !info.includes(`cluster_slots_ok:${CLUSTER_SLOTS}`)) return undefined;
        }
        return true;
      });
    },
    stop,
  };
}

interface ClusterNodeLine {
  id: string;
  flags: string;
  master: string;
  link: string;
}

function parseClusterNodes(text: string): ClusterNodeLine[] {
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const [id = '', , flags = '', master = '', , , , link = ''] = line.split(' ');
      return { id, flags, master, link };
    });
}
