// SPEC §6, useTokenBucket: a real GraphQL Yoga server over HTTP answers a
// denied operation exactly as Apollo Server's plugin does (429, Retry-After,
// RATE_LIMITED with retryAfter, bucket and cost), takes each operation's
// tokens all or nothing in one store call, charges each operation of a batch
// on its own, and limits subscriptions served over SSE.
import type { IncomingMessage } from 'node:http';
import { envelop, useEngine, useSchema } from '@envelop/core';
import { makeExecutableSchema } from '@graphql-tools/schema';
import * as GraphQLJS from 'graphql';
import { createYoga } from 'graphql-yoga';
import type { YogaInitialContext } from 'graphql-yoga';
import { afterEach, describe, expect, it } from 'vitest';
import { buckets, createExampleServer, exampleContext, schema as exampleSchema } from '../examples/app.js';
import { useTokenBucket } from '../src/envelop/index.js';
import type { UseTokenBucketOptions } from '../src/envelop/index.js';
import { MemoryStore, Rate, TokenBucket, tokenBucketDirectiveTypeDefs } from '../src/index.js';
import type { BucketKey } from '../src/index.js';
import { postJson, postSse, serveHandler } from './support/adapters.js';
import type { JsonAnswer } from './support/adapters.js';
import { RecordingStore, captureLogger, serveHttp } from './support/graphql.js';
import type { ResponseBody } from './support/graphql.js';

type NodeContext = YogaInitialContext & { req: IncomingMessage };

const SEARCH = { query: '{ search(term: "Book") { id } }' };

const stops: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(stops.splice(0).map((stop) => stop()));
});

let users = 0;
/** A user no other test spends tokens of (both servers key on `x-user-id`). */
function freshUser(): Record<string, string> {
  users += 1;
  return { 'x-user-id': `yoga-user-${users}` };
}

interface Served {
  post(payload: unknown, headers: Record<string, string>): Promise<JsonAnswer<ResponseBody>>;
  store: RecordingStore;
  left(bucket: TokenBucket, user: Record<string, string>): Promise<number>;
}

/** The example schema and buckets under GraphQL Yoga, limited as the example limits Apollo Server. */
function exampleYoga(store: RecordingStore, options: Partial<UseTokenBucketOptions<NodeContext>> = {}) {
  return createYoga<{ req: IncomingMessage }>({
    schema: exampleSchema,
    batching: true,
    logging: false,
    plugins: [
      useTokenBucket<NodeContext>({
        store,
        buckets: Object.values(buckets),
        identify: ({ request, req }, bucket) =>
          bucket === buckets.login ? (req.socket.remoteAddress ?? 'unknown') : (request.headers.get('x-user-id') ?? req.socket.remoteAddress ?? 'unknown'),
        reportCost: true,
        refundUnusedCost: true,
        chargeIntrospection: false,
        ...options,
      }),
    ],
  });
}

/**
 * A MemoryStore whose clock stands still: no bucket refills while a test
 * runs, so what one spends is exactly what is left however slow the machine.
 */
function stillStore(): MemoryStore {
  const now = Date.now();
  return new MemoryStore({ now: () => now });
}

async function startYoga(): Promise<Served> {
  const store = new RecordingStore(stillStore());
  const server = await serveHandler(exampleYoga(store));
  stops.push(server.stop);
  return { post: (payload, headers) => postJson(server.url, payload, headers), store, left: (bucket, user) => left(store, bucket, user['x-user-id']!) };
}

async function startApollo(): Promise<Served> {
  const store = new RecordingStore(stillStore());
  const server = createExampleServer({ store, logger: captureLogger() });
  const http = await serveHttp(server, exampleContext);
  stops.push(() => server.stop());
  return { post: (payload, headers) => postJson(http.url, payload, headers), store, left: (bucket, user) => left(store, bucket, user['x-user-id']!) };
}

async function left(store: RecordingStore, bucket: TokenBucket, key: BucketKey): Promise<number> {
  const admission = await store.acquire(bucket, key, 0);
  if (!admission.allowed) throw new Error('a cost-0 acquire was denied');
  return admission.remaining;
}

/** Spends the 20 tokens of `search` (4 operations of cost 5), checking each is served. */
async function drainSearch(served: Served, user: Record<string, string>): Promise<void> {
  for (let i = 0; i < 4; i++) {
    const answer = await served.post(SEARCH, user);
    expect(answer.status).toBe(200);
    expect(answer.body.errors).toBeUndefined();
  }
}

describe.each([
  ['Apollo Server (tokenBucketPlugin)', startApollo],
  ['GraphQL Yoga (useTokenBucket)', startYoga],
])('%s over HTTP, with the example schema', (_name, startServer) => {
  it('answers a denied operation 429 with Retry-After in whole seconds and RATE_LIMITED with retryAfter, bucket and cost', async () => {
    const served = await startServer();
    const user = freshUser();
    await drainSearch(served, user);

    for (const accept of ['application/graphql-response+json', 'application/json']) {
      const denied = await served.post(SEARCH, { ...user, accept });
      expect(denied.status).toBe(429);
      expect(denied.headers.get('content-type')).toMatch(new RegExp(`^${accept.replace('+', '\\+')}`));
      expect(denied.body).toEqual({
        errors: [{ message: expect.any(String), extensions: { code: 'RATE_LIMITED', retryAfter: expect.any(Number), bucket: 'search', cost: 5 } }],
      });
      const retryAfter = denied.body.errors?.[0]?.extensions?.['retryAfter'] as number;
      // 5 tokens at 1 per 3 s, less the little refilled while draining.
      expect(retryAfter).toBeGreaterThan(13.5);
      expect(retryAfter).toBeLessThanOrEqual(15);
      expect(retryAfter * 1000).toBeCloseTo(Math.round(retryAfter * 1000), 6);
      expect(denied.headers.get('retry-after')).toBe('15');
    }
    expect(await served.left(buckets.search, user)).toBe(0);
  });

  it('serves an admitted operation with its report and no Retry-After', async () => {
    const served = await startServer();
    const answer = await served.post(SEARCH, freshUser());
    expect(answer.status).toBe(200);
    expect(answer.headers.get('retry-after')).toBeNull();
    expect(answer.body).toEqual({
      data: { search: expect.any(Array) },
      extensions: {
        // api: search's default 10 books × (Book 1 + id 0) = 10; search: its fixed 5. All of it came back.
        rateLimit: { api: { cost: 10, actualCost: 10, remaining: 990, capacity: 1000 }, search: { cost: 5, actualCost: 5, remaining: 15, capacity: 20 } },
      },
    });
  });

  it('answers an operation that can never fit with retryAfter null, 429, no Retry-After and no store call', async () => {
    const served = await startServer();
    const answer = await served.post({ query: '{ books(first: 1000) { title author { name } } }' }, freshUser());
    expect(answer.status).toBe(429);
    expect(answer.headers.get('retry-after')).toBeNull();
    // 1000 × (Book 1 + title 0 + author (1 + name 0)) = 2000 > 1000
    expect(answer.body).toEqual({
      errors: [{ message: expect.any(String), extensions: { code: 'RATE_LIMITED', retryAfter: null, bucket: 'api', cost: 2000 } }],
    });
    expect(served.store.calls).toEqual([]);
  });

  it('takes an operation\'s tokens all or nothing, in one store call', async () => {
    const served = await startServer();
    const user = freshUser();
    // export: 1 row × (Row 1 + id @cost 1) = 2; api: search 2 × (Book 1 + id 0) = 2, plus
    // export's 2 = 4; search: its fixed 5. Three buckets, one call; the response uses all of it.
    const three = { query: '{ search(term: "Book", first: 2) { id } export(rows: 1) { id } }' };
    const first = await served.post(three, user);
    expect(first.status).toBe(200);
    expect(first.body.extensions?.['rateLimit']).toEqual({
      api: { cost: 4, actualCost: 4, remaining: 996, capacity: 1000 },
      search: { cost: 5, actualCost: 5, remaining: 15, capacity: 20 },
      export: { cost: 2, actualCost: 2, remaining: 498, capacity: 500 },
    });
    expect(served.store.calls).toHaveLength(1);
    expect(served.store.calls[0]!.map((r) => r.bucket.name).sort()).toEqual(['api', 'export', 'search']);

    for (let i = 0; i < 3; i++) expect((await served.post(three, user)).status).toBe(200);
    // search is empty now: the next one is denied, and api and export keep what they had.
    const denied = await served.post(three, user);
    expect(denied.status).toBe(429);
    expect(denied.body.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', bucket: 'search', cost: 5 });
    expect(await served.left(buckets.search, user)).toBe(0);
    expect(await served.left(buckets.export, user)).toBe(500 - 4 * 2);
    expect(await served.left(buckets.api, user)).toBe(1000 - 4 * 4);
    expect(served.store.calls).toHaveLength(5); // one per operation (the reads above are not all-or-nothing calls)
  });

  it('charges a size given by a variable', async () => {
    const served = await startServer();
    const query = 'query Books($n: Int) { books(first: $n) { author { name } } }';
    // n × (Book 1 + author (1 + name 0)) = 2n: 500 fills api's 1000 exactly, 501 never fits.
    // The example holds 50 books: 100 tokens used, 900 given back.
    const small = await served.post({ query, variables: { n: 500 } }, freshUser());
    expect(small.status).toBe(200);
    expect(small.body.extensions?.['rateLimit']).toEqual({ api: { cost: 1000, actualCost: 100, remaining: 900, capacity: 1000 } });
    const large = await served.post({ query, variables: { n: 501 } }, freshUser());
    expect(large.status).toBe(429);
    expect(large.body.errors?.[0]?.extensions).toEqual({ code: 'RATE_LIMITED', retryAfter: null, bucket: 'api', cost: 1002 });
  });

  it('charges a mutation', async () => {
    const served = await startServer();
    const login = { query: 'mutation { login(email: "a@example.com", password: "x") { ok } }' };
    // Per client address: every test of this file shares 127.0.0.1, so drain what is left.
    let answer: JsonAnswer<ResponseBody>;
    let served200 = 0;
    do {
      answer = await served.post(login, freshUser());
      if (answer.status === 200) served200 += 1;
    } while (answer.status === 200 && served200 <= 5);
    expect(served200).toBeLessThanOrEqual(5);
    expect(answer.status).toBe(429);
    expect(answer.body.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', bucket: 'login', cost: 1 });
    expect(answer.body.data).toBeUndefined();
  });
});

describe('GraphQL Yoga batches (batching: true)', () => {
  it('charges each operation of a batch on its own', async () => {
    const store = new RecordingStore(stillStore());
    const server = await serveHandler(exampleYoga(store));
    stops.push(server.stop);
    const user = freshUser();
    const answer = await postJson<ResponseBody[]>(server.url, [SEARCH, SEARCH], user);
    expect(answer.status).toBe(200);
    expect(answer.body).toHaveLength(2);
    const reported = answer.body.map((r) => (r.extensions?.['rateLimit'] as Record<string, { remaining: number }>)['search']!.remaining);
    expect(reported.sort((a, b) => a - b)).toEqual([10, 15]);
    expect(store.calls).toHaveLength(2);
    expect(await left(store, buckets.search, user['x-user-id']!)).toBe(10);
  });

  it('serves the other operations of a batch when one is denied; the denied one carries its own retryAfter, the batch 429 and Retry-After', async () => {
    const store = new RecordingStore(stillStore());
    const server = await serveHandler(exampleYoga(store));
    stops.push(server.stop);
    const user = freshUser();
    for (let i = 0; i < 4; i++) expect((await postJson(server.url, SEARCH, user)).status).toBe(200);
    const answer = await postJson<ResponseBody[]>(server.url, [SEARCH, { query: '{ book(id: "1") { title } }' }], user);
    // As Apollo Server answers a batch with a denied operation.
    expect(answer.status).toBe(429);
    expect(answer.headers.get('retry-after')).toBe('15');
    const [denied, served] = answer.body;
    expect(denied).toEqual({
      errors: [{ message: expect.any(String), extensions: { code: 'RATE_LIMITED', retryAfter: expect.any(Number), bucket: 'search', cost: 5 } }],
    });
    expect(denied?.errors?.[0]?.extensions?.['retryAfter']).toBeGreaterThan(13.5);
    expect(served).toEqual({ data: { book: { title: 'Book 1' } }, extensions: { rateLimit: { api: { cost: 1, actualCost: 1, remaining: expect.any(Number), capacity: 1000 } } } });
  });
});

// A schema of its own: subscriptions served over SSE, as GraphQL Yoga serves them.
const typeDefs = `${tokenBucketDirectiveTypeDefs}
type Query { hello: String @tokenBucket(name: "live", cost: 1) }
type Subscription {
  ticks(from: Int! = 1): Int! @tokenBucket(name: "live", cost: 1)
}
`;
const live = new TokenBucket('live', 3, Rate.perMinute(1));

function liveYoga(options: Partial<UseTokenBucketOptions<YogaInitialContext & { user: string }>> = {}) {
  const subscribed = { count: 0, closed: 0 };
  const seen: unknown[] = [];
  const schema = makeExecutableSchema({
    typeDefs,
    resolvers: {
      Query: { hello: () => 'hi' },
      Subscription: {
        ticks: {
          subscribe: async function* (_: unknown, { from }: { from: number }) {
            subscribed.count += 1;
            try {
              for (let n = from; n >= 0; n--) yield { ticks: n };
            } finally {
              subscribed.closed += 1;
            }
          },
        },
      },
    },
  });
  const yoga = createYoga<Record<string, never>, { user: string }>({
    schema,
    logging: false,
    context: ({ request }) => ({ user: request.headers.get('x-user-id') ?? 'anonymous' }),
    plugins: [
      useTokenBucket<YogaInitialContext & { user: string }>({
        store: new MemoryStore(),
        buckets: [live],
        identify: (context) => {
          seen.push(context);
          return context.user;
        },
        reportCost: true,
        ...options,
      }),
    ],
  });
  return { yoga, subscribed, seen };
}

describe('GraphQL Yoga subscriptions over SSE', () => {
  it('refuses the 4th subscription of a user before it starts: 429, Retry-After, one RATE_LIMITED result', async () => {
    const { yoga, subscribed } = liveYoga();
    const server = await serveHandler(yoga);
    stops.push(server.stop);
    const user = freshUser();
    const TICKS = { query: 'subscription { ticks(from: 1) }' };
    for (let i = 0; i < 3; i++) {
      const admitted = await postSse(server.url, TICKS, user);
      expect(admitted.status).toBe(200);
      expect(admitted.events).toEqual([
        // The first event carries what starting the subscription cost, as Apollo Server's answer does.
        { event: 'next', data: { data: { ticks: 1 }, extensions: { rateLimit: { live: { cost: 1, remaining: 2 - i, capacity: 3 } } } } },
        { event: 'next', data: { data: { ticks: 0 } } },
        { event: 'complete', data: null },
      ]);
    }
    const denied = await postSse(server.url, TICKS, user);
    expect(denied.status).toBe(429);
    expect(denied.headers.get('retry-after')).toBe('60');
    expect(denied.events).toEqual([
      { event: 'next', data: { errors: [{ message: expect.any(String), extensions: { code: 'RATE_LIMITED', retryAfter: expect.any(Number), bucket: 'live', cost: 1 } }] } },
      { event: 'complete', data: null },
    ]);
    expect(subscribed.count).toBe(3);
  });

  it('with chargeEachEvent, ends a subscription with RATE_LIMITED at the first event it cannot pay', async () => {
    const { yoga, subscribed } = liveYoga({ chargeEachEvent: true });
    const server = await serveHandler(yoga);
    stops.push(server.stop);
    const answer = await postSse(server.url, { query: 'subscription { ticks(from: 9) }' }, freshUser());
    expect(answer.status).toBe(200);
    expect(answer.events).toEqual([
      { event: 'next', data: { data: { ticks: 9 }, extensions: { rateLimit: { live: { cost: 1, remaining: 1, capacity: 3 } } } } },
      { event: 'next', data: { data: { ticks: 8 }, extensions: { rateLimit: { live: { cost: 1, remaining: 0, capacity: 3 } } } } },
      { event: 'next', data: { errors: [{ message: expect.any(String), extensions: { code: 'RATE_LIMITED', retryAfter: expect.any(Number), bucket: 'live', cost: 1 } }] } },
      { event: 'complete', data: null },
    ]);
    expect(subscribed.closed).toBe(1);
  });

  it('gives identify the GraphQL context value: the request, the parameters and what the context factory added', async () => {
    const { yoga, seen } = liveYoga();
    const server = await serveHandler(yoga);
    stops.push(server.stop);
    const user = freshUser();
    expect((await postJson(server.url, { query: '{ hello }' }, user)).status).toBe(200);
    expect(seen).toHaveLength(1);
    const context = seen[0] as YogaInitialContext & { user: string };
    expect(context.user).toBe(user['x-user-id']);
    expect(context.request.headers.get('x-user-id')).toBe(user['x-user-id']);
    expect(context.params.query).toBe('{ hello }');
  });
});

describe('useTokenBucket set-up', () => {
  it('fails the server\'s creation on a faulty annotation, naming it', () => {
    const schema = makeExecutableSchema({ typeDefs });
    expect(() =>
      createYoga({ schema, logging: false, plugins: [useTokenBucket({ store: new MemoryStore(), buckets: [new TokenBucket('other', 1, Rate.perMinute(1))], identify: () => 'x' })] }),
    ).toThrow(/@tokenBucket on Query\.hello names bucket "live", which is not in the plugin's buckets \("other"\)/);
  });

  it('throws at once on a wrong option', () => {
    const store = new MemoryStore();
    expect(() => useTokenBucket({ store, buckets: [live], identify: () => 'x', chargeEachEvent: 1 as unknown as boolean })).toThrow(
      /useTokenBucket option "chargeEachEvent" must be a boolean/,
    );
    expect(() => useTokenBucket({ store, buckets: [live], identify: () => 'x', logger: {} as unknown as ReturnType<typeof captureLogger> })).toThrow(
      /useTokenBucket option "logger" must have warn and error methods/,
    );
    expect(() => useTokenBucket({ store: {} as unknown as MemoryStore, buckets: [live], identify: () => 'x' })).toThrow(/option "store" must be a BucketStore/);
  });
});

describe('useTokenBucket in plain envelop', () => {
  it('prices each execution and hands back the error with its HTTP status and Retry-After in extensions.http', async () => {
    const schema = makeExecutableSchema({ typeDefs, resolvers: { Query: { hello: () => 'hi' } } });
    const getEnveloped = envelop({
      plugins: [useEngine(GraphQLJS), useSchema(schema), useTokenBucket({ store: new MemoryStore(), buckets: [live], identify: () => 'me', reportCost: true })],
    });
    const results: unknown[] = [];
    for (let i = 0; i < 4; i++) {
      const { parse, validate, contextFactory, execute, schema: served } = getEnveloped({});
      const document = parse('{ hello }');
      expect(validate(served, document)).toEqual([]);
      results.push(JSON.parse(JSON.stringify(await execute({ document, schema: served, contextValue: await contextFactory() }))));
    }
    expect(results.slice(0, 3)).toEqual([2, 1, 0].map((remaining) => ({ data: { hello: 'hi' }, extensions: { rateLimit: { live: { cost: 1, remaining, capacity: 3 } } } })));
    expect(results[3]).toEqual({
      errors: [
        {
          message: expect.any(String),
          extensions: { code: 'RATE_LIMITED', retryAfter: expect.any(Number), bucket: 'live', cost: 1, http: { status: 429, headers: { 'retry-after': '60' } } },
        },
      ],
    });
  });
});

describe('GraphQL Yoga runs what was priced', () => {
  it('a plugin after useTokenBucket that replaces the variables fails the operation, running nothing, and the log says to move it', async () => {
    const sizes: number[] = [];
    const schema = makeExecutableSchema({
      typeDefs: `${tokenBucketDirectiveTypeDefs}
        type Item { id: ID! }
        type Query { items(first: Int!): [Item!]! @tokenBucket(name: "live") }`,
      resolvers: { Query: { items: (_: unknown, { first }: { first: number }) => (sizes.push(first), Array.from({ length: first }, (_x, i) => ({ id: i }))) } },
    });
    const logger = captureLogger();
    const yoga = createYoga({
      schema,
      logging: false,
      plugins: [
        useTokenBucket({ store: new MemoryStore(), buckets: [live], identify: () => 'me', reportCost: true, logger }),
        { onExecute: ({ args }: { args: { variableValues?: unknown } }) => void (args.variableValues = { n: 3000 }) },
      ],
    });
    const server = await serveHandler(yoga);
    stops.push(server.stop);
    const answer = await postJson<ResponseBody>(server.url, { query: 'query($n: Int!) { items(first: $n) { id } }', variables: { n: 2 } });
    expect(answer.status).toBe(500);
    expect(answer.body).toEqual({ errors: [{ message: 'Internal server error', extensions: { code: 'INTERNAL_SERVER_ERROR' } }] });
    expect(sizes).toEqual([]);
    expect(logger.errors).toEqual([
      'graphql-token-bucket: args.variableValues was changed after useTokenBucket priced it, so the operation is refused: what runs must be what was charged. ' +
        'A plugin that changes the operation must run before useTokenBucket (earlier in the plugins list, or in an earlier hook).',
    ]);
  });
});

describe('envelop runs what was priced', () => {
  it('a plugin after useTokenBucket that names an operation cannot make one execution refuses run unpriced', async () => {
    const ran: string[] = [];
    const schema = makeExecutableSchema({
      typeDefs: `${tokenBucketDirectiveTypeDefs}
        type Query { cheap: Int, expensive: Int @tokenBucket(name: "live", cost: 1) }`,
      resolvers: { Query: { cheap: () => (ran.push('cheap'), 1), expensive: () => (ran.push('expensive'), 2) } },
    });
    const store = new RecordingStore(stillStore());
    const getEnveloped = envelop({
      plugins: [
        useEngine(GraphQLJS),
        useSchema(schema),
        useTokenBucket({ store, buckets: [live], identify: () => 'me' }),
        { onExecute: ({ args }: { args: { operationName?: string | null } }) => void (args.operationName = 'B') },
      ],
    });
    const { parse, contextFactory, execute, schema: served } = getEnveloped({});
    // Two operations and no name: graphql-js refuses to choose, so nothing is priced, and the limiter refuses it.
    const result = await execute({ document: parse('query A { cheap } query B { expensive }'), schema: served, contextValue: await contextFactory() });
    expect(JSON.parse(JSON.stringify(result))).toMatchObject({ errors: [{ message: 'Must provide operation name if query contains multiple operations.', extensions: { code: 'BAD_REQUEST' } }] });
    expect(ran).toEqual([]);
    expect(store.calls).toEqual([]);
  });
});
