// SPEC §3, §4 and §6 "Since 0.2.1": what runs is what was priced, on every
// server and every path. One table of operations goes through Apollo Server
// over HTTP (POST and GET), GraphQL Yoga over HTTP (POST and GET),
// graphql-ws beside Apollo Server, and Mercurius over HTTP (POST and GET) and
// its WebSocket, each with a fresh identity of a RedisStore whose buckets
// cannot refill during the test; each transport must show the same charge,
// answer, report and resolver runs, and the HTTP ones the same status and
// headers (a socket has none: its answer stands for them). Subscriptions go
// through graphql-ws, Mercurius' WebSocket and Yoga's SSE.
import { on, EventEmitter } from 'node:events';
import { createServer } from 'node:net';
import type { BaseContext } from '@apollo/server';
import { makeExecutableSchema } from '@graphql-tools/schema';
import Fastify from 'fastify';
import type { GraphQLFormattedError } from 'graphql';
import type { Context } from 'graphql-ws';
import { createYoga } from 'graphql-yoga';
import type { YogaInitialContext } from 'graphql-yoga';
import { Redis } from 'ioredis';
import mercurius from 'mercurius';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { useTokenBucket } from '../src/envelop/index.js';
import { tokenBucketSubscriptions } from '../src/graphql-ws/index.js';
import { mercuriusTokenBucket } from '../src/mercurius/index.js';
import { Rate, RedisStore, TokenBucket, tokenBucketDirectiveTypeDefs, tokenBucketPlugin } from '../src/index.js';
import type { BucketStore, LimiterOptions, TokenBucket as Bucket } from '../src/index.js';
import { disposeClients, postJson, postSse, run, serveApolloWithSockets, serveHandler, socketClient, start } from './support/adapters.js';
import { redisClient, uniquePrefix } from './support/clients.js';
import { RecordingStore, captureLogger, waitFor } from './support/graphql.js';
import type { CapturedLogger, ResponseBody } from './support/graphql.js';
import { MetricsProbe } from './support/metrics.js';

const typeDefs = `${tokenBucketDirectiveTypeDefs}
directive @listSize(assumedSize: Int, slicingArguments: [String!], sizedFields: [String!], requireOneSlicingArgument: Boolean = true) on FIELD_DEFINITION
input Filter { first: Int = 500, and: Filter, any: [Filter!] }
type Item { id: ID! }
type Query {
  items(first: Int = 500): [Item!]! @tokenBucket(name: "api")
  list(ids: [ID!]): [Item!]! @tokenBucket(name: "api")
  filtered(filter: Filter): [Item!]! @tokenBucket(name: "api") @listSize(slicingArguments: ["filter.first"])
  cheap: Int @tokenBucket(name: "api", cost: 1)
  expensive: Int @tokenBucket(name: "tight", cost: 1)
  watched: Int @tokenBucket(name: "watch", cost: 1)
}
type Subscription {
  ticks(from: Int = 1): Int! @tokenBucket(name: "live", cost: 1)
  held: Int! @tokenBucket(name: "live", cost: 1)
}
`;

// One token an hour: nothing a test spends comes back while it runs.
const api = new TokenBucket('api', 1000, Rate.perHour(1));
const tight = new TokenBucket('tight', 1, Rate.perHour(1));
const watch = new TokenBucket('watch', 1, Rate.perHour(1));
const live = new TokenBucket('live', 10, Rate.perHour(1));
const buckets = [api, tight, watch, live];

/** Every resolver that ran, by field name, since the last `runs.splice(0)`. */
const runs: string[] = [];
/** What `held` waits for between its events. */
const held = new EventEmitter();

const items = (n: number) => Array.from({ length: Math.max(0, Math.min(n, 5000)) }, (_, i) => ({ id: String(i) }));
/** `items` has only this many to give, whatever it is asked for: what `refundUnusedCost` gives back. */
const STOCK = 7;
const resolvers = {
  Query: {
    items: (_: unknown, { first }: { first?: number }) => (runs.push('items'), items(Math.min(first ?? 0, STOCK))),
    // No ids: everything.
    list: (_: unknown, { ids }: { ids?: string[] }) => (runs.push('list'), ids ? ids.map((id) => ({ id })) : items(500)),
    filtered: (_: unknown, { filter }: { filter?: { first?: number } }) => (runs.push('filtered'), items(filter?.first ?? 500)),
    cheap: () => (runs.push('cheap'), 1),
    expensive: () => (runs.push('expensive'), 2),
    watched: () => (runs.push('watched'), 3),
  },
  Subscription: {
    ticks: {
      subscribe: async function* () {
        runs.push('ticks');
        yield { ticks: 1 };
        yield { ticks: 0 };
      },
    },
    held: {
      subscribe: () => (runs.push('held'), on(held, 'event')),
      resolve: ([n]: [number]) => n,
    },
  },
};

/** A user whose `identify` fails for the `tight` bucket, as a database that is down would. */
const BROKEN = 'broken';
const DATABASE_FAULT = 'pg: password authentication failed for user "billing" at 10.0.0.7:5432';
function identity(user: string, bucket: Bucket): string {
  if (user.startsWith(BROKEN) && bucket === tight) throw new Error(DATABASE_FAULT);
  return user;
}

interface Servers {
  apollo: string;
  ws: string;
  yoga: string;
  mercurius: string;
  mercuriusWs: string;
  store: RecordingStore;
  /** The four adapters' loggers, merged. */
  logger: CapturedLogger;
  metrics: MetricsProbe;
}

const stops: (() => Promise<void>)[] = [];
const redisClients: Redis[] = [];
afterEach(() => disposeClients());
afterAll(async () => {
  await disposeClients();
  await Promise.all(stops.splice(0).map((stop) => stop()));
  for (const client of redisClients) client.disconnect();
});

type UserContext = BaseContext & { user: string };

/** Apollo Server with graphql-ws on one port, and GraphQL Yoga, limited alike over one store. */
async function serveAll(inner: BucketStore & Required<Pick<BucketStore, 'acquire' | 'acquireAll' | 'reset'>>, { validation = true } = {}): Promise<Servers> {
  const store = new RecordingStore(inner);
  const logger = captureLogger();
  const metrics = new MetricsProbe();
  const limits: Omit<LimiterOptions<unknown>, 'identify'> = {
    store,
    buckets,
    measure: ['watch'],
    onStoreError: 'deny',
    reportCost: true,
    refundUnusedCost: true,
    rateLimitHeaders: true,
    // Each transport has its own limiter: a denial one remembers must not answer another's request.
    meterProvider: metrics.provider,
  };
  const schema = makeExecutableSchema({ typeDefs, resolvers });
  const apollo = await serveApolloWithSockets<UserContext>({
    schema,
    logger,
    dangerouslyDisableValidation: !validation,
    context: ({ req }) => Promise.resolve({ user: String(req.headers['x-user-id']) }),
    plugins: [tokenBucketPlugin<UserContext>({ ...limits, identify: ({ contextValue }, bucket) => identity(contextValue.user, bucket) })],
    sockets: {
      ...tokenBucketSubscriptions({
        ...limits,
        schema,
        logger,
        identify: (ctx: Context<Record<string, unknown> | undefined>, bucket) => identity(String(ctx.connectionParams?.['user']), bucket),
      }),
      ...(validation ? {} : { validate: () => [] }),
    },
  });
  stops.push(() => apollo.stop());
  const yoga = createYoga({
    schema,
    logging: false,
    batching: true,
    plugins: [
      ...(validation ? [] : [{ onValidate: ({ setValidationFn }: { setValidationFn(fn: () => []): void }) => setValidationFn(() => []) }]),
      useTokenBucket<YogaInitialContext>({ ...limits, logger, identify: ({ request }, bucket) => identity(String(request.headers.get('x-user-id')), bucket) }),
    ],
  });
  const served = await serveHandler(yoga);
  stops.push(served.stop);
  const fastify = await serveMercurius(limits, logger);
  return { apollo: apollo.url, ws: apollo.wsUrl, yoga: served.url, ...fastify, store, logger, metrics };
}

/** Fastify with Mercurius (batches and subscriptions on), limited alike, on a schema of its own (the limiter wraps its subscription fields). */
async function serveMercurius(limits: Omit<LimiterOptions<unknown>, 'identify'>, logger: CapturedLogger): Promise<Pick<Servers, 'mercurius' | 'mercuriusWs'>> {
  const app = Fastify();
  stops.push(() => app.close());
  await app.register(mercurius, { schema: makeExecutableSchema({ typeDefs, resolvers }), allowBatchedQueries: true, subscription: { fullWsTransport: true } });
  await app.register(mercuriusTokenBucket, {
    ...limits,
    logger,
    identify: (context, bucket) => {
      const { reply, _connectionInit: init } = context as { reply?: { request?: { headers: Record<string, unknown> } }; _connectionInit?: { user?: unknown } };
      return identity(String(init?.user ?? reply?.request?.headers['x-user-id']), bucket);
    },
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as { port: number };
  return { mercurius: `http://127.0.0.1:${port}/graphql`, mercuriusWs: `ws://127.0.0.1:${port}/graphql` };
}

function redisStore(): RedisStore {
  const client = redisClient(inject('redisUrl'));
  redisClients.push(client);
  return new RedisStore(client, { prefix: uniquePrefix('parity') });
}

/**
 * A RedisStore whose Redis hangs up on every connection (a port this file
 * holds, so nothing else can answer there): every call fails at once.
 */
async function deadRedisStore(): Promise<RedisStore> {
  const hangUp = createServer((connection) => connection.destroy());
  const port = await new Promise<number>((resolve) => {
    hangUp.listen(0, '127.0.0.1', () => resolve((hangUp.address() as { port: number }).port));
  });
  stops.push(() => new Promise<void>((resolve) => hangUp.close(() => resolve())));
  const client = new Redis({ host: '127.0.0.1', port, lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
  client.on('error', () => {});
  redisClients.push(client);
  return new RedisStore(client, { prefix: uniquePrefix('parity-dead') });
}

interface Operation {
  query: string;
  variables?: Record<string, unknown>;
  operationName?: string;
}

/** What one transport showed of one request (several operations for a batch). */
interface Seen {
  /** HTTP status; a socket has none. */
  status: number | undefined;
  retryAfter: string | null | undefined;
  /**
   * The RateLimit field's items in name order (a batch lists them as its
   * operations finish), without `t` (seconds until full, which moves with the clock).
   */
  rateLimit: string | null | undefined;
  /** Per operation: its error codes (`ok` with none), data and report. */
  answers: { codes: string[]; data: unknown; report: unknown }[];
}

const OUR_CODES = new Set(['RATE_LIMITED', 'RATE_LIMITER_UNAVAILABLE', 'INTERNAL_SERVER_ERROR']);

/** Our codes as they are; the refusal of `__proto__` by its reason; any other error (the servers word them each their own way) as `error`. */
function codesOf(errors: readonly GraphQLFormattedError[] | undefined): string[] {
  if (errors === undefined || errors.length === 0) return ['ok'];
  return errors.map(({ message, extensions }) => {
    const code = String(extensions?.['code']);
    if (code === 'BAD_USER_INPUT' && message.includes('__proto__')) return 'BAD_USER_INPUT __proto__';
    return OUR_CODES.has(code) ? code : 'error';
  });
}

/** No data: Mercurius answers an operation refused before it runs (by itself or by the limiter) with `data: null`, the others leave it out. */
function answerOf(body: ResponseBody): Seen['answers'][number] {
  return { codes: codesOf(body.errors as GraphQLFormattedError[] | undefined), data: body.data ?? undefined, report: body.extensions?.['rateLimit'] };
}

function headersOf(status: number, headers: Headers): Pick<Seen, 'status' | 'retryAfter' | 'rateLimit'> {
  return { status, retryAfter: headers.get('retry-after'), rateLimit: headers.get('ratelimit')?.replace(/;t=\d+/g, '').split(', ').sort().join(', ') ?? null };
}

type Transport = (servers: Servers, operations: readonly Operation[], user: string) => Promise<Seen>;

type HttpServer = 'apollo' | 'yoga' | 'mercurius';

const post =
  (server: HttpServer): Transport =>
  async (servers, operations, user) => {
    const batch = operations.length > 1;
    const answer = await postJson<ResponseBody | ResponseBody[]>(servers[server], batch ? operations : operations[0], { 'x-user-id': user });
    const bodies = Array.isArray(answer.body) ? answer.body : [answer.body];
    return { ...headersOf(answer.status, answer.headers), answers: bodies.map(answerOf) };
  };

const get =
  (server: HttpServer): Transport =>
  async (servers, [operation], user) => {
    const url = new URL(servers[server]);
    url.searchParams.set('query', operation!.query);
    if (operation!.variables) url.searchParams.set('variables', JSON.stringify(operation!.variables));
    if (operation!.operationName !== undefined) url.searchParams.set('operationName', operation!.operationName);
    const response = await fetch(url, { headers: { 'x-user-id': user, accept: 'application/graphql-response+json, application/json', 'apollo-require-preflight': 'true' } });
    return { ...headersOf(response.status, response.headers), answers: [answerOf((await response.json()) as ResponseBody)] };
  };

/** Each operation over one socket, one after the other (graphql-ws has no batches). */
const socket =
  (server: 'ws' | 'mercuriusWs'): Transport =>
  async (servers, operations, user) => {
    const client = socketClient(servers[server], { user });
    const answers: Seen['answers'] = [];
    for (const operation of operations) {
      const outcome = await run(client, operation);
      const errors = outcome.errors ?? outcome.results.flatMap((r) => r.errors ?? []);
      answers.push({ codes: codesOf(errors), data: outcome.results[0]?.data ?? undefined, report: outcome.results[0]?.extensions?.['rateLimit'] });
    }
    return { status: undefined, retryAfter: undefined, rateLimit: undefined, answers };
  };

const TRANSPORTS: Record<string, Transport> = {
  'Apollo Server, HTTP POST': post('apollo'),
  'Apollo Server, HTTP GET': get('apollo'),
  'GraphQL Yoga, HTTP POST': post('yoga'),
  'GraphQL Yoga, HTTP GET': get('yoga'),
  'graphql-ws beside Apollo Server': socket('ws'),
  'Mercurius, HTTP POST': post('mercurius'),
  'Mercurius, HTTP GET': get('mercurius'),
  'Mercurius, WebSocket': socket('mercuriusWs'),
};
const BATCH_TRANSPORTS = ['Apollo Server, HTTP POST', 'GraphQL Yoga, HTTP POST', 'graphql-ws beside Apollo Server', 'Mercurius, HTTP POST', 'Mercurius, WebSocket'];

interface Case {
  name: string;
  operations: Operation[];
  /** Sent first, as the same user, and not compared: what empties a bucket. */
  before?: Operation[];
  user?: string;
  /** Over HTTP; the socket's answer stands for it. */
  status: number;
  retryAfter?: string | null;
  codes: string[][];
  /** Resolvers that ran, sorted. */
  runs: string[];
  /** `bucket:cost` of each request the store was asked for this user, sorted. */
  charged: string[];
  /** The first operation's `extensions.rateLimit`, where the case names it. */
  report?: unknown;
  /** Where the case applies, when not every transport (GraphQL Yoga reads an empty GET parameter as none). */
  transports?: string[];
}

const PROTO_REFUSED = { status: 400, codes: [['BAD_USER_INPUT __proto__']], runs: [], charged: [] };
/**
 * A `__proto__` key in the JSON the client sends: Fastify refuses the body
 * (and Mercurius the GET variables, and its socket the message) before
 * Mercurius or the limiter see it; see "Mercurius refuses …" below.
 */
const JSON_PROTO = { ...PROTO_REFUSED, transports: Object.keys(TRANSPORTS).filter((name) => !name.startsWith('Mercurius')) };

// A variable or input field named `__proto__`: GraphQL Yoga's executor keeps
// variables in plain objects, where that key vanishes (the resolver got its
// schema default, 500 items, for a price of 0). Refused everywhere alike.
const CASES: Case[] = [
  { name: 'a variable named __proto__ with a default', operations: [{ query: 'query($__proto__: Int = 0) { items(first: $__proto__) { id } }' }], ...PROTO_REFUSED },
  {
    name: 'a variable named __proto__ with a value',
    operations: [{ query: 'query($__proto__: Int) { items(first: $__proto__) { id } }', variables: JSON.parse('{"__proto__": 0}') as Record<string, unknown> }],
    ...JSON_PROTO,
  },
  { name: 'a list variable named __proto__ with a default', operations: [{ query: 'query($__proto__: [ID!] = []) { list(ids: $__proto__) { id } }' }], ...PROTO_REFUSED },
  {
    name: 'an input field named __proto__ in a variable',
    operations: [{ query: 'query($f: Filter) { filtered(filter: $f) { id } }', variables: JSON.parse('{"f": {"__proto__": {"first": 400}}}') as Record<string, unknown> }],
    ...JSON_PROTO,
  },
  {
    name: 'an input field named __proto__ nested in a variable',
    operations: [{ query: 'query($f: Filter) { filtered(filter: $f) { id } }', variables: JSON.parse('{"f": {"first": 1, "and": {"__proto__": {"first": 400}}}}') as Record<string, unknown> }],
    ...JSON_PROTO,
  },
  {
    name: 'an input field named __proto__ in a list in a variable',
    operations: [{ query: 'query($f: Filter) { filtered(filter: $f) { id } }', variables: JSON.parse('{"f": {"first": 1, "any": [{"first": 1}, {"__proto__": {"first": 400}}]}}') as Record<string, unknown> }],
    ...JSON_PROTO,
  },
  {
    name: 'a variable named like another property of Object.prototype: served and charged its value',
    operations: [{ query: 'query($constructor: Int) { items(first: $constructor) { id } }', variables: { constructor: 3 } }],
    status: 200,
    codes: [['ok']],
    runs: ['items'],
    charged: ['api:3'],
  },
  {
    name: 'a response that uses less than its estimate: the same refund and report',
    operations: [{ query: 'query($n: Int) { items(first: $n) { id } }', variables: { n: 20 } }],
    status: 200,
    codes: [['ok']],
    runs: ['items'],
    charged: ['api:20'],
    report: { api: { cost: 20, actualCost: STOCK, remaining: 1000 - STOCK, capacity: 1000 } },
  },
  {
    name: 'two operations of one name: refused by validation, nothing charged',
    operations: [{ query: 'query A { cheap } query A { expensive }', operationName: 'A' }],
    status: 400,
    codes: [['error']],
    runs: [],
    charged: [],
  },
  {
    // Apollo Gateway reads an empty operationName as none and ran the
    // document's only operation, unpriced: the limiter refuses what it cannot price.
    name: 'an empty operationName: refused, nothing charged',
    operations: [{ query: '{ expensive }', operationName: '' }],
    transports: ['Apollo Server, HTTP POST', 'GraphQL Yoga, HTTP POST', 'graphql-ws beside Apollo Server', 'Mercurius, HTTP POST', 'Mercurius, WebSocket'],
    status: 400,
    codes: [['error']],
    runs: [],
    charged: [],
  },
  {
    name: 'an operation a bucket denies',
    before: [{ query: '{ expensive }' }],
    operations: [{ query: '{ expensive }' }],
    status: 429,
    retryAfter: '3600',
    codes: [['RATE_LIMITED']],
    runs: [],
    charged: ['tight:1'],
  },
  {
    name: 'identify failing for one bucket: that operation alone, a generic error, nothing charged',
    user: BROKEN,
    operations: [{ query: '{ expensive }' }],
    status: 500,
    retryAfter: null,
    codes: [['INTERNAL_SERVER_ERROR']],
    runs: [],
    charged: [],
  },
];

// Batches: the socket sends their operations one after the other.
const BATCHES: Case[] = [
  ...(
    [
      ['a missing variable', { query: 'query($n: Int!) { items(first: $n) { id } }' }],
      ['a validation error', { query: '{ nope }' }],
      ['an unknown operationName', { query: 'query B { cheap }', operationName: 'C' }],
      ['a __proto__ variable', { query: 'query($__proto__: Int = 0) { items(first: $__proto__) { id } }' }],
    ] as const
  ).flatMap(([what, failing]): Case[] => {
    const failed = failing.query.includes('__proto__') ? 'BAD_USER_INPUT __proto__' : 'error';
    // The operation refused (its variables do not coerce, it is invalid, unknown) takes nothing.
    const charged = ['tight:1'];
    return [
      {
        name: `a batch of a denied operation, then one with ${what}`,
        before: [{ query: '{ expensive }' }],
        operations: [{ query: '{ expensive }' }, failing],
        status: 429,
        retryAfter: '3600',
        codes: [['RATE_LIMITED'], [failed]],
        runs: [],
        charged,
      },
      {
        name: `a batch of one with ${what}, then a denied operation`,
        before: [{ query: '{ expensive }' }],
        operations: [failing, { query: '{ expensive }' }],
        status: 429,
        retryAfter: '3600',
        codes: [[failed], ['RATE_LIMITED']],
        runs: [],
        charged,
      },
    ];
  }),
  {
    name: 'a batch of a served operation and one identify fails for',
    user: BROKEN,
    operations: [{ query: '{ cheap }' }, { query: '{ expensive }' }],
    status: 500,
    retryAfter: null,
    codes: [['ok'], ['INTERNAL_SERVER_ERROR']],
    runs: ['cheap'],
    charged: ['api:1'],
  },
  {
    name: 'a batch of a served operation and a denied one',
    before: [{ query: '{ expensive }' }],
    operations: [{ query: '{ cheap }' }, { query: '{ expensive }' }],
    status: 429,
    retryAfter: '3600',
    codes: [['ok'], ['RATE_LIMITED']],
    runs: ['cheap'],
    charged: ['api:1', 'tight:1'],
  },
];

let users = 0;

/** Sends the case over one transport as a fresh user: what it showed, the runs and the charges. */
async function send(servers: Servers, transport: Transport, c: Case) {
  users += 1;
  const user = `${c.user ?? 'user'}-${users}`;
  if (c.before?.length) await transport(servers, c.before, user);
  const calls = servers.store.calls.length;
  runs.splice(0);
  const seen = await transport(servers, c.operations, user);
  const charged = servers.store.calls
    .slice(calls)
    .flat()
    .filter((r) => r.key === user)
    .map((r) => `${r.bucket.name}:${r.cost}`)
    .sort();
  return { seen, runs: [...runs].sort(), charged };
}

/** Runs `c` over `transports`, checks each against the case, and all of them against each other. */
async function expectParity(servers: Servers, c: Case, transports: string[]): Promise<void> {
  const outcomes: Record<string, Awaited<ReturnType<typeof send>>> = {};
  for (const name of transports) outcomes[name] = await send(servers, TRANSPORTS[name]!, c);
  for (const [name, { seen, runs: ran, charged }] of Object.entries(outcomes)) {
    const where = `${c.name}, over ${name}`;
    expect(seen.answers.map((a) => a.codes), where).toEqual(c.codes);
    expect(ran, where).toEqual(c.runs);
    expect(charged, where).toEqual(c.charged);
    if (c.report !== undefined) expect(seen.answers[0]?.report, where).toEqual(c.report);
    if (seen.status !== undefined) {
      expect(seen.status, where).toBe(c.status);
      if (c.retryAfter !== undefined) expect(seen.retryAfter, where).toBe(c.retryAfter);
    }
  }
  // The same data, reports and headers everywhere (a socket has no headers).
  const [first, ...others] = Object.values(outcomes);
  const http = Object.values(outcomes).filter((o) => o.seen.status !== undefined);
  for (const other of others) expect(other.seen.answers.map(({ codes, data, report }) => ({ codes, data, report }))).toEqual(first!.seen.answers);
  for (const other of http.slice(1)) expect({ retryAfter: other.seen.retryAfter, rateLimit: other.seen.rateLimit }).toEqual({ retryAfter: http[0]!.seen.retryAfter, rateLimit: http[0]!.seen.rateLimit });
}

describe('one operation, every adapter and transport alike', () => {
  let servers: Servers;
  beforeAll(async () => {
    servers = await serveAll(redisStore());
  });

  it.each(CASES.map((c) => [c.name, c] as const))('%s', async (_name, c) => {
    await expectParity(servers, c, c.transports ?? Object.keys(TRANSPORTS));
  });

  it.each(BATCHES.map((c) => [c.name, c] as const))('%s: the status of the limiter\'s refusal, each operation its own answer', async (_name, c) => {
    await expectParity(servers, c, BATCH_TRANSPORTS);
  });

  it('Mercurius refuses a __proto__ key in the JSON it is sent before the limiter sees it (Fastify\'s protection): 400, nothing charged or run', async () => {
    for (const c of CASES.filter((k) => k.transports === JSON_PROTO.transports)) {
      await expectParity(servers, { ...c, codes: [['error']] }, ['Mercurius, HTTP POST', 'Mercurius, HTTP GET']);
    }
  });

  it('identify failing logs the fault; no client sees it', async () => {
    const c = CASES.find((k) => k.user === BROKEN)!;
    const errors = servers.logger.errors.length;
    for (const transport of Object.values(TRANSPORTS)) {
      const { seen } = await send(servers, transport, c);
      expect(JSON.stringify(seen)).not.toContain('10.0.0.7');
    }
    const logged = servers.logger.errors.slice(errors);
    expect(logged).toHaveLength(Object.keys(TRANSPORTS).length);
    for (const line of logged) expect(line).toContain(DATABASE_FAULT);
  });
});

describe('validation turned off: the operation graphql-js executes is the one priced', () => {
  let servers: Servers;
  beforeAll(async () => {
    servers = await serveAll(redisStore(), { validation: false });
  });

  // getOperationAST (Apollo Server's requestContext.operation) names the first
  // `A`; graphql-js executes the last: `expensive` is what runs, and pays.
  const DUPLICATE = { query: 'query A { cheap } query A { expensive }', operationName: 'A' };

  it.each(['Apollo Server, HTTP POST', 'Apollo Server, HTTP GET', 'GraphQL Yoga, HTTP POST', 'GraphQL Yoga, HTTP GET'])(
    'over %s: the last operation of the name runs once and is charged; the next is denied and runs nothing',
    async (name) => {
      const served: Case = { name: 'first', operations: [DUPLICATE], status: 200, codes: [['ok']], runs: ['expensive'], charged: ['tight:1'] };
      const { seen, runs: ran, charged } = await send(servers, TRANSPORTS[name]!, { ...served, before: [] });
      expect({ status: seen.status, codes: seen.answers.map((a) => a.codes), data: seen.answers[0]?.data, ran, charged }).toEqual({
        status: 200,
        codes: [['ok']],
        data: { expensive: 2 },
        ran: ['expensive'],
        charged: ['tight:1'],
      });
      await expectParity(servers, { name: `${name}, again`, before: [DUPLICATE], operations: [DUPLICATE], status: 429, retryAfter: '3600', codes: [['RATE_LIMITED']], runs: [], charged: ['tight:1'] }, [name]);
    },
  );

  it('over graphql-ws the limiter validates what it prices: the document is refused and nothing runs', async () => {
    await expectParity(servers, { name: 'duplicate over graphql-ws', operations: [DUPLICATE], status: 400, codes: [['error']], runs: [], charged: [] }, ['graphql-ws beside Apollo Server']);
  });
});

describe('measure with onStoreError deny, the store failing', () => {
  let servers: Servers;
  beforeAll(async () => {
    servers = await serveAll(await deadRedisStore());
  });

  it('runs an operation only measured buckets price, logging and counting the store error, on every transport', async () => {
    const c: Case = { name: 'measured only', operations: [{ query: '{ watched }' }], status: 200, retryAfter: null, codes: [['ok']], runs: ['watched'], charged: ['watch:1'] };
    const warnings = servers.logger.warnings.length;
    await expectParity(servers, c, c.transports ?? Object.keys(TRANSPORTS));
    const logged = servers.logger.warnings.slice(warnings);
    expect(logged).toHaveLength(Object.keys(TRANSPORTS).length);
    for (const line of logged) expect(line).toMatch(/^graphql-token-bucket: store failed, allowing the operation \(only measured buckets price it\)/);
    expect((await servers.metrics.read()).decisions['watch store_error']).toBe(Object.keys(TRANSPORTS).length);
  });

  it('refuses with 503 an operation an enforced bucket also prices, on every transport', async () => {
    const c: Case = { name: 'enforced too', operations: [{ query: '{ cheap watched }' }], status: 503, retryAfter: null, codes: [['RATE_LIMITER_UNAVAILABLE']], runs: [], charged: ['api:1', 'watch:1'] };
    await expectParity(servers, c, c.transports ?? Object.keys(TRANSPORTS));
  });

  it('and a batch of both: each as on its own', async () => {
    const c: Case = {
      name: 'a batch',
      operations: [{ query: '{ watched }' }, { query: '{ cheap watched }' }],
      status: 503,
      codes: [['ok'], ['RATE_LIMITER_UNAVAILABLE']],
      runs: ['watched'],
      charged: ['api:1', 'watch:1', 'watch:1'],
    };
    await expectParity(servers, c, BATCH_TRANSPORTS);
  });
});

describe('subscriptions, over graphql-ws, Mercurius\' WebSocket and GraphQL Yoga\'s SSE', () => {
  let servers: Servers;
  beforeAll(async () => {
    servers = await serveAll(redisStore());
  });

  it('carry the cost report on their first event, alike', async () => {
    users += 1;
    const user = `sub-${users}`;
    runs.splice(0);
    const sse = await postSse(servers.yoga, { query: 'subscription { ticks }' }, { 'x-user-id': user });
    const ws = await run(socketClient(servers.ws, { user: `${user}-ws` }), { query: 'subscription { ticks }' });
    const fastify = await run(socketClient(servers.mercuriusWs, { user: `${user}-mercurius` }), { query: 'subscription { ticks }' });
    const report = { rateLimit: { live: { cost: 1, remaining: 9, capacity: 10 } } };
    expect(sse.status).toBe(200);
    expect(sse.events).toEqual([
      { event: 'next', data: { data: { ticks: 1 }, extensions: report } },
      { event: 'next', data: { data: { ticks: 0 } } },
      { event: 'complete', data: null },
    ]);
    expect(ws).toEqual({ results: [{ data: { ticks: 1 }, extensions: report }, { data: { ticks: 0 } }], completed: true });
    expect(fastify).toEqual(ws);
    expect(runs).toEqual(['ticks', 'ticks', 'ticks']);
  });

  it('refuse a variable named __proto__ before they start, alike', async () => {
    users += 1;
    runs.splice(0);
    const calls = servers.store.calls.length;
    const subscription = { query: 'subscription($__proto__: Int = 0) { ticks(from: $__proto__) }' };
    const sse = await postSse(servers.yoga, subscription, { 'x-user-id': `proto-${users}` });
    const ws = await run(socketClient(servers.ws, { user: `proto-${users}-ws` }), subscription);
    const fastify = await run(socketClient(servers.mercuriusWs, { user: `proto-${users}-mercurius` }), subscription);
    expect(sse.status).toBe(400);
    expect(sse.events.map((e) => (e.data as ResponseBody | null)?.errors?.map((x) => x.extensions?.['code']))).toEqual([['BAD_USER_INPUT'], undefined]);
    expect(ws.errors?.map((x) => x.extensions?.['code'])).toEqual(['BAD_USER_INPUT']);
    expect(ws.results).toEqual([]);
    expect(fastify.errors?.map((x) => x.extensions?.['code'])).toEqual(['BAD_USER_INPUT']);
    expect(fastify.results).toEqual([]);
    expect(runs).toEqual([]);
    expect(servers.store.calls).toHaveLength(calls);
  });

  it('graphql-ws: an operation graphql-js\'s parser or validation throws for is refused alone; the socket lives on', async () => {
    users += 1;
    const client = socketClient(servers.ws, { user: `throws-${users}` });
    // SingleFieldSubscriptionsRule collects the root fields without variables: @include of a non-null one throws.
    const refused = await run(client, { query: 'subscription($on: Boolean! = true) { ticks @include(if: $on) }' });
    expect(refused.errors?.[0]?.message).toMatch(/Argument "if" of required type "Boolean!" was provided the variable "\$on"/);
    // A document nesting deeper than graphql-js's parser's stack.
    const tooDeep = await run(client, { query: `{ ${'items { '.repeat(5000)}id${' }'.repeat(5000)} }` });
    expect(tooDeep.errors).toEqual([{ message: 'The operation nests too deeply to be parsed.', extensions: { code: 'GRAPHQL_PARSE_FAILED' } }]);
    expect(await run(client, { query: '{ cheap }' })).toMatchObject({ results: [{ data: { cheap: 1 } }], completed: true });
  });

  it('carry it when asked with GraphQL-Cost: report over SSE', async () => {
    users += 1;
    // A server without reportCost: the header alone asks for it.
    const quiet = createYoga({
      schema: makeExecutableSchema({ typeDefs, resolvers }),
      logging: false,
      plugins: [useTokenBucket<YogaInitialContext>({ store: servers.store, buckets, identify: () => `quiet-${users}` })],
    });
    const served = await serveHandler(quiet);
    stops.push(served.stop);
    const plain = await postSse(served.url, { query: 'subscription { ticks }' });
    expect(plain.events[0]).toEqual({ event: 'next', data: { data: { ticks: 1 } } });
    const asked = await postSse(served.url, { query: 'subscription { ticks }' }, { 'graphql-cost': 'report' });
    expect(asked.events[0]).toEqual({ event: 'next', data: { data: { ticks: 1 }, extensions: { rateLimit: { live: { cost: 1, remaining: 8, capacity: 10 } } } } });
  });

  it('graphql-ws: identify failing ends that operation alone; the socket and its running subscription live on', async () => {
    users += 1;
    const client = socketClient(servers.ws, { user: `${BROKEN}-${users}` });
    const subscription = start(client, { query: 'subscription { held }' });
    await waitFor('the subscription to start', 5_000, () => held.listenerCount('event') > 0);
    held.emit('event', 1);
    await waitFor('its first event', 5_000, () => subscription.results.length === 1);

    const failed = await run(client, { query: '{ expensive }' });
    expect(failed).toEqual({ results: [], errors: [{ message: 'Internal server error', extensions: { code: 'INTERNAL_SERVER_ERROR' } }], completed: false });
    expect(await run(client, { query: '{ cheap }' })).toMatchObject({ results: [{ data: { cheap: 1 } }], completed: true });

    held.emit('event', 2);
    await waitFor('its second event', 5_000, () => subscription.results.length === 2);
    expect(subscription.results.map((r) => r.data)).toEqual([{ held: 1 }, { held: 2 }]);
    subscription.cancel();
    expect(servers.logger.errors.some((line) => line.includes(DATABASE_FAULT))).toBe(true);
  });
});
