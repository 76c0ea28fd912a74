// SPEC §6 "Since 0.4": what runs is what was priced, against later plugins
// too. A plugin after the limiter — in Yoga's onExecute/onSubscribe, in
// Apollo Server's didResolveOperation or executionDidStart, around
// graphql-ws's onSubscribe — that changes the document, the operation name or
// the variables, in place or by replacing them, cannot make more work run than
// was charged: the change is refused (the operation fails with a generic 500
// and the log says which plugin order to use) or, in code that ignores a
// refused write, and over graphql-ws (where a throw would close the socket),
// has no effect. On Apollo Server, GraphQL Yoga, graphql-ws,
// Apollo Gateway and Hive Gateway. Before, a "page size normaliser" raising
// first from 2 to 200 after the limiter ran 200 products for a charge of 2.
import type { ApolloServerPlugin, BaseContext } from '@apollo/server';
import type { Plugin as EnvelopPlugin } from '@envelop/core';
import { parse } from 'graphql';
import type { ArgumentNode, DocumentNode, IntValueNode, OperationDefinitionNode } from 'graphql';
import { describe, expect, inject, it } from 'vitest';
import type { TokenBucketSubscriptionsHooks } from '../src/graphql-ws/index.js';
import { Rate, RedisStore, TokenBucket } from '../src/index.js';
import { postSse, run } from './support/adapters.js';
import { redisClient, uniquePrefix } from './support/clients.js';
import { HTTP_SERVERS, graphsOfThisFile, USER, startServer, startSockets } from './support/every-server.js';
import type { HttpServerKind, ServerSetup } from './support/every-server.js';
import { RecordingStore } from './support/graphql.js';
import type { ResponseBody } from './support/graphql.js';
import { tokensLeft } from './support/http-servers.js';

const redis = redisClient(inject('redisUrl'));
const shared = graphsOfThisFile(redis);
const { stops } = shared;

const api = new TokenBucket('api', 100_000, Rate.perHour(1));

let users = 0;
function fresh(): string {
  users += 1;
  return `later-${users}`;
}

/** Two products asked for: a charge of 2 at Apollo Server and Yoga (and their entity fetches' share at a gateway). */
const PAGE = { query: 'query Page($n: Int!) { products(first: $n) { id } }', variables: { n: 2 } };
const LITERAL = { query: '{ products(first: 2) { id } }' };
const TWO_OPERATIONS = { query: 'query Small { products(first: 2) { id } } query Big { products(first: 200) { id } }', operationName: 'Small' };
const BIG = '{ products(first: 200) { id } }';

/** The `first:` literal of the document's first field, as a plugin rewriting it in place would reach it. */
function firstLiteral(document: DocumentNode): { value: string } {
  const field = (document.definitions[0] as OperationDefinitionNode).selectionSet.selections[0] as { arguments: readonly ArgumentNode[] };
  return field.arguments[0]!.value as IntValueNode as { value: string };
}

/** A change a later plugin makes, as it would write it in each server's hooks. */
interface Change {
  name: string;
  operation: { query: string; variables?: Record<string, unknown>; operationName?: string };
  envelop: (args: Record<string, unknown>) => void;
  apollo: (requestContext: { request: Record<string, unknown>; document: DocumentNode }) => void;
}

const CHANGES: Change[] = [
  {
    name: 'raises a variable in place',
    operation: PAGE,
    envelop: (args) => void ((args['variableValues'] as Record<string, number>)['n'] = 200),
    apollo: ({ request }) => void ((request['variables'] as Record<string, number>)['n'] = 200),
  },
  {
    name: 'replaces the variables',
    operation: PAGE,
    envelop: (args) => void (args['variableValues'] = { n: 200 }),
    apollo: ({ request }) => void (request['variables'] = { n: 200 }),
  },
  {
    name: 'rewrites the document in place',
    operation: LITERAL,
    envelop: (args) => void (firstLiteral(args['document'] as DocumentNode).value = '200'),
    apollo: ({ document }) => void (firstLiteral(document).value = '200'),
  },
  {
    name: 'replaces the document',
    operation: LITERAL,
    envelop: (args) => void (args['document'] = parse(BIG)),
    apollo: (requestContext) => void (requestContext.document = parse(BIG)),
  },
  {
    name: 'switches the operation by name',
    operation: TWO_OPERATIONS,
    envelop: (args) => void (args['operationName'] = 'Big'),
    apollo: ({ request }) => void (request['operationName'] = 'Big'),
  },
];

/** What a server may do with the operation: refuse it (500, nothing run) or run what was priced (2 products), never more. */
async function expectNoMoreThanPriced(kind: string, answer: { status: number; body: ResponseBody }, work: () => number, charged: number, logged: string[]): Promise<void> {
  const products = (answer.body.data as { products?: unknown[] } | null | undefined)?.products;
  expect(products?.length ?? 0, kind).toBeLessThanOrEqual(2);
  expect(work(), kind).toBeLessThanOrEqual(charged);
  if (answer.status !== 200) {
    expect(answer.status, kind).toBe(500);
    // A replacement is refused by the limiter, which logs why; a change in place throws where it is made
    // (strict-mode code writing to a frozen object), and Apollo Server shows that error of the plugin's
    // own from didResolveOperation, as it shows any error a plugin throws there.
    const [message] = answer.body.errors?.map((e) => e.message) ?? [];
    expect(message, kind).toMatch(/^(Internal server error|Unexpected error\.|Cannot assign to read only property '\w+' of object '#<Object>')$/);
    if (message === 'Internal server error') expect(logged.join('\n'), kind).toMatch(/changed after .* priced it|read only/);
  }
}

function apolloPlugin(change: Change, hook: 'didResolveOperation' | 'executionDidStart'): ApolloServerPlugin<BaseContext> {
  return {
    async requestDidStart() {
      return {
        async [hook](requestContext: unknown) {
          change.apollo(requestContext as Parameters<Change['apollo']>[0]);
        },
      };
    },
  };
}

function envelopPlugin(change: Change, how: 'args' | 'executeFn'): EnvelopPlugin {
  if (how === 'args') return { onExecute: ({ args }) => change.envelop(args as unknown as Record<string, unknown>) };
  return {
    onExecute: ({ executeFn, setExecuteFn }) => {
      setExecuteFn((args) => {
        const changed = { ...args } as unknown as Record<string, unknown>;
        if (change.name.includes('in place')) change.envelop(args as unknown as Record<string, unknown>);
        else change.envelop(changed);
        return executeFn(changed as unknown as typeof args);
      });
    },
  };
}

type Placement = { name: string; servers: readonly HttpServerKind[]; setup: (change: Change) => Partial<ServerSetup> };

const PLACEMENTS: Placement[] = [
  { name: "Apollo Server's executionDidStart", servers: ['Apollo Server', 'Apollo Gateway'], setup: (c) => ({ apolloPlugins: [apolloPlugin(c, 'executionDidStart')] }) },
  { name: "Apollo Server's didResolveOperation", servers: ['Apollo Server', 'Apollo Gateway'], setup: (c) => ({ apolloPlugins: [apolloPlugin(c, 'didResolveOperation')] }) },
  { name: "envelop's onExecute, on its args", servers: ['GraphQL Yoga', 'Hive Gateway'], setup: (c) => ({ envelopPlugins: [envelopPlugin(c, 'args')] }) },
  { name: "envelop's onExecute, wrapping the execute function", servers: ['GraphQL Yoga', 'Hive Gateway'], setup: (c) => ({ envelopPlugins: [envelopPlugin(c, 'executeFn')] }) },
];

describe.each(PLACEMENTS.flatMap((p) => p.servers.map((server) => [`${server}, a plugin in ${p.name}`, server, p] as const)))('%s', (_title, kind, placement) => {
  it.each(CHANGES.map((c) => [c.name, c] as const))('that %s: no more runs than was charged', async (_name, change) => {
    const store = new RecordingStore(new RedisStore(redis, { prefix: uniquePrefix('later') }));
    const server = await startServer(kind, shared.graphs, { limits: { store, buckets: [api] }, ...placement.setup(change) });
    stops.push(() => server.stop());
    const user = fresh();
    const before = server.work.units;
    const answer = await server.post(change.operation, user);
    const charged = 100_000 - (await tokensLeft(store, api, user));
    // Priced (the store was asked); an operation refused before it executed keeps nothing.
    expect(store.calls.flat().some((r) => r.key === user)).toBe(true);
    await expectNoMoreThanPriced(kind, answer, () => server.work.units - before, charged, server.logger.errors);
  });
});

describe('a plugin written as sloppy-mode code (a refused write does nothing)', () => {
  // new Function compiles outside strict mode: writing to a frozen object is silently ignored there.
  const sloppy = new Function('variables', 'variables.n = 200') as (variables: unknown) => void;

  it.each(HTTP_SERVERS)('%s runs what was priced', async (kind) => {
    const store = new RecordingStore(new RedisStore(redis, { prefix: uniquePrefix('later') }));
    const apollo: ApolloServerPlugin<BaseContext> = { requestDidStart: async () => ({ executionDidStart: async ({ request }) => sloppy(request.variables) }) };
    const envelop: EnvelopPlugin = { onExecute: ({ args }) => sloppy(args.variableValues) };
    const server = await startServer(kind, shared.graphs, { limits: { store, buckets: [api] }, apolloPlugins: [apollo], envelopPlugins: [envelop] });
    stops.push(() => server.stop());
    const answer = await server.post(PAGE, fresh());
    expect(answer.status).toBe(200);
    expect(answer.body.data).toEqual({ products: [{ id: '1' }, { id: '2' }] });
  });
});

describe('GraphQL Yoga, a subscription over SSE, a plugin in onSubscribe', () => {
  it.each([
    ['raises a variable in place', (args: Record<string, unknown>): void => void ((args['variableValues'] as Record<string, number>)['n'] = 200)],
    ['replaces the variables', (args: Record<string, unknown>): void => void (args['variableValues'] = { n: 200 })],
  ] as const)('that %s: no more runs than was charged', async (_name, change) => {
    const store = new RecordingStore(new RedisStore(redis, { prefix: uniquePrefix('later') }));
    const plugin: EnvelopPlugin = { onSubscribe: ({ args }) => change(args as unknown as Record<string, unknown>) };
    const server = await startServer('GraphQL Yoga', shared.graphs, { limits: { store, buckets: [api] }, envelopPlugins: [plugin] });
    stops.push(() => server.stop());
    const user = fresh();
    const before = server.work.units;
    const answer = await postSse(server.url, { query: 'subscription($n: Int!) { productsAdded(first: $n) { id } }', variables: { n: 2 } }, { [USER]: user });
    const charged = 100_000 - (await tokensLeft(store, api, user));
    // Two events of 2 products each: the subscription is charged once, when it starts (chargeEachEvent is off).
    const events = answer.events.filter((e) => e.event === 'next').map((e) => (e.data as ResponseBody).data?.['productsAdded'] as unknown[] | undefined);
    for (const event of events) expect(event?.length ?? 0).toBeLessThanOrEqual(2);
    expect(server.work.units - before).toBeLessThanOrEqual(2 * charged);
  });
});

describe('graphql-ws, code around onSubscribe or in the context factory', () => {
  type Hooks = TokenBucketSubscriptionsHooks;
  type Payload = Record<string, unknown>;
  const around = (change: (payload: Payload) => void) => (hooks: Hooks): Hooks => ({
    ...hooks,
    onSubscribe: async (...args: Parameters<Hooks['onSubscribe']>) => {
      const answer = await hooks.onSubscribe(...args);
      change(args[2] as unknown as Payload);
      return answer;
    },
  });

  it.each([
    ['replaces the variables', PAGE, 'variables', (payload: Payload): void => void (payload['variables'] = { n: 200 })],
    ['replaces the query', LITERAL, 'query', (payload: Payload): void => void (payload['query'] = BIG)],
    ['switches the operation by name', TWO_OPERATIONS, 'operationName', (payload: Payload): void => void (payload['operationName'] = 'Big')],
  ] as const)('onSubscribe wrapped by code that %s: what was priced runs, the socket lives on, and the log says so', async (_name, operation, what, change) => {
    const store = new RecordingStore(new RedisStore(redis, { prefix: uniquePrefix('later') }));
    const sockets = await startSockets(shared.graphs, { limits: { store, buckets: [api] }, wrap: around(change) });
    stops.push(() => sockets.stop());
    const user = fresh();
    const client = sockets.client(user);
    const before = sockets.work.units;
    const outcome = await run(client, operation);
    expect(outcome.results).toEqual([{ data: { products: [{ id: '1' }, { id: '2' }] } }]);
    expect(100_000 - (await tokensLeft(store, api, user))).toBe(2);
    expect(sockets.work.units - before).toBe(2);
    expect(sockets.logger.errors).toEqual([expect.stringContaining(`payload.${what} was changed after tokenBucketSubscriptions priced it, and the value priced is kept`)]);
    // The same socket serves the next operation.
    expect((await run(client, PAGE)).results).toHaveLength(1);
  });

  it.each([
    ['raises a variable in place', PAGE, (payload: Payload): void => void ((payload['variables'] as Record<string, number>)['n'] = 200)],
  ] as const)('onSubscribe wrapped by code that %s: no more runs than was charged', async (_name, operation, change) => {
    const store = new RecordingStore(new RedisStore(redis, { prefix: uniquePrefix('later') }));
    const sockets = await startSockets(shared.graphs, { limits: { store, buckets: [api] }, wrap: around(change) });
    stops.push(() => sockets.stop());
    const user = fresh();
    const before = sockets.work.units;
    const outcome = await run(sockets.client(user), operation).catch((error: unknown) => ({ results: [], errors: [{ message: String(error) }], completed: false }));
    const charged = 100_000 - (await tokensLeft(store, api, user));
    const products = (outcome.results[0]?.data as { products?: unknown[] } | undefined)?.products;
    expect(products?.length ?? 0).toBeLessThanOrEqual(2);
    expect(sockets.work.units - before).toBeLessThanOrEqual(charged);
  });

  it('a context factory that raises a variable in place: no more runs than was charged', async () => {
    const store = new RecordingStore(new RedisStore(redis, { prefix: uniquePrefix('later') }));
    const sockets = await startSockets(shared.graphs, {
      limits: { store, buckets: [api] },
      sockets: {
        context: (_ctx: unknown, _id: unknown, _payload: unknown, args: { variableValues?: Record<string, number> }) => {
          if (args.variableValues) args.variableValues['n'] = 200;
          return {};
        },
      },
    });
    stops.push(() => sockets.stop());
    const user = fresh();
    const before = sockets.work.units;
    const outcome = await run(sockets.client(user), PAGE).catch(() => ({ results: [] as { data?: unknown }[] }));
    const charged = 100_000 - (await tokensLeft(store, api, user));
    const products = (outcome.results[0]?.data as { products?: unknown[] } | undefined)?.products;
    expect(products?.length ?? 0).toBeLessThanOrEqual(2);
    expect(sockets.work.units - before).toBeLessThanOrEqual(charged);
  });
});

describe('a page-size normaliser listed before the limiter, as the manual says to list it', () => {
  // Raises $n from 2 to 200 in place, before the limiter prices: what runs (200 products) is charged.
  const raise = (variables: unknown): void => void ((variables as Record<string, number>)['n'] = 200);
  const apollo: ApolloServerPlugin<BaseContext> = { requestDidStart: async () => ({ didResolveOperation: async ({ request }) => raise(request.variables) }) };
  const envelop: EnvelopPlugin = { onExecute: ({ args }) => raise(args.variableValues) };

  it.each(HTTP_SERVERS)('%s charges what its change makes run', async (kind) => {
    const store = new RecordingStore(new RedisStore(redis, { prefix: uniquePrefix('later') }));
    const server = await startServer(kind, shared.graphs, { limits: { store, buckets: [api] }, before: { apollo: [apollo], envelop: [envelop] } });
    stops.push(() => server.stop());
    const user = fresh();
    const before = server.work.units;
    const answer = await server.post(PAGE, user);
    expect(answer.status).toBe(200);
    expect((answer.body.data as { products: unknown[] }).products).toHaveLength(200);
    const charged = 100_000 - (await tokensLeft(store, api, user));
    expect(server.work.units - before).toBeLessThanOrEqual(charged);
    expect(charged).toBeGreaterThanOrEqual(200);
  });
});

describe("Apollo Server and Apollo Gateway, a plugin in executionDidStart that replaces requestContext.request", () => {
  // Apollo Server's executor (and a gateway's) reads `requestContext.request` when it runs: a new request object
  // carrying other variables ran 200 products for a charge of 2 while the old request's properties were held.
  it.each(['Apollo Server', 'Apollo Gateway'] as const)('%s: no more runs than was charged', async (kind) => {
    const store = new RecordingStore(new RedisStore(redis, { prefix: uniquePrefix('later') }));
    const plugin: ApolloServerPlugin<BaseContext> = {
      requestDidStart: async () => ({
        executionDidStart: async (requestContext) => {
          (requestContext as unknown as Record<string, unknown>)['request'] = { ...requestContext.request, variables: { n: 200 } };
        },
      }),
    };
    const server = await startServer(kind, shared.graphs, { limits: { store, buckets: [api] }, apolloPlugins: [plugin] });
    stops.push(() => server.stop());
    const user = fresh();
    const before = server.work.units;
    const answer = await server.post(PAGE, user);
    const charged = 100_000 - (await tokensLeft(store, api, user));
    // Priced (the store was asked); an operation refused before it executed keeps nothing.
    expect(store.calls.flat().some((r) => r.key === user)).toBe(true);
    await expectNoMoreThanPriced(kind, answer, () => server.work.units - before, charged, server.logger.errors);
  });
});
