// Servers and clients for the graphql-ws and GraphQL Yoga tests: Apollo
// Server on express with graphql-ws's `useServer` on the same port (as
// Apollo's documentation sets it up), a real graphql-ws client, and GraphQL
// Yoga over real HTTP.
import { createServer } from 'node:http';
import type { IncomingMessage, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ApolloServer } from '@apollo/server';
import type { ApolloServerPlugin, BaseContext } from '@apollo/server';
import { ApolloServerPluginDrainHttpServer } from '@apollo/server/plugin/drainHttpServer';
import { expressMiddleware } from '@as-integrations/express5';
import express from 'express';
import type { GraphQLFormattedError, GraphQLSchema } from 'graphql';
import { createClient } from 'graphql-ws';
import type { Client, FormattedExecutionResult, ServerOptions, SubscribePayload } from 'graphql-ws';
import { useServer } from 'graphql-ws/use/ws';
import type { Extra } from 'graphql-ws/use/ws';
import WebSocket, { WebSocketServer } from 'ws';
import type { Logger } from './graphql.js';

export type SocketServerOptions = ServerOptions<Record<string, unknown> | undefined, Extra>;

export interface ApolloWithSockets {
  /** `http://127.0.0.1:<port>/` */
  url: string;
  /** `ws://127.0.0.1:<port>/` */
  wsUrl: string;
  stop(): Promise<void>;
}

export interface ApolloWithSocketsOptions<TContext extends BaseContext> {
  schema: GraphQLSchema;
  /** graphql-ws's options besides `schema`: the limiter's hooks, `context`, … */
  sockets: Omit<SocketServerOptions, 'schema'>;
  plugins?: ApolloServerPlugin<TContext>[];
  context?: (argument: { req: IncomingMessage }) => Promise<TContext>;
  logger?: Logger;
  /** Apollo Server's option of that name: run documents graphql-js would refuse. */
  dangerouslyDisableValidation?: boolean;
}

/** Apollo Server (express 5) and graphql-ws on one free port. `stop()` closes both. */
export async function serveApolloWithSockets<TContext extends BaseContext>(
  options: ApolloWithSocketsOptions<TContext>,
): Promise<ApolloWithSockets> {
  const app = express();
  const httpServer = createServer(app);
  const wsServer = new WebSocketServer({ server: httpServer, path: '/' });
  const sockets = useServer({ schema: options.schema, ...options.sockets }, wsServer);
  const server = new ApolloServer<TContext>({
    schema: options.schema,
    ...(options.logger ? { logger: options.logger } : {}),
    allowBatchedHttpRequests: true,
    includeStacktraceInErrorResponses: false,
    ...(options.dangerouslyDisableValidation ? { dangerouslyDisableValidation: true } : {}),
    plugins: [
      ApolloServerPluginDrainHttpServer({ httpServer }),
      {
        async serverWillStart() {
          return { drainServer: async () => void (await sockets.dispose()) };
        },
      },
      ...(options.plugins ?? []),
    ],
  });
  await server.start();
  const context = options.context ?? (() => Promise.resolve({} as TContext));
  app.use('/', express.json(), expressMiddleware(server, { context }));
  const port = await listen(httpServer);
  return { url: `http://127.0.0.1:${port}/`, wsUrl: `ws://127.0.0.1:${port}/`, stop: () => server.stop() };
}

export async function listen(server: Server): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  return (server.address() as AddressInfo).port;
}

const clients: Client[] = [];

/** A graphql-ws client that connects once, never retries, and is disposed by `disposeClients()`. */
export function socketClient(url: string, connectionParams?: Record<string, unknown>): Client {
  const client = createClient({
    url,
    webSocketImpl: WebSocket,
    ...(connectionParams ? { connectionParams } : {}),
    retryAttempts: 0,
    lazy: true,
    lazyCloseTimeout: 60_000,
  });
  clients.push(client);
  return client;
}

export async function disposeClients(): Promise<void> {
  await Promise.all(clients.splice(0).map((client) => client.dispose()));
}

/** Everything a client received for one operation. */
export interface Outcome {
  /** Every `next` payload, in order. */
  results: FormattedExecutionResult[];
  /** The `error` message's errors, when the operation ended with one. */
  errors?: GraphQLFormattedError[];
  /** Whether a `complete` arrived (false after an `error`). */
  completed: boolean;
}

export interface RunningOperation {
  readonly outcome: Promise<Outcome>;
  /** Results so far. */
  readonly results: FormattedExecutionResult[];
  /** Sends `complete` (the client leaves the subscription). */
  cancel(): void;
}

/** Subscribes and collects until `complete` or `error`; a closed socket rejects `outcome`. */
export function start(client: Client, payload: SubscribePayload): RunningOperation {
  const results: FormattedExecutionResult[] = [];
  let cancel = (): void => {};
  const outcome = new Promise<Outcome>((resolve, reject) => {
    cancel = client.subscribe(payload, {
      next: (result) => void results.push(result as FormattedExecutionResult),
      error: (error: unknown) => {
        if (Array.isArray(error)) resolve({ results, errors: error as GraphQLFormattedError[], completed: false });
        else reject(error instanceof Error ? error : new Error(`socket closed: ${describeClose(error)}`));
      },
      complete: () => resolve({ results, completed: true }),
    });
  });
  return { outcome, results, cancel: () => cancel() };
}

/** Runs one operation to its end. */
export function run(client: Client, payload: SubscribePayload): Promise<Outcome> {
  return start(client, payload).outcome;
}

function describeClose(event: unknown): string {
  if (event && typeof event === 'object' && 'code' in event) {
    const { code, reason } = event as { code: unknown; reason?: unknown };
    return `${String(code)} ${String(reason ?? '')}`;
  }
  return String(event);
}

export interface JsonAnswer<TBody> {
  status: number;
  headers: Headers;
  body: TBody;
}

/** POSTs JSON to a GraphQL endpoint and reads the JSON answer, as a client does. */
export async function postJson<TBody>(url: string, payload: unknown, headers: Record<string, string> = {}): Promise<JsonAnswer<TBody>> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json, application/json', ...headers },
    body: JSON.stringify(payload),
  });
  const text = await response.text();
  try {
    return { status: response.status, headers: response.headers, body: JSON.parse(text) as TBody };
  } catch {
    throw new Error(`HTTP ${response.status} answered with a body that is not JSON: ${text.slice(0, 500)}`);
  }
}

/** One server-sent event of a GraphQL over SSE response ("distinct connections" mode). */
export interface ServerSentEvent {
  event: string;
  data: unknown;
}

/** Subscribes over SSE (as GraphQL Yoga serves subscriptions) and reads the stream to its end. */
export async function postSse(
  url: string,
  payload: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; events: ServerSentEvent[] }> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...headers },
    body: JSON.stringify(payload),
  });
  const text = await response.text();
  const events: ServerSentEvent[] = [];
  for (const block of text.split('\n\n')) {
    const lines = block.split('\n').filter((line) => line !== '' && !line.startsWith(':'));
    if (lines.length === 0) continue;
    const event = lines.find((l) => l.startsWith('event:'))?.slice(6).trim() ?? 'message';
    const data = lines.filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).join('\n');
    events.push({ event, data: data === '' ? null : (JSON.parse(data) as unknown) });
  }
  return { status: response.status, headers: response.headers, events };
}

/** Serves a request handler (GraphQL Yoga) on a free port; `stop()` closes it. */
export async function serveHandler(handler: Parameters<typeof createServer>[1]): Promise<{ url: string; stop(): Promise<void> }> {
  const server = createServer(handler);
  const port = await listen(server);
  return {
    url: `http://127.0.0.1:${port}/graphql`,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
