// SPEC §6 "Since 0.4", Mercurius: a real Fastify and Mercurius, through
// `inject`, answer as Apollo Server's plugin does — 429 with Retry-After and
// RATE_LIMITED (retryAfter, bucket, cost), no resolver run on denial, each
// operation of a batch on its own, reports, refunds, RateLimit fields and
// dry runs — and what Mercurius executes is what was priced, whatever the
// hooks after the limiter and graphql-jit do.
import Fastify from 'fastify';
import mercurius from 'mercurius';
import { afterEach, describe, expect, it } from 'vitest';
import { mercuriusTokenBucket } from '../src/mercurius/index.js';
import { MemoryStore, Rate, TokenBucket, tokenBucketDirectiveTypeDefs } from '../src/index.js';
import { captureLogger } from './support/graphql.js';
import type { ResponseBody } from './support/graphql.js';
import { serveMercurius } from './support/mercurius.js';
import type { MercuriusServer, ServeMercuriusOptions } from './support/mercurius.js';
import { DATABASE_FAULT, STOCK, api, freshUser, left, limits, resolvers, runs, schema, stillStore } from './support/mercurius-schema.js';
import type { RecordingStore } from './support/graphql.js';

const servers: MercuriusServer[] = [];
afterEach(async () => {
  runs.splice(0);
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

async function serve(store: RecordingStore, options: Partial<ServeMercuriusOptions> = {}): Promise<MercuriusServer> {
  const server = await serveMercurius({ schema, resolvers, limits: limits(store), ...options });
  servers.push(server);
  return server;
}

const as = (user: string) => ({ 'x-user-id': user });

describe('mercuriusTokenBucket over HTTP', () => {
  it('answers a denied operation 429 with Retry-After in whole seconds and RATE_LIMITED, and runs no resolver', async () => {
    const store = stillStore();
    const server = await serve(store);
    const user = freshUser();
    expect((await server.post({ query: '{ expensive }' }, as(user))).status).toBe(200);
    runs.splice(0);
    const denied = await server.post({ query: '{ expensive }' }, as(user));
    expect(denied.status).toBe(429);
    expect(denied.headers['retry-after']).toBe('3600');
    expect(denied.body).toEqual({
      data: null,
      errors: [{ message: expect.stringMatching(/^Rate limit of "tight" exceeded/), extensions: { code: 'RATE_LIMITED', retryAfter: 3600, bucket: 'tight', cost: 1 } }],
    });
    expect(runs).toEqual([]);
  });

  it('answers an operation that can never fit 429 with retryAfter null and no Retry-After, taking nothing', async () => {
    const store = stillStore();
    const server = await serve(store);
    const user = freshUser();
    const never = await server.post({ query: '{ items(first: 5000) { id } }' }, as(user));
    expect(never.status).toBe(429);
    expect(never.headers['retry-after']).toBeUndefined();
    expect(never.body.errors?.[0]?.extensions).toEqual({ code: 'RATE_LIMITED', retryAfter: null, bucket: 'api', cost: 5000 });
    expect(await left(store, api, user)).toBe(1000);
    expect(runs).toEqual([]);
  });

  it('charges what ran and gives back what the response did not use, with the report and the RateLimit fields', async () => {
    const store = stillStore();
    const server = await serve(store);
    const user = freshUser();
    const answer = await server.post({ query: 'query($n: Int) { items(first: $n) { id } }', variables: { n: 40 } }, as(user));
    expect(answer.status).toBe(200);
    expect(answer.body.extensions).toEqual({ rateLimit: { api: { cost: 40, actualCost: STOCK, remaining: 1000 - STOCK, capacity: 1000 } } });
    expect(answer.headers['ratelimit-policy']).toBe('"api";q=1000;w=3600000');
    expect(answer.headers['ratelimit']).toMatch(new RegExp(`^"api";r=${1000 - STOCK};t=\\d+$`));
    expect(await left(store, api, user)).toBe(1000 - STOCK);
    expect(store.calls.map((call) => call.map((r) => `${r.bucket.name}:${r.cost}`))).toEqual([['api:40']]);
  });

  it('prices a GET query as a POST; a mutation over GET is refused by Mercurius before anything is charged', async () => {
    const store = stillStore();
    const server = await serve(store);
    const user = freshUser();
    const answer = await server.get({ query: 'query($n: Int) { items(first: $n) { id } }', variables: { n: 3 } }, as(user));
    expect(answer.status).toBe(200);
    expect(answer.body.extensions?.['rateLimit']).toEqual({ api: { cost: 3, actualCost: 3, remaining: 997, capacity: 1000 } });
    const mutation = await server.get({ query: 'mutation { buy }' }, as(user));
    expect(mutation.status).toBe(405);
    expect(runs).toEqual(['items:3']);
    expect(store.calls).toHaveLength(1);
  });

  it('charges each operation of a batch on its own; one denied answers the batch 429 with the longest wait, whatever the others', async () => {
    const store = stillStore();
    const server = await serve(store);
    const user = freshUser();
    await server.post({ query: '{ expensive }' }, as(user));
    runs.splice(0);
    // The last operation to finish has an execution error, on which Mercurius sets its own status.
    for (const batch of [
      [{ query: '{ cheap }' }, { query: '{ expensive }' }, { query: '{ boom }' }],
      [{ query: '{ boom }' }, { query: '{ expensive }' }],
    ]) {
      const answer = await server.post<ResponseBody[]>(batch, as(user));
      expect(answer.status).toBe(429);
      expect(answer.headers['retry-after']).toBe('3600');
      expect(answer.body.map((b) => (b.errors ?? []).map((e) => e.extensions?.['code'] ?? e.message))).toEqual(batch.map(({ query }) => (query === '{ expensive }' ? ['RATE_LIMITED'] : query === '{ boom }' ? ['boom'] : [])));
    }
    expect(runs.sort()).toEqual(['boom', 'boom', 'cheap']);
  });

  it('GraphQL-Cost: validate prices and checks without running or taking anything; report adds the report; anything else is a 400', async () => {
    const store = stillStore();
    const server = await serve(store, { limits: limits(store, { reportCost: false, refundUnusedCost: false }) });
    const user = freshUser();
    const validated = await server.post({ query: 'query($n: Int) { items(first: $n) { id } expensive }', variables: { n: 40 } }, { ...as(user), 'graphql-cost': 'Validate' });
    expect(validated.status).toBe(200);
    expect(validated.body).toEqual({ extensions: { rateLimit: { api: { cost: 40, remaining: 1000, capacity: 1000 }, tight: { cost: 1, remaining: 1, capacity: 1 } } } });
    expect(validated.headers['ratelimit']).toBe('"api";r=1000;t=0, "tight";r=1;t=0');
    expect(runs).toEqual([]);
    expect(store.calls).toEqual([]);

    const reported = await server.post({ query: '{ cheap }' }, { ...as(user), 'graphql-cost': 'report' });
    expect(reported.body).toEqual({ data: { cheap: 1 }, extensions: { rateLimit: { api: { cost: 1, remaining: 999, capacity: 1000 } } } });
    expect((await server.post({ query: '{ cheap }' }, as(user))).body).toEqual({ data: { cheap: 1 } });

    const bad = await server.post({ query: '{ cheap }' }, { ...as(user), 'graphql-cost': 'estimate' });
    expect(bad.status).toBe(400);
    expect(bad.body.errors?.[0]).toMatchObject({ message: 'The GraphQL-Cost request header must be "report" or "validate", got "estimate".', extensions: { code: 'BAD_REQUEST' } });
    expect(runs).toEqual(['cheap', 'cheap']);
  });

  it('runs the operation of the document that was priced: the named one, and nothing when the name is unknown', async () => {
    const store = stillStore();
    const server = await serve(store);
    const user = freshUser();
    const document = 'query A { cheap } query B { items(first: 100) { id } }';
    expect((await server.post({ query: document, operationName: 'A' }, as(user))).body).toMatchObject({ data: { cheap: 1 } });
    const unknown = await server.post({ query: document, operationName: 'C' }, as(user));
    expect(unknown.status).toBe(400);
    expect(unknown.body.errors?.[0]?.message).toBe('Unknown operation named "C".');
    const unnamed = await server.post({ query: document }, as(user));
    expect(unnamed.status).toBe(400);
    expect(runs).toEqual(['cheap']);
    expect(await left(store, api, user)).toBe(999);
  });
});

describe('what Mercurius executes is what was priced', () => {
  it('a preExecution hook added after the limiter that raises a size in place is priced as raised', async () => {
    const store = stillStore();
    const server = await serve(store, {
      after: (app) =>
        app.graphql.addHook('preExecution', async (_schema, _document, _context, variables) => {
          // A "page size normaliser".
          if (variables && typeof variables['n'] === 'number') variables['n'] = 200;
        }),
    });
    const user = freshUser();
    const answer = await server.post({ query: 'query($n: Int) { items(first: $n) { id } }', variables: { n: 2 } }, as(user));
    expect(answer.body.extensions?.['rateLimit']).toMatchObject({ api: { cost: 200 } });
    expect(runs).toEqual(['items:200']);
  });

  it('and so is one that replaces the variables or the document, added before or after the server is ready', async () => {
    const store = stillStore();
    const server = await serve(store, {
      after: (app) =>
        app.graphql.addHook('preExecution', async (_schema, document) => ({
          document: { ...document, definitions: [...document.definitions] },
        })),
    });
    server.app.graphql.addHook('preExecution', async () => ({ variables: { n: 300 } }));
    const user = freshUser();
    const answer = await server.post({ query: 'query($n: Int) { items(first: $n) { id } }', variables: { n: 2 } }, as(user));
    expect(answer.body.extensions?.['rateLimit']).toMatchObject({ api: { cost: 300 } });
    expect(runs).toEqual(['items:300']);
  });

  it('a hook whose unawaited work changes the variables after the limiter priced them changes nothing that runs', async () => {
    const store = stillStore();
    // A normaliser that finishes in the background: here, exactly while the store answers.
    let late: (() => void) | undefined;
    const acquireAll = store.inner.acquireAll.bind(store.inner);
    store.inner.acquireAll = (...args) => (late?.(), acquireAll(...args));
    const server = await serve(store, {
      after: (app) =>
        app.graphql.addHook('preExecution', async (_schema, _document, _context, variables) => {
          late = () => variables && (variables['n'] = 900);
        }),
    });
    const answer = await server.post({ query: 'query($n: Int) { items(first: $n) { id } }', variables: { n: 2 } }, as(freshUser()));
    expect(answer.body.extensions?.['rateLimit']).toMatchObject({ api: { cost: 2 } });
    expect(runs).toEqual(['items:2']);
  });

  it('with graphql-jit on, the resolver gets the variables as graphql-js read them for the price', async () => {
    // graphql-jit reads an input field set from a variable that was not sent
    // as null (here: "everything"), where graphql-js takes the field's
    // default (500), which the operation was priced at.
    const store = stillStore();
    const server = await serve(store, { mercurius: { jit: 1 } });
    const operation = { query: 'query($n: Int) { filtered(filter: { first: $n }) { id } }' };
    // Mercurius compiles it on the second request, and runs the compiled query from then on.
    for (let i = 0; i < 3; i++) {
      const answer = await server.post(operation, as(freshUser()));
      // 500 items, and the filter.
      expect(answer.body.extensions?.['rateLimit']).toMatchObject({ api: { cost: 501 } });
    }
    expect(runs).toEqual(['filtered:500', 'filtered:500', 'filtered:500']);
  });
});

describe('errors', () => {
  it('identify failing ends that operation alone with a generic 500; its fault is logged, never sent', async () => {
    const store = stillStore();
    const logger = captureLogger();
    const server = await serve(store, { limits: limits(store, { logger }) });
    const user = freshUser('broken');
    const failed = await server.post({ query: '{ expensive }' }, as(user));
    expect(failed.status).toBe(500);
    expect(failed.body).toEqual({ data: null, errors: [{ message: 'Internal server error', extensions: { code: 'INTERNAL_SERVER_ERROR' } }] });
    const batch = await server.post<ResponseBody[]>([{ query: '{ cheap }' }, { query: '{ expensive }' }], as(user));
    expect(batch.status).toBe(500);
    expect(batch.body.map((b) => b.errors?.[0]?.extensions?.['code'] ?? b.data)).toEqual([{ cheap: 1 }, 'INTERNAL_SERVER_ERROR']);
    expect(JSON.stringify([failed.body, batch.body])).not.toContain('10.0.0.7');
    expect(logger.errors).toHaveLength(2);
    for (const line of logger.errors) expect(line).toContain(DATABASE_FAULT);
  });

  it('identify returning what is not an identity is treated as identify failing', async () => {
    const store = stillStore();
    const logger = captureLogger();
    const server = await serve(store, { limits: limits(store, { logger }) });
    const answer = await server.post({ query: '{ cheap }' }, as(freshUser('nobody')));
    expect(answer.status).toBe(500);
    expect(answer.body.errors).toEqual([{ message: 'Internal server error', extensions: { code: 'INTERNAL_SERVER_ERROR' } }]);
    expect(logger.errors.join('\n')).toMatch(/undefined/);
    expect(runs).toEqual([]);
  });

  it("the application's own errors from identify reach the client with their status: a GraphQLError, mercurius.ErrorWithProps", async () => {
    const store = stillStore();
    const server = await serve(store);
    const unauthenticated = await server.post({ query: '{ cheap }' }, as(freshUser('unauthenticated')));
    expect(unauthenticated.status).toBe(401);
    expect(unauthenticated.body.errors).toEqual([{ message: 'Sign in first.', extensions: { code: 'UNAUTHENTICATED' } }]);
    const forbidden = await server.post({ query: '{ cheap }' }, as(freshUser('forbidden')));
    expect(forbidden.status).toBe(403);
    expect(forbidden.body.errors).toEqual([{ message: 'Not for you.', extensions: { code: 'FORBIDDEN' } }]);
    expect(runs).toEqual([]);
  });

  it.each([
    ['allow', 200, [undefined]],
    ['deny', 503, ['RATE_LIMITER_UNAVAILABLE']],
  ] as const)('a failing store under onStoreError %s answers %i', async (onStoreError, status, codes) => {
    const failing = stillStore();
    failing.inner.acquireAll = () => Promise.reject(new Error('ECONNREFUSED 10.0.0.8:6379'));
    const logger = captureLogger();
    const server = await serve(failing, { limits: limits(failing, { onStoreError, logger }) });
    // What start-up said (the events' lists not charged) aside.
    const startUp = logger.warnings.length;
    const answer = await server.post({ query: '{ cheap }' }, as(freshUser()));
    expect(answer.status).toBe(status);
    expect(answer.body.errors?.map((e) => e.extensions?.['code']) ?? [undefined]).toEqual(codes);
    expect(JSON.stringify(answer.body)).not.toContain('10.0.0.8');
    expect(logger.warnings.slice(startUp)).toEqual([expect.stringMatching(/^graphql-token-bucket: store failed, (allowing|denying) the operation: ECONNREFUSED/)]);
    // An operation only measured buckets price runs, whatever onStoreError says.
    expect((await server.post({ query: '{ watched }' }, as(freshUser()))).status).toBe(200);
  });
});

describe('refused before execution, charged nothing', () => {
  // A missing non-null variable reaches the hooks (Mercurius checks variables only when some are sent); a wrong type does not.
  const needs = 'query($n: Int!) { items(first: $n) { id } }';

  it.each([
    ['a missing non-null variable', { query: needs }],
    ['a null non-null variable', { query: needs, variables: { n: null } }],
    ['a variable of the wrong type', { query: needs, variables: { n: 'ten' } }],
    // Over GET Mercurius itself answers an unknown name 200 with a TypeError's message, before any hook.
    ['an unknown operation name', { query: 'query A { cheap }', operationName: 'B' }, 200],
    ['a validation error', { query: '{ items { nope } }' }],
  ])('%s: 400 over POST and GET and in a batch, no store call, no resolver', async (_what, operation, getStatus = 400) => {
    const store = stillStore();
    const server = await serve(store);
    const user = freshUser();
    const post = await server.post(operation, as(user));
    const get = await server.get(operation, as(user));
    const batch = await server.post<ResponseBody[]>([operation, { query: '{ cheap }' }], as(user));
    expect([post.status, get.status]).toEqual([400, getStatus]);
    expect(post.body.errors).toHaveLength(1);
    expect(batch.body.map((b) => (b.errors ? 'refused' : b.data))).toEqual(['refused', { cheap: 1 }]);
    expect(store.calls.map((call) => call.map((r) => `${r.bucket.name}:${r.cost}`))).toEqual([['api:1']]);
    expect(runs).toEqual(['cheap']);
  });
});

describe('start-up', () => {
  const sdl = `${tokenBucketDirectiveTypeDefs} type Query { a: Int @tokenBucket(name: "nope", cost: 1) }`;
  const options = { store: new MemoryStore(), buckets: [new TokenBucket('a', 1, Rate.perHour(1))], identify: () => 'me' };

  it('fails the registration when a @tokenBucket names an unknown bucket', async () => {
    const app = Fastify();
    await app.register(mercurius, { schema: sdl });
    await expect(app.register(mercuriusTokenBucket, options)).rejects.toThrow('@tokenBucket on Query.a names bucket "nope", which is not in the plugin\'s buckets ("a")');
    await app.close();
  });

  it('fails the start when the schema Mercurius serves, extended after the limiter was registered, names an unknown bucket', async () => {
    const app = Fastify();
    await app.register(mercurius, { schema: `${tokenBucketDirectiveTypeDefs} type Query { a: Int @tokenBucket(name: "a", cost: 1) }` });
    await app.register(mercuriusTokenBucket, options);
    app.graphql.extendSchema('extend type Query { b: Int @tokenBucket(name: "nope", cost: 1) }');
    await expect(app.ready().then(() => 'ready')).rejects.toThrow('@tokenBucket on Query.b names bucket "nope", which is not in the plugin\'s buckets ("a")');
    await app.close();
  });

  it('fails the registration on an option it does not know, naming it and the valid ones', async () => {
    const app = Fastify();
    await app.register(mercurius, { schema: `${tokenBucketDirectiveTypeDefs} type Query { a: Int @tokenBucket(name: "a", cost: 1) }` });
    await expect(app.register(mercuriusTokenBucket, { ...options, refundUnusedCosts: true } as never)).rejects.toThrow(
      /^mercuriusTokenBucket has no option "refundUnusedCosts" \(did you mean "refundUnusedCost"\?\); its options are store, .*, chargeEachEvent, logger$/,
    );
    await app.close();
  });

  it('fails the registration when mercurius is not registered before it', async () => {
    const app = Fastify();
    await expect(app.register(mercuriusTokenBucket, options)).rejects.toThrow(/mercurius/);
    await app.close();
  });
});
