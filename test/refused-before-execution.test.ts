// SPEC §6 "Since 0.4": an operation the server refuses before it executes —
// variables that do not coerce, a failed validation, an unknown operation —
// takes no token, on Apollo Server, GraphQL Yoga, graphql-ws, Apollo Gateway
// and Hive Gateway (POST, GET, batches, subscriptions). Before, three 400s
// for a variable that did not coerce took three charges (priced with the
// argument's default). Variables are priced as the executor coerces them.
import type { ApolloServerPlugin, BaseContext } from '@apollo/server';
import type { Plugin as EnvelopPlugin } from '@envelop/core';
import { GraphQLError } from 'graphql';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { Rate, RedisStore, TokenBucket } from '../src/index.js';
import { postSse, run } from './support/adapters.js';
import { redisClient, uniquePrefix } from './support/clients.js';
import { HTTP_SERVERS, graphsOfThisFile, USER, startServer, startSockets } from './support/every-server.js';
import type { TestedServer, TestedSockets } from './support/every-server.js';
import { RecordingStore } from './support/graphql.js';
import type { ResponseBody } from './support/graphql.js';
import { tokensLeft } from './support/http-servers.js';

const redis = redisClient(inject('redisUrl'));
const shared = graphsOfThisFile(redis);
const { stops } = shared;

// One token an hour: nothing a test spends comes back while it runs.
const api = new TokenBucket('api', 1000, Rate.perHour(1));

function recordingStore(): RecordingStore {
  return new RecordingStore(new RedisStore(redis, { prefix: uniquePrefix('refused') }));
}

let users = 0;
function fresh(): string {
  users += 1;
  return `refused-${users}`;
}

const PAGE = 'query Page($n: Int!) { products(first: $n) { id } }';

interface Refusal {
  name: string;
  operation: { query: string; variables?: Record<string, unknown>; operationName?: string };
  /** The refusal's `extensions.code`, where every server gives the same one. */
  code?: string;
  message: RegExp;
}

const REFUSALS: Refusal[] = [
  { name: 'a variable of the wrong type', operation: { query: PAGE, variables: { n: 'many' } }, code: 'BAD_USER_INPUT', message: /^Variable "\$n" got invalid value "many"; Int cannot represent non-integer value: "many"/ },
  { name: 'a missing non-null variable', operation: { query: PAGE }, code: 'BAD_USER_INPUT', message: /^Variable "\$n" of required type "Int!" was not provided/ },
  { name: 'null for a non-null variable', operation: { query: PAGE, variables: { n: null } }, code: 'BAD_USER_INPUT', message: /^Variable "\$n" of non-null type "Int!" must not be null/ },
  { name: 'a float where an Int goes', operation: { query: PAGE, variables: { n: 2.5 } }, code: 'BAD_USER_INPUT', message: /^Variable "\$n" got invalid value 2.5/ },
  { name: 'a failed validation', operation: { query: '{ products(first: 2) { id nope } }' }, message: /Cannot query field "nope" on type "Product"/ },
  { name: 'an unknown operation', operation: { query: PAGE, variables: { n: 2 }, operationName: 'Other' }, message: /Unknown operation named "Other"|Could not determine what operation to execute/ },
];

describe.each(HTTP_SERVERS)('%s', (kind) => {
  let server: TestedServer;
  let store: RecordingStore;
  beforeAll(async () => {
    store = recordingStore();
    server = await startServer(kind, shared.graphs, { limits: { store, buckets: [api] } });
    stops.push(() => server.stop());
  });

  async function expectRefused(user: string, answer: { status: number; body: ResponseBody }, refusal: Refusal): Promise<void> {
    expect(answer.status).toBe(400);
    expect(answer.body.data ?? undefined).toBeUndefined();
    expect(answer.body.errors?.[0]?.message).toMatch(refusal.message);
    if (refusal.code !== undefined) expect(answer.body.errors?.[0]?.extensions?.['code']).toBe(refusal.code);
    expect(await tokensLeft(store, api, user)).toBe(1000);
  }

  it.each(REFUSALS.map((r) => [r.name, r] as const))('%s: refused with 400, three times, taking no token and running nothing', async (_name, refusal) => {
    const user = fresh();
    const work = server.work.total;
    for (let i = 0; i < 3; i++) await expectRefused(user, await server.post(refusal.operation, user), refusal);
    expect(server.work.total).toBe(work);
    expect(store.calls.flat().filter((r) => r.key === user)).toEqual([]);
    // The same operation with good variables is charged what it costs: 2 products.
    const served = await server.post({ query: PAGE, variables: { n: 2 } }, user);
    expect(served.status).toBe(200);
    expect(await tokensLeft(store, api, user)).toBeLessThan(1000);
  });

  it('over GET, a variable of the wrong type: refused with 400, taking no token', async () => {
    const user = fresh();
    const url = new URL(server.url);
    url.searchParams.set('query', PAGE);
    url.searchParams.set('variables', JSON.stringify({ n: 'many' }));
    const response = await fetch(url, { headers: { [USER]: user, accept: 'application/graphql-response+json', 'apollo-require-preflight': 'true' } });
    await expectRefused(user, { status: response.status, body: (await response.json()) as ResponseBody }, REFUSALS[0]!);
  });

  it('in a batch: the operation refused takes nothing, the one served is charged its own cost', async () => {
    const user = fresh();
    const answer = await server.post([{ query: PAGE, variables: { n: 'many' } }, { query: PAGE, variables: { n: 2 } }], user);
    const bodies = answer.body as unknown as ResponseBody[];
    expect(bodies[0]?.errors?.[0]?.extensions?.['code']).toBe('BAD_USER_INPUT');
    expect(bodies[1]?.data).toEqual({ products: [{ id: '1' }, { id: '2' }] });
    const charged = store.calls.flat().filter((r) => r.key === user);
    expect(charged).toHaveLength(1);
    expect(await tokensLeft(store, api, user)).toBe(1000 - charged[0]!.cost);
  });
});

describe('graphql-ws', () => {
  let sockets: TestedSockets;
  let store: RecordingStore;
  beforeAll(async () => {
    store = recordingStore();
    sockets = await startSockets(shared.graphs, { limits: { store, buckets: [api] } });
    stops.push(() => sockets.stop());
  });

  it.each(REFUSALS.map((r) => [r.name, r] as const))('%s: refused, three times, taking no token; the socket lives on', async (_name, refusal) => {
    const user = fresh();
    const client = sockets.client(user);
    const work = sockets.work.total;
    for (let i = 0; i < 3; i++) {
      const outcome = await run(client, refusal.operation);
      const errors = outcome.errors ?? outcome.results.flatMap((r) => r.errors ?? []);
      expect(errors[0]?.message).toMatch(refusal.message);
      expect(outcome.results.some((r) => r.data)).toBe(false);
    }
    expect(sockets.work.total).toBe(work);
    expect(await tokensLeft(store, api, user)).toBe(1000);
    expect(await run(client, { query: PAGE, variables: { n: 2 } })).toMatchObject({ results: [{ data: { products: [{ id: '1' }, { id: '2' }] } }], completed: true });
  });

  it('a subscription whose variable does not coerce: refused, taking no token', async () => {
    const user = fresh();
    const outcome = await run(sockets.client(user), { query: 'subscription($n: Int!) { productsAdded(first: $n) { id } }', variables: { n: 'many' } });
    expect(outcome.errors?.[0]?.message).toMatch(/^Variable "\$n" got invalid value "many"/);
    expect(await tokensLeft(store, api, user)).toBe(1000);
  });
});

describe('GraphQL Yoga, a subscription over SSE', () => {
  it('whose variable does not coerce: refused with 400, taking no token', async () => {
    const store = recordingStore();
    const server = await startServer('GraphQL Yoga', shared.graphs, { limits: { store, buckets: [api] } });
    stops.push(() => server.stop());
    const user = fresh();
    const answer = await postSse(server.url, { query: 'subscription($n: Int!) { productsAdded(first: $n) { id } }', variables: { n: 'many' } }, { [USER]: user });
    expect(answer.status).toBe(400);
    expect(await tokensLeft(store, api, user)).toBe(1000);
  });

  it.each([
    ['throws in its onSubscribe', ((): void => {
      throw new GraphQLError('Not allowed.', { extensions: { code: 'FORBIDDEN', http: { status: 403 } } });
    }) as NonNullable<EnvelopPlugin['onSubscribe']>],
    ['answers it with errors alone', (({ setResultAndStopExecution }) => {
      setResultAndStopExecution({ errors: [new GraphQLError('Not allowed.', { extensions: { code: 'FORBIDDEN' } })] });
    }) as NonNullable<EnvelopPlugin['onSubscribe']>],
  ] as const)('refused by a plugin after the limiter that %s: taking no token, no event sent', async (_how, onSubscribe) => {
    const store = recordingStore();
    const server = await startServer('GraphQL Yoga', shared.graphs, { limits: { store, buckets: [api] }, envelopPlugins: [{ onSubscribe }] });
    stops.push(() => server.stop());
    const user = fresh();
    const work = server.work.total;
    const answer = await postSse(server.url, { query: 'subscription($n: Int!) { productsAdded(first: $n) { id } }', variables: { n: 2 } }, { [USER]: user });
    expect(JSON.stringify(answer.events)).toContain('Not allowed.');
    expect(answer.events.filter((e) => e.event === 'next' && (e.data as ResponseBody).data != null)).toEqual([]);
    expect(server.work.total).toBe(work);
    // Priced (the store was asked), then given back.
    expect(store.calls.flat().some((r) => r.key === user)).toBe(true);
    expect(await tokensLeft(store, api, user)).toBe(1000);
  });
});

describe.each(HTTP_SERVERS)('%s, refused by a plugin after the limiter', (kind) => {
  // A plugin after the limiter that refuses the operation (a depth limit, an authorisation check) in Apollo
  // Server's didResolveOperation or envelop's onExecute, or answers it itself with errors alone: nothing
  // executes, so nothing is kept. Before, each such refusal kept the operation's whole charge.
  const refusing = (operationName: unknown): boolean => operationName === 'Deep';
  const refusal = () => new GraphQLError('Too deep.', { extensions: { code: 'TOO_DEEP', http: { status: 400 } } });
  const throwing: { apollo: ApolloServerPlugin<BaseContext>; envelop: EnvelopPlugin } = {
    apollo: {
      requestDidStart: async () => ({
        didResolveOperation: async ({ request }) => {
          if (refusing(request.operationName)) throw refusal();
        },
      }),
    },
    envelop: {
      onExecute: ({ args }) => {
        if (refusing(args.operationName)) throw refusal();
      },
    },
  };
  const answering: { apollo: ApolloServerPlugin<BaseContext>; envelop: EnvelopPlugin } = {
    apollo: {
      requestDidStart: async () => ({
        responseForOperation: async ({ request }) =>
          refusing(request.operationName) ? ({ http: { headers: new Map(), status: 400 }, body: { kind: 'single', singleResult: { errors: [refusal()] } } } as never) : null,
      }),
    },
    envelop: {
      onExecute: ({ args, setResultAndStopExecution }) => {
        if (refusing(args.operationName)) setResultAndStopExecution({ errors: [refusal()] });
      },
    },
  };
  const DEEP = { query: 'query Deep($n: Int!) { products(first: $n) { id } }', variables: { n: 2 }, operationName: 'Deep' };

  it.each([
    ['throwing in its hook', throwing],
    ['answering with errors alone', answering],
  ] as const)('%s: no token kept, alone or in a batch beside an operation that runs', async (_how, plugin) => {
    const store = recordingStore();
    const server = await startServer(kind, shared.graphs, { limits: { store, buckets: [api] }, apolloPlugins: [plugin.apollo], envelopPlugins: [plugin.envelop] });
    stops.push(() => server.stop());
    const user = fresh();
    const work = server.work.total;
    const alone = await server.post(DEEP, user);
    expect(alone.body.errors?.[0]?.message).toBe('Too deep.');
    expect(server.work.total).toBe(work);
    expect(await tokensLeft(store, api, user)).toBe(1000);
    const batch = await server.post([DEEP, { query: PAGE, variables: { n: 2 } }], user);
    const bodies = batch.body as unknown as ResponseBody[];
    expect(bodies[0]?.errors?.[0]?.message).toBe('Too deep.');
    expect(bodies[1]?.data).toEqual({ products: [{ id: '1' }, { id: '2' }] });
    // The batch's second operation alone is kept: what it was charged.
    const charges = store.calls.flat().filter((r) => r.key === user);
    expect(await tokensLeft(store, api, user)).toBe(1000 - charges[charges.length - 1]!.cost);
  });
});
