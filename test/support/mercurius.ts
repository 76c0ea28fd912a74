// A real Fastify + Mercurius server limited by mercuriusTokenBucket, for the
// Mercurius tests: requests through Fastify's `inject` or over a listening
// port, subscriptions over Mercurius' WebSocket with a real graphql-ws client.
import Fastify from 'fastify';
import type { FastifyInstance } from 'fastify';
import type { GraphQLSchema } from 'graphql';
import mercurius from 'mercurius';
import type { IResolvers, MercuriusOptions } from 'mercurius';
import { mercuriusTokenBucket } from '../../src/mercurius/index.js';
import type { MercuriusTokenBucketOptions } from '../../src/mercurius/index.js';
import { socketClient } from './adapters.js';
import type { ResponseBody } from './graphql.js';

export interface MercuriusServer {
  app: FastifyInstance;
  /** `http://127.0.0.1:<port>/graphql`, once `listen()`ed. */
  url: string;
  /** `ws://127.0.0.1:<port>/graphql`, once `listen()`ed. */
  wsUrl: string;
  /** Starts listening on a free port. */
  listen(): Promise<void>;
  /** POSTs through `inject` and reads the JSON answer. */
  post<TBody = ResponseBody>(payload: unknown, headers?: Record<string, string>): Promise<InjectedAnswer<TBody>>;
  /** GETs through `inject`: `query`, `variables` and `operationName` in the query string. */
  get(operation: { query: string; variables?: Record<string, unknown>; operationName?: string }, headers?: Record<string, string>): Promise<InjectedAnswer<ResponseBody>>;
  /** A graphql-ws client of this server (graphql-transport-ws, as Mercurius speaks it). */
  socket(connectionParams?: Record<string, unknown>): ReturnType<typeof socketClient>;
  close(): Promise<void>;
}

export interface InjectedAnswer<TBody> {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  body: TBody;
}

export interface ServeMercuriusOptions {
  schema: string | GraphQLSchema;
  resolvers?: IResolvers;
  limits: MercuriusTokenBucketOptions;
  /** More of Mercurius' options (`jit`, `context`, `subscription`, …). */
  mercurius?: Partial<MercuriusOptions>;
  /** Called after the limiter is registered and before the server is ready: later hooks and plugins. */
  after?: (app: FastifyInstance) => void | Promise<void>;
}

/** Fastify with Mercurius (batches and subscriptions on) and the limiter registered after it. */
export async function serveMercurius(options: ServeMercuriusOptions): Promise<MercuriusServer> {
  const app = Fastify();
  await app.register(mercurius, {
    schema: options.schema,
    ...(options.resolvers ? { resolvers: options.resolvers } : {}),
    allowBatchedQueries: true,
    subscription: true,
    ...options.mercurius,
  } as MercuriusOptions);
  await app.register(mercuriusTokenBucket, options.limits);
  await options.after?.(app);
  await app.ready();
  const server: MercuriusServer = {
    app,
    url: '',
    wsUrl: '',
    async listen() {
      await app.listen({ port: 0, host: '127.0.0.1' });
      const { port } = app.server.address() as { port: number };
      server.url = `http://127.0.0.1:${port}/graphql`;
      server.wsUrl = `ws://127.0.0.1:${port}/graphql`;
    },
    async post<TBody>(payload: unknown, headers: Record<string, string> = {}) {
      const response = await app.inject({ method: 'POST', url: '/graphql', payload: payload as object, headers });
      return { status: response.statusCode, headers: response.headers, body: response.json<TBody>() };
    },
    async get(operation, headers = {}) {
      const query: Record<string, string> = { query: operation.query };
      if (operation.variables) query['variables'] = JSON.stringify(operation.variables);
      if (operation.operationName !== undefined) query['operationName'] = operation.operationName;
      const response = await app.inject({ method: 'GET', url: '/graphql', query, headers });
      return { status: response.statusCode, headers: response.headers, body: response.json<ResponseBody>() };
    },
    socket(connectionParams) {
      if (server.wsUrl === '') throw new Error('listen() first');
      return socketClient(server.wsUrl, connectionParams);
    },
    close: () => app.close(),
  };
  return server;
}
