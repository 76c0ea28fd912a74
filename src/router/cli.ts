#!/usr/bin/env node
// graphql-token-bucket-router: the Apollo Router coprocessor as a command,
// for teams that run no Node code of their own.
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import * as packageExports from '../index.js';
import { MemoryStore } from '../stores/memory-store.js';
import { RedisStore } from '../stores/redis-store.js';
import type { BucketStore } from '../stores/bucket-store.js';
import type { RouterCoprocessorOptions } from './options.js';
import { routerCoprocessor } from './router-coprocessor.js';

const NAME = 'graphql-token-bucket-router';

const USAGE = `Usage: ${NAME} --config <module> [--port <port>] [--host <address>]

Serves Apollo Router's coprocessor protocol (version 1): per-client token-bucket
limits on each operation's cost, priced against the supergraph the Router sends.

Options:
  -c, --config <module>  an ES module (limits.mjs) whose default export is the
                         coprocessor's options without "store", or a function
                         given this package's exports that returns them
  -p, --port <port>      port to listen on (default 8081)
      --host <address>   address to listen on (default 127.0.0.1; 0.0.0.0 for all)
  -h, --help             this text

Environment:
  REDIS_URL                    tokens in Redis (redis://[:password@]host:port[/db],
                               rediss:// for TLS) through ioredis, shared by every
                               replica; unset: in this process's memory only
  GRAPHQL_TOKEN_BUCKET_SECRET  the contextSecret every replica shares (32+ characters),
                               unless the config sets one

Endpoints: POST (any path) the coprocessor; GET /health answers 200 while serving,
503 once shutting down. SIGTERM or SIGINT: stop accepting, finish what is in
flight, close the store, exit.`;

/** A mistake in how the command was called or configured: printed without a stack, exit code 1 (2 for usage). */
class CommandError extends Error {
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
  }
}

/** What the command needs from ioredis (an optional peer dependency, loaded only with REDIS_URL). */
interface RedisClient {
  on(event: 'error' | 'ready', listener: (...args: unknown[]) => void): unknown;
  once(event: 'ready', listener: () => void): unknown;
  quit(): Promise<unknown>;
  disconnect(): void;
}

interface Store {
  store: BucketStore & { close?(): Promise<void> };
  description: string;
  close(): Promise<void>;
}

/** Fail-fast ioredis options, as the manual recommends for a limiter: `onStoreError` applies at once while Redis is away. */
const REDIS_OPTIONS = {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
  connectTimeout: 500,
  retryStrategy: (times: number) => Math.min(times * 50, 200),
};

/** How long start-up waits for Redis before serving anyway (store errors then answer as `onStoreError` says). */
const REDIS_READY_WAIT_MS = 5_000;
/** How long a shutdown waits for requests in flight. */
const SHUTDOWN_WAIT_MS = 10_000;

function parse(argv: readonly string[]): { config: string; port: number; host: string } | 'help' {
  let values;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: {
        config: { type: 'string', short: 'c' },
        port: { type: 'string', short: 'p' },
        host: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    throw new CommandError(`${(error as Error).message}\n\n${USAGE}`, 2);
  }
  if (values.help) return 'help';
  if (values.config === undefined) throw new CommandError(`--config is required\n\n${USAGE}`, 2);
  const port = values.port === undefined ? 8081 : Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65_535 || values.port?.trim() === '') throw new CommandError(`--port must be a port number (0-65535), got ${JSON.stringify(values.port)}`, 2);
  return { config: values.config, port, host: values.host ?? '127.0.0.1' };
}

/** The config module's options: its default export, or what its default export returns given the package. */
async function loadConfig(path: string): Promise<Omit<RouterCoprocessorOptions, 'store'>> {
  const file = resolve(path);
  let module: { default?: unknown };
  try {
    module = (await import(pathToFileURL(file).href)) as { default?: unknown };
  } catch (error) {
    throw new CommandError(`cannot load the config ${file}: ${(error as Error).message}`);
  }
  let options = module.default;
  if (typeof options === 'function') options = await (options as (exports: typeof packageExports) => unknown)(packageExports);
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new CommandError(`the config ${file} must export default the coprocessor's options (an object, or a function returning one), got ${options === null ? 'null' : typeof options}`);
  }
  if ('store' in options) throw new CommandError(`the config ${file} sets "store": the command makes it (RedisStore when REDIS_URL is set, else MemoryStore); remove it`);
  return options as Omit<RouterCoprocessorOptions, 'store'>;
}

/** A URL without its credentials, for the log. */
function shown(url: string): string {
  try {
    const parsed = new URL(url);
    parsed.username = '';
    parsed.password = '';
    return parsed.toString();
  } catch {
    return '(an unreadable URL)';
  }
}

async function openStore(log: Log): Promise<Store> {
  const url = process.env['REDIS_URL'];
  if (url === undefined || url === '') {
    log.warn(`${NAME}: REDIS_URL is not set, so tokens are kept in this process's memory (MemoryStore): each replica limits on its own and a restart forgets every bucket. Set REDIS_URL in production.`);
    const store = new MemoryStore();
    return { store, description: 'MemoryStore (this process only)', close: () => store.close() };
  }
  let Redis: new (url: string, options: object) => RedisClient;
  try {
    ({ Redis } = (await import('ioredis')) as unknown as { Redis: typeof Redis });
  } catch {
    throw new CommandError('REDIS_URL is set but ioredis is not installed: npm install ioredis (or npx -p ioredis …)');
  }
  let client: RedisClient;
  try {
    client = new Redis(url, REDIS_OPTIONS);
  } catch (error) {
    throw new CommandError(`REDIS_URL ${shown(url)}: ${(error as Error).message}`);
  }
  let lastError = '';
  client.on('error', (error) => {
    const message = error instanceof Error ? error.message : String(error);
    // ioredis reports every failed reconnection: one line per change is enough.
    if (message !== lastError) log.warn(`${NAME}: redis: ${message}`);
    lastError = message;
  });
  client.on('ready', () => {
    lastError = '';
  });
  const ready = await new Promise<boolean>((done) => {
    const timer = setTimeout(() => done(false), REDIS_READY_WAIT_MS);
    client.once('ready', () => {
      clearTimeout(timer);
      done(true);
    });
  });
  if (!ready) log.warn(`${NAME}: Redis at ${shown(url)} is not ready after ${REDIS_READY_WAIT_MS / 1000} s; serving anyway: operations get onStoreError until it is`);
  const store = new RedisStore(client as never);
  return {
    store,
    description: `RedisStore at ${shown(url)}`,
    close: async () => {
      await store.close();
      await client.quit().catch(() => client.disconnect());
    },
  };
}

interface Log {
  warn(message: string): void;
  error(message: string): void;
  info(message: string): void;
}

const log: Log = {
  info: (message) => console.log(message),
  warn: (message) => console.warn(message),
  error: (message) => console.error(message),
};

async function main(argv: readonly string[]): Promise<void> {
  const args = parse(argv);
  if (args === 'help') {
    console.log(USAGE);
    return;
  }
  const options = await loadConfig(args.config);
  const secret = process.env['GRAPHQL_TOKEN_BUCKET_SECRET'];
  const complete = (store: BucketStore): RouterCoprocessorOptions => ({ logger: log, ...(secret ? { contextSecret: secret } : {}), ...options, store });
  // The options are checked before any connection is made: a bad config fails at once.
  const probe = new MemoryStore();
  try {
    routerCoprocessor(complete(probe));
  } catch (error) {
    throw new CommandError(`the config ${resolve(args.config)}: ${(error as Error).message}`);
  } finally {
    await probe.close();
  }
  const { store, description, close } = await openStore(log);
  const handler = routerCoprocessor(complete(store));
  let stopping = false;
  const server: Server = createServer((request, response) => {
    if (request.method === 'GET' && (request.url === '/health' || request.url?.startsWith('/health?'))) {
      response.writeHead(stopping ? 503 : 200, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ status: stopping ? 'stopping' : 'ok' }));
      return;
    }
    handler(request, response);
  });
  // A client that sends its request slowly is cut off; the Router's own timeout (1 s by default) is far shorter.
  server.requestTimeout = 30_000;
  server.headersTimeout = 10_000;
  await new Promise<void>((done, fail) => {
    server.once('error', (error) => fail(new CommandError(`cannot listen on ${args.host}:${args.port}: ${error.message}`)));
    server.listen(args.port, args.host, done);
  });
  const { address, port } = server.address() as AddressInfo;
  const host = address.includes(':') ? `[${address}]` : address;
  const buckets = (options.buckets ?? []).map((b) => `${b.name} (${b.capacity}, ${b.rate.tokens} per ${b.rate.periodMs} ms)`).join(', ');
  log.info(`${NAME}: serving Apollo Router's coprocessor protocol (version 1) on http://${host}:${port}/ (health: GET /health), store: ${description}, buckets: ${buckets}`);

  const shutdown = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    log.info(`${NAME}: ${signal}: finishing the requests in flight, then closing the store`);
    const force = setTimeout(() => {
      log.error(`${NAME}: requests still in flight after ${SHUTDOWN_WAIT_MS / 1000} s; exiting`);
      process.exit(1);
    }, SHUTDOWN_WAIT_MS);
    force.unref();
    server.close(() => {
      void close()
        .catch((error: unknown) => log.warn(`${NAME}: closing the store: ${(error as Error).message}`))
        .then(() => {
          clearTimeout(force);
          log.info(`${NAME}: stopped`);
          process.exitCode = 0;
        });
    });
    server.closeIdleConnections();
  };
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
}

main(process.argv.slice(2)).catch((error: unknown) => {
  if (error instanceof CommandError) {
    console.error(`${NAME}: ${error.message}`);
    process.exitCode = error.exitCode;
  } else {
    console.error(`${NAME}: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.exitCode = 1;
  }
});
