// One graph served by every adapter the limiter has, for tests of behaviour
// they must all share: Apollo Server (tokenBucketPlugin), GraphQL Yoga
// (useTokenBucket), graphql-ws beside Apollo Server (tokenBucketSubscriptions),
// and the federated graph of test/support/federation.ts at Apollo Gateway
// (tokenBucketPlugin) and Hive Gateway (useTokenBucket). The local schema has
// the gateways' `Query.products`, `Query.product` and `Product`, so one
// operation text runs everywhere; its resolvers count their work in the same
// `Work` as the subgraphs'. The caller's identity is the `x-user-id` header
// (over graphql-ws, `connectionParams.user`).
import { EventEmitter, on } from 'node:events';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { ApolloGateway } from '@apollo/gateway';
import { ApolloServer } from '@apollo/server';
import type { ApolloServerPlugin, BaseContext, GraphQLRequestContext } from '@apollo/server';
import type { Plugin as EnvelopPlugin } from '@envelop/core';
import { createGatewayRuntime } from '@graphql-hive/gateway-runtime';
import { makeExecutableSchema } from '@graphql-tools/schema';
import type { Context } from 'graphql-ws';
import { createYoga } from 'graphql-yoga';
import type { YogaInitialContext } from 'graphql-yoga';
import { useTokenBucket } from '../../src/envelop/index.js';
import { tokenBucketSubscriptions } from '../../src/graphql-ws/index.js';
import { tokenBucketDirectiveTypeDefs, tokenBucketPlugin } from '../../src/index.js';
import type { Identity, LimiterOptions, TokenBucket } from '../../src/index.js';
import { disposeClients, postJson, serveApolloWithSockets, serveHandler, socketClient } from './adapters.js';
import type { JsonAnswer } from './adapters.js';
import { Work, startSubgraphs } from './federation.js';
import type { Subgraphs } from './federation.js';
import { IBM_COST_DIRECTIVES, captureLogger, serveHttp } from './graphql.js';
import type { CapturedLogger, ResponseBody } from './graphql.js';

export const HTTP_SERVERS = ['Apollo Server', 'GraphQL Yoga', 'Apollo Gateway', 'Hive Gateway'] as const;
export type HttpServerKind = (typeof HTTP_SERVERS)[number];

export const USER = 'x-user-id';

/**
 * The subgraphs' `products` graph, served by one schema: `products(first: n)`
 * costs n × (Product 1 + its selection) on bucket "api".
 */
const localTypeDefs = `${tokenBucketDirectiveTypeDefs}
${IBM_COST_DIRECTIVES}
type Query @tokenBucket(name: "api") {
  products(first: Int = 5): [Product!]! @listSize(slicingArguments: ["first"])
  product(id: ID!): Product
}
type Product {
  id: ID!
  name: String
  price: Int @cost(weight: "3")
}
type Subscription @tokenBucket(name: "api") {
  productsAdded(first: Int = 5): [Product!]! @listSize(slicingArguments: ["first"])
  """One event per \`Graphs.events\` 'product' event."""
  productChanged: Product!
}
`;

function localResolvers({ local: work, events }: Graphs) {
  const products = (first: number) => {
    const list = Array.from({ length: Math.max(0, Math.min(first, 1000)) }, (_, i) => ({ id: String(i + 1), name: `product ${i + 1}`, price: 10 }));
    work.call('products', list.length);
    return list;
  };
  return {
    Query: {
      products: (_: unknown, { first }: { first: number }) => products(first),
      product: (_: unknown, { id }: { id: string }) => (work.call('products', 1), { id, name: `product ${id}`, price: 10 }),
    },
    Product: { price: (p: { price: number }) => (work.call('products', 3), p.price) },
    Subscription: {
      productsAdded: {
        subscribe: async function* (_: unknown, { first }: { first: number }) {
          yield { productsAdded: products(first) };
          yield { productsAdded: products(first) };
        },
      },
      productChanged: {
        subscribe: () => on(events, 'product'),
        resolve: ([id]: [string]) => ({ id, name: `product ${id}`, price: 10 }),
      },
    },
  };
}

export interface ServerSetup {
  /** The limiter's options, `identify` aside. */
  limits: Omit<LimiterOptions<unknown>, 'identify'>;
  /** Whose tokens, from the `x-user-id` header (graphql-ws: `connectionParams.user`): the user itself by default. */
  identify?: (user: string, bucket: TokenBucket) => Identity | Promise<Identity>;
  /** Apollo Server and Apollo Gateway: plugins after the limiter. */
  apolloPlugins?: ApolloServerPlugin<BaseContext>[];
  /** GraphQL Yoga and Hive Gateway: plugins after the limiter. */
  envelopPlugins?: EnvelopPlugin[];
  /** Plugins listed before the limiter, on the servers of each kind. */
  before?: { apollo?: ApolloServerPlugin<BaseContext>[]; envelop?: EnvelopPlugin[] };
  /** Apollo Server's `includeStacktraceInErrorResponses` (its default outside production is true). Default false. */
  stacktraces?: boolean;
}

export interface TestedServer {
  readonly kind: HttpServerKind;
  /** The GraphQL endpoint. */
  readonly url: string;
  /** POSTs one operation (a batch when `payload` is an array) as `user`. */
  post(payload: unknown, user: string, headers?: Record<string, string>): Promise<JsonAnswer<ResponseBody>>;
  /** The work resolvers did: the subgraphs' behind a gateway, the local resolvers' otherwise. */
  readonly work: Work;
  readonly logger: CapturedLogger;
  stop(): Promise<void>;
}

export interface Graphs {
  /** The subgraphs the gateways call; `work` counts theirs. */
  subgraphs: Subgraphs;
  /** Counts the local resolvers' work (Apollo Server, GraphQL Yoga, graphql-ws). */
  local: Work;
  /** `emit('product', id)` sends an event to every `productChanged` subscription. */
  events: EventEmitter;
}

function identifyFrom(setup: ServerSetup) {
  return setup.identify ?? ((user: string) => user);
}

/** Starts `kind` on a free port, limited by `setup`. */
export async function startServer(kind: HttpServerKind, graphs: Graphs, setup: ServerSetup): Promise<TestedServer> {
  const logger = captureLogger();
  const identify = identifyFrom(setup);
  const http = (url: string, work: Work, stop: () => Promise<void>): TestedServer => ({
    kind,
    url,
    post: (payload, user, headers = {}) => postJson(url, payload, { [USER]: user, ...headers }),
    work,
    logger,
    stop,
  });
  if (kind === 'Apollo Server' || kind === 'Apollo Gateway') {
    const gateway = kind === 'Apollo Gateway' ? new ApolloGateway({ supergraphSdl: graphs.subgraphs.compose() }) : undefined;
    const server = new ApolloServer<BaseContext>({
      ...(gateway ? { gateway } : { schema: makeExecutableSchema({ typeDefs: localTypeDefs, resolvers: localResolvers(graphs) }) }),
      logger,
      allowBatchedHttpRequests: true,
      includeStacktraceInErrorResponses: setup.stacktraces ?? false,
      plugins: [
        ...(setup.before?.apollo ?? []),
        tokenBucketPlugin<BaseContext>({
          ...setup.limits,
          identify: ({ request }: GraphQLRequestContext<BaseContext>, bucket) => identify(request.http?.headers.get(USER) ?? 'nobody', bucket),
        }),
        ...(setup.apolloPlugins ?? []),
      ],
    });
    const endpoint = await serveHttp(server, async () => ({}));
    return http(endpoint.url, gateway ? graphs.subgraphs.work : graphs.local, () => server.stop());
  }
  const limiter = useTokenBucket<YogaInitialContext>({
    ...setup.limits,
    logger,
    identify: ({ request }, bucket) => identify(request.headers.get(USER) ?? 'nobody', bucket),
  });
  if (kind === 'GraphQL Yoga') {
    const yoga = createYoga({
      schema: makeExecutableSchema({ typeDefs: localTypeDefs, resolvers: localResolvers(graphs) }),
      batching: true,
      logging: { debug: () => {}, info: () => {}, warn: logger.warn, error: logger.error },
      plugins: [...((setup.before?.envelop ?? []) as never[]), limiter, ...((setup.envelopPlugins ?? []) as never[])],
    });
    const served = await serveHandler(yoga);
    return http(served.url, graphs.local, served.stop);
  }
  const hive = createGatewayRuntime({
    supergraph: graphs.subgraphs.compose(),
    batching: true,
    logging: false,
    plugins: () => [...((setup.before?.envelop ?? []) as never[]), limiter as never, ...((setup.envelopPlugins ?? []) as never[])],
  });
  const served = await serveHandler(hive);
  return http(served.url, graphs.subgraphs.work, async () => {
    await served.stop();
    await hive.dispose();
  });
}

export interface TestedSockets {
  /** A graphql-ws client of `user` (disposed by `disposeClients()`). */
  client(user: string): ReturnType<typeof socketClient>;
  readonly work: Work;
  readonly logger: CapturedLogger;
  stop(): Promise<void>;
}

type SubscriptionsHooks = ReturnType<typeof tokenBucketSubscriptions>;

/**
 * graphql-ws beside Apollo Server, on the local schema, limited by `setup`
 * (`apolloPlugins` go to Apollo Server): `sockets` adds to useServer's
 * options, `wrap` replaces the limiter's hooks with its own.
 */
export async function startSockets(
  graphs: Graphs,
  setup: ServerSetup & { sockets?: Record<string, unknown>; wrap?: (hooks: SubscriptionsHooks) => Partial<SubscriptionsHooks> },
): Promise<TestedSockets> {
  const logger = captureLogger();
  const identify = identifyFrom(setup);
  const schema = makeExecutableSchema({ typeDefs: localTypeDefs, resolvers: localResolvers(graphs) });
  const server = await serveApolloWithSockets<BaseContext>({
    schema,
    logger,
    sockets: {
      ...(setup.wrap ?? ((hooks) => hooks))(
        tokenBucketSubscriptions({
          ...setup.limits,
          schema,
          logger,
          identify: (ctx: Context<Record<string, unknown> | undefined>, bucket) => identify(String(ctx.connectionParams?.['user'] ?? 'nobody'), bucket),
        }),
      ),
      ...setup.sockets,
    },
    plugins: setup.apolloPlugins ?? [],
  });
  return { client: (user) => socketClient(server.wsUrl, { user }), work: graphs.local, logger, stop: () => server.stop() };
}

/**
 * For a test file: the graphs its servers share, started before its tests;
 * graphql-ws clients disposed after each test; the servers pushed on
 * `stops`, the graphs and `redis` stopped after the last.
 */
export function graphsOfThisFile(redis: { disconnect(): void }): { readonly graphs: Graphs; readonly stops: (() => Promise<void>)[] } {
  let graphs: (Graphs & { stop(): Promise<void> }) | undefined;
  const stops: (() => Promise<void>)[] = [];
  beforeAll(async () => {
    graphs = await startGraphs();
  });
  afterEach(() => disposeClients());
  afterAll(async () => {
    await Promise.all(stops.splice(0).map((stop) => stop()));
    await graphs?.stop();
    redis.disconnect();
  });
  return {
    get graphs(): Graphs {
      if (graphs === undefined) throw new Error('the graphs start before the first test');
      return graphs;
    },
    stops,
  };
}

/** The subgraphs, the local work counter and the event source; `stop()` stops the subgraphs. */
export async function startGraphs(): Promise<Graphs & { stop(): Promise<void> }> {
  const subgraphs = await startSubgraphs();
  return { subgraphs, local: new Work(), events: new EventEmitter(), stop: () => subgraphs.stop() };
}
