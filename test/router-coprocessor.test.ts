// SPEC §8: graphql-token-bucket/router, Apollo Router's coprocessor. The
// payloads are those Router 2.7.0 sends (test/support/router.ts names the
// source files and commits they were taken from), the answers applied as the
// Router applies them; the tokens live in a real Redis. No Router binary can
// be fetched here: the protocol is tested as documented.
import { afterAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { composeServices } from '@apollo/composition';
import { GraphQLError, parse } from 'graphql';
import { Rate, RedisStore, TokenBucket } from '../src/index.js';
import { routerCoprocessor } from '../src/router/index.js';
import type { RouterCoprocessorOptions, RouterRequest } from '../src/router/index.js';
import { redisClient, uniquePrefix } from './support/clients.js';
import { EXAMPLE_QUERY, compose, subgraphTypeDefs } from './support/federation.js';
import { captureLogger } from './support/graphql.js';
import type { CapturedLogger } from './support/graphql.js';
import { requestId, serveCoprocessor, supergraphRequestPayload, supergraphResponsePayload, throughRouter, unchangedAnswer } from './support/router.js';
import type { ClientRequest, CoprocessorServer, Execute } from './support/router.js';

const redis = redisClient(inject('redisUrl'));
const SDL = compose(subgraphTypeDefs(), { products: 'http://products:4001', reviews: 'http://reviews:4002', inventory: 'http://inventory:4003' });
const servers: CoprocessorServer[] = [];

afterAll(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop()));
  redis.disconnect();
});

let users = 0;
let user: string;
beforeEach(() => {
  users += 1;
  user = `router-user-${users}`;
});

interface Started {
  coprocessor: CoprocessorServer;
  logger: CapturedLogger;
  store: RedisStore;
}

async function start(options: Partial<RouterCoprocessorOptions> = {}): Promise<Started> {
  const logger = captureLogger();
  const store = new RedisStore(redis, { prefix: uniquePrefix('router') });
  const coprocessor = await serveCoprocessor(
    routerCoprocessor({
      store,
      buckets: [new TokenBucket('api', 1000, Rate.perHour(1))],
      identify: (request: RouterRequest) => request.headers['x-user-id']?.[0] ?? 'anonymous',
      logger,
      ...options,
    }),
  );
  servers.push(coprocessor);
  return { coprocessor, logger, store };
}

function firstOf(n: number): ClientRequest {
  return { query: EXAMPLE_QUERY.replace('first: 3', `first: ${n}`), headers: { 'X-User-Id': user } };
}

/** The subgraphs' answer to EXAMPLE_QUERY with `first: n`: n products of `reviews` reviews each. */
function products(n: number, reviews = 2): Execute {
  return () => ({
    data: {
      products: Array.from({ length: n }, (_, i) => ({
        id: String(i + 1),
        name: `product ${i + 1}`,
        price: 10,
        reviews: Array.from({ length: reviews }, (_, j) => ({ body: `review ${j}`, author: `author ${j}` })),
        shippingEstimate: 1,
      })),
    },
  });
}

const notCalled: Execute = () => {
  throw new Error('the operation ran');
};

describe('routerCoprocessor at SupergraphRequest', () => {
  it('admits an operation with control "continue", leaving the payload to the Router, and takes its cost in Redis', async () => {
    const { coprocessor, store } = await start();
    const payload = supergraphRequestPayload(firstOf(3), SDL);
    const answer = await coprocessor.post(payload);
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual(unchangedAnswer(payload, 'continue'));
    // EXAMPLE_QUERY with first: 3 costs 69 (test/support/federation.ts).
    const check = await store.checkAll([{ bucket: new TokenBucket('api', 1000, Rate.perHour(1)), key: user, cost: 1 }]);
    expect(check.remaining).toEqual([931]);
  });

  it('denies with control { break: 429 }, §3\'s error and retry-after, and the operation does not run', async () => {
    // One token every 10 s: the test's own time refills nothing it reads.
    const { coprocessor } = await start({ buckets: [new TokenBucket('api', 100, new Rate(1, 10_000))] });
    const admitted = await throughRouter({ request: coprocessor }, firstOf(3), SDL, products(3));
    expect(admitted.status).toBe(200);
    const denied = await throughRouter({ request: coprocessor }, firstOf(3), SDL, notCalled);
    expect(denied.status).toBe(429);
    const error = (denied.body['errors'] as { message: string; extensions: Record<string, unknown> }[])[0]!;
    expect(error.extensions).toMatchObject({ code: 'RATE_LIMITED', bucket: 'api', cost: 69 });
    const retryAfter = error.extensions['retryAfter'] as number;
    // 31 tokens left, 38 short at one every 10 s.
    expect(retryAfter).toBeGreaterThan(370);
    expect(retryAfter).toBeLessThanOrEqual(380);
    expect(denied.headers).toEqual({ 'retry-after': [String(Math.ceil(retryAfter))] });
    expect(error.message).toMatch(/^Rate limit of "api" exceeded: this operation costs 69 tokens\. Retry after [\d.]+ s\.$/);
  });

  it('prices a progressive override at its dearest plan, since the Router draws the labels per request', async () => {
    const { coprocessor } = await start({ reportCost: true, rules: { Query: { bucket: 'api' } } });
    // catalog lists products; pricing takes f0 and f1 over from inventory, each by a label of its own.
    const federation = 'extend schema @link(url: "https://specs.apollo.dev/federation/v2.9", import: ["@key", "@override"])';
    const labelled = composeServices(
      Object.entries({
        catalog: 'type Query { products(first: Int = 10): [Product!]! } type Product @key(fields: "id") { id: ID! }',
        inventory: 'type Product @key(fields: "id") { id: ID! f0: Int f1: Int }',
        pricing: 'type Product @key(fields: "id") { id: ID! f0: Int @override(from: "inventory", label: "percent(10)") f1: Int @override(from: "inventory", label: "percent(20)") }',
      }).map(([name, sdl]) => ({ name, typeDefs: parse(`${federation}\n${sdl}`), url: `http://${name}:4000` })),
    ).supergraphSdl!;
    const answered = await throughRouter({ request: coprocessor }, { query: '{ products { f0 f1 } }', headers: { 'X-User-Id': user } }, labelled, () => ({ data: { products: [] } }));
    // With one label drawn and not the other, each product is fetched from inventory and from pricing: 10 × (1 + 2) = 30 (Apollo Gateway, which sets none, runs 20).
    expect(answered.body['extensions']).toEqual({ rateLimit: { api: { cost: 30, remaining: 970, capacity: 1000 } } });
  });

  it('answers an operation above the capacity with retryAfter null and no retry-after', async () => {
    const { coprocessor } = await start({ buckets: [new TokenBucket('api', 50, Rate.perSecond(1))] });
    const denied = await throughRouter({ request: coprocessor }, firstOf(3), SDL, notCalled);
    expect(denied.status).toBe(429);
    expect(denied.headers).toEqual({});
    expect((denied.body['errors'] as { extensions: unknown }[])[0]!.extensions).toEqual({ code: 'RATE_LIMITED', retryAfter: null, bucket: 'api', cost: 69 });
  });

  it('gives identify the request headers (lower-case, every value), the context entries and the method', async () => {
    const seen: RouterRequest[] = [];
    const { coprocessor } = await start({
      identify: (request) => {
        seen.push(request);
        return (request.context['apollo::authentication::jwt_claims'] as { sub: string }).sub;
      },
    });
    const payload = supergraphRequestPayload({ ...firstOf(1), headers: { 'X-Tenant': 'a' } }, SDL, { entries: { 'apollo::authentication::jwt_claims': { sub: user } } });
    (payload['headers'] as Record<string, string[]>)['x-tenant']!.push('b');
    await coprocessor.post(payload);
    expect(seen).toHaveLength(1);
    expect({ ...seen[0]!.headers }).toMatchObject({ 'x-tenant': ['a', 'b'], 'content-type': ['application/json'] });
    expect(seen[0]!.context['apollo::authentication::jwt_claims']).toEqual({ sub: user });
    expect(seen[0]!.method).toBe('POST');
  });

  it('refuses, taking nothing, an operation that does not parse here or whose variables do not coerce: never runs it unpriced', async () => {
    const { coprocessor, store } = await start();
    const deep = `{ products(first: 1) { ${'reviews { '.repeat(20_000)}body${' }'.repeat(20_000)} } }`;
    const bad: [ClientRequest, number, string][] = [
      [{ query: '{ products(first: 3) { id ' }, 400, 'GRAPHQL_PARSE_FAILED'],
      // Deeper than graphql-js parses on this stack; a Router whose parser_max_recursion allows it would run it.
      [{ query: deep }, 400, 'GRAPHQL_PARSE_FAILED'],
      [{ query: 'query($n: Int) { products(first: $n) { id } }', variables: { n: 'three' } }, 400, 'BAD_USER_INPUT'],
      [{ query: 'query($n: Int!) { products(first: $n) { id } }' }, 400, 'BAD_USER_INPUT'],
    ];
    for (const [request, status, code] of bad) {
      const answer = await throughRouter({ request: coprocessor }, { ...request, headers: { 'x-user-id': user } }, SDL, notCalled);
      expect(answer.status, request.query.slice(0, 40)).toBe(status);
      expect((answer.body['errors'] as { extensions: { code: string } }[])[0]!.extensions.code).toBe(code);
    }
    const check = await store.checkAll([{ bucket: new TokenBucket('api', 1000, Rate.perHour(1)), key: user, cost: 1 }]);
    expect(check.remaining).toEqual([1000]);
  });

  it('refuses variables graphql-js does not coerce though the Router does: null for a non-null input field with a default', async () => {
    const { coprocessor, store } = await start({ rules: { Query: { bucket: 'api' } } });
    const federation = 'extend schema @link(url: "https://specs.apollo.dev/federation/v2.9", import: ["@key"])';
    const { supergraphSdl: sdl, errors } = composeServices([
      {
        name: 'catalog',
        typeDefs: parse(`${federation}
          input Page { first: Int! = 500 }
          type Query { products(page: Page): [Product!]! }
          type Product @key(fields: "id") { id: ID! }`),
        url: 'http://catalog:4000',
      },
    ]);
    expect(errors).toBeUndefined();
    // The Router's validate_input_value takes the field's default for an explicit null; graphql-js refuses it.
    const request = { query: 'query($p: Page) { products(page: $p) { id } }', variables: { p: { first: null } }, headers: { 'x-user-id': user } };
    const answer = await throughRouter({ request: coprocessor }, request, sdl!, notCalled);
    expect(answer.status).toBe(400);
    expect(answer.body['errors']).toEqual([
      expect.objectContaining({ message: 'Variable "$p" got invalid value null at "p.first"; Expected non-nullable type "Int!" not to be null.', extensions: { code: 'BAD_USER_INPUT' } }),
    ]);
    const check = await store.checkAll([{ bucket: new TokenBucket('api', 1000, Rate.perHour(1)), key: user, cost: 1 }]);
    expect(check.remaining).toEqual([1000]);
  });

  it('refuses an operation name the document does not hold, taking nothing', async () => {
    const { coprocessor } = await start();
    const answer = await throughRouter({ request: coprocessor }, { ...firstOf(1), operationName: 'Missing' }, SDL, notCalled);
    expect(answer.status).toBe(400);
    expect(answer.body).toEqual({ errors: [{ message: 'Unknown operation named "Missing".', extensions: { code: 'BAD_REQUEST' } }] });
  });

  it('answers 503 RATE_LIMITER_UNAVAILABLE when the store fails under onStoreError "deny", and lets it run under "allow"', async () => {
    const failing = { acquireAll: () => Promise.reject(new Error('connection lost')), acquire: () => Promise.reject(new Error('connection lost')), reset: () => Promise.resolve(false) };
    const deny = await start({ store: failing, onStoreError: 'deny' });
    const denied = await throughRouter({ request: deny.coprocessor }, firstOf(1), SDL, notCalled);
    expect(denied.status).toBe(503);
    expect((denied.body['errors'] as { extensions: unknown }[])[0]!.extensions).toEqual({ code: 'RATE_LIMITER_UNAVAILABLE' });
    const allow = await start({ store: failing });
    const admitted = await throughRouter({ request: allow.coprocessor }, firstOf(1), SDL, products(1));
    expect(admitted.status).toBe(200);
    expect(allow.logger.warnings.join('\n')).toContain('store failed, allowing the operation: connection lost');
  });

  it('answers identify\'s GraphQLError with its own status, and any other failure of identify with a generic 500', async () => {
    const { coprocessor } = await start({
      identify: (request) => {
        if (request.headers['authorization'] === undefined) throw new GraphQLError('Sign in first', { extensions: { code: 'UNAUTHENTICATED', http: { status: 401 } } });
        throw new Error('user database unreachable');
      },
    });
    const unauthenticated = await throughRouter({ request: coprocessor }, firstOf(1), SDL, notCalled);
    expect(unauthenticated.status).toBe(401);
    expect(unauthenticated.body).toEqual({ errors: [{ message: 'Sign in first', extensions: { code: 'UNAUTHENTICATED' } }] });
    const failed = await throughRouter({ request: coprocessor }, { ...firstOf(1), headers: { authorization: 'Bearer x' } }, SDL, notCalled);
    expect(failed.status).toBe(500);
    expect(failed.body).toEqual({ errors: [{ message: 'Internal server error', extensions: { code: 'INTERNAL_SERVER_ERROR' } }] });
  });

  it('logs a supergraph that fails the checks once and answers each operation against it 503', async () => {
    const { coprocessor, logger } = await start({ buckets: [new TokenBucket('other', 10, Rate.perSecond(1))] });
    for (let i = 0; i < 3; i++) {
      const answer = await throughRouter({ request: coprocessor }, firstOf(1), SDL, notCalled);
      expect(answer.status).toBe(503);
      expect((answer.body['errors'] as { extensions: unknown }[])[0]!.extensions).toEqual({ code: 'RATE_LIMITER_UNAVAILABLE' });
    }
    expect(logger.errors.filter((e) => e.includes('supergraph'))).toHaveLength(1);
    expect(logger.errors[0]).toContain('names bucket "api", which is not in the plugin\'s buckets');
  });
});

describe('routerCoprocessor at SupergraphResponse', () => {
  it('adds extensions.rateLimit with reportCost, and marks its context entry spent', async () => {
    const { coprocessor } = await start({ reportCost: true });
    const answer = await throughRouter({ request: coprocessor }, firstOf(3), SDL, products(3));
    expect(answer.status).toBe(200);
    expect(answer.body['extensions']).toEqual({ rateLimit: { api: { cost: 69, remaining: 931, capacity: 1000 } } });
    expect(answer.entries['graphql-token-bucket::charge']).toBe('spent');
  });

  it('gives back what the response shows unused with refundUnusedCost, on the next charge too', async () => {
    const { coprocessor, store } = await start({ refundUnusedCost: true, reportCost: true });
    // 3 products of no reviews: 3 × (1 + 3 + 0 + 5 + 2 + 2) = 39 of the 69 estimated.
    const answer = await throughRouter({ request: coprocessor }, firstOf(3), SDL, products(3, 0));
    expect(answer.body['extensions']).toEqual({ rateLimit: { api: { cost: 69, actualCost: 39, remaining: 961, capacity: 1000 } } });
    const check = await store.checkAll([{ bucket: new TokenBucket('api', 1000, Rate.perHour(1)), key: user, cost: 1 }]);
    expect(check.remaining).toEqual([961]);
  });

  it('writes the RateLimit header fields on admitted and denied responses with rateLimitHeaders', async () => {
    const { coprocessor } = await start({ rateLimitHeaders: true, buckets: [new TokenBucket('api', 100, new Rate(1, 10_000))] });
    const admitted = await throughRouter({ request: coprocessor }, firstOf(3), SDL, products(3));
    expect(admitted.headers).toEqual({ 'content-type': ['application/json'], 'ratelimit-policy': ['"api";q=100;w=1000'], ratelimit: ['"api";r=31;t=690'] });
    const denied = await throughRouter({ request: coprocessor }, firstOf(3), SDL, notCalled);
    expect(denied.status).toBe(429);
    expect(denied.headers).toEqual({ 'ratelimit-policy': ['"api";q=100;w=1000'], ratelimit: ['"api";r=31;t=690'], 'retry-after': [expect.stringMatching(/^3[78]\d$/)] });
  });

  it('passes a response it holds no charge for unchanged, with no control (which would set its status)', async () => {
    const { coprocessor } = await start({ reportCost: true });
    const payload = supergraphResponsePayload(requestId(), { errors: [{ message: 'invalid variables' }] }, { 'accepts-json': true }, { statusCode: 400 });
    const answer = await coprocessor.post(payload);
    expect(answer.body).toEqual(unchangedAnswer(payload));
    expect(answer.body['control']).toBeUndefined();
  });

  it('reports @defer\'s first part and keeps its estimate; later parts pass unchanged', async () => {
    const { coprocessor, store } = await start({ reportCost: true, refundUnusedCost: true });
    const id = requestId();
    const request = await coprocessor.post(supergraphRequestPayload(firstOf(3), SDL, { id }));
    const entries = (request.body['context'] as { entries: Record<string, unknown> }).entries;
    const first = await coprocessor.post(supergraphResponsePayload(id, { data: { products: [] }, hasNext: true }, entries, { hasNext: true }));
    expect((first.body['body'] as Record<string, unknown>)['extensions']).toEqual({ rateLimit: { api: { cost: 69, remaining: 931, capacity: 1000 } } });
    const spent = (first.body['context'] as { entries: Record<string, unknown> }).entries;
    const later = supergraphResponsePayload(id, { hasNext: false, incremental: [{ data: { name: 'x' }, path: ['products', 0] }] }, spent, { hasNext: false });
    delete later['headers'];
    delete later['statusCode'];
    expect((await coprocessor.post(later)).body).toEqual(unchangedAnswer(later));
    const check = await store.checkAll([{ bucket: new TokenBucket('api', 1000, Rate.perHour(1)), key: user, cost: 1 }]);
    expect(check.remaining).toEqual([931]);
  });
});

describe('the GraphQL-Cost request header', () => {
  it('report: adds extensions.rateLimit to this response', async () => {
    const { coprocessor } = await start();
    const answer = await throughRouter({ request: coprocessor }, { ...firstOf(1), headers: { 'x-user-id': user, 'GraphQL-Cost': 'report' } }, SDL, products(1));
    expect(answer.body['extensions']).toEqual({ rateLimit: { api: { cost: 23, remaining: 977, capacity: 1000 } } });
  });

  it('validate: answers 200 with the price and what the bucket holds, runs nothing and takes nothing', async () => {
    const { coprocessor, store } = await start();
    const answer = await throughRouter({ request: coprocessor }, { ...firstOf(1), headers: { 'x-user-id': user, 'graphql-cost': 'Validate' } }, SDL, notCalled);
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ data: null, extensions: { rateLimit: { api: { cost: 23, remaining: 1000, capacity: 1000 } } } });
    const check = await store.checkAll([{ bucket: new TokenBucket('api', 1000, Rate.perHour(1)), key: user, cost: 1 }]);
    expect(check.remaining).toEqual([1000]);
  });

  it('any other value is a 400 that runs nothing', async () => {
    const { coprocessor } = await start();
    const answer = await throughRouter({ request: coprocessor }, { ...firstOf(1), headers: { 'x-user-id': user, 'graphql-cost': 'everything' } }, SDL, notCalled);
    expect(answer.status).toBe(400);
    expect((answer.body['errors'] as { message: string }[])[0]!.message).toBe('The GraphQL-Cost request header must be "report" or "validate", got "everything".');
  });
});

describe('other stages', () => {
  it.each(['RouterRequest', 'RouterResponse', 'ExecutionRequest', 'ExecutionResponse', 'SubgraphRequest', 'SubgraphResponse'])('answers %s with its control fields alone, changing nothing', async (stage) => {
    const { coprocessor } = await start({ reportCost: true, refundUnusedCost: true });
    const payload: Record<string, unknown> = {
      version: 1,
      stage,
      ...(stage.endsWith('Request') ? { control: 'continue' } : {}),
      id: requestId(),
      headers: { 'x-user-id': [user] },
      body: stage.startsWith('Router') ? JSON.stringify({ query: EXAMPLE_QUERY }) : { query: EXAMPLE_QUERY },
      context: { entries: { 'accepts-json': true } },
      ...(stage.startsWith('Subgraph') ? { serviceName: 'products', uri: 'http://products:4001' } : {}),
    };
    expect((await coprocessor.post(payload)).body).toEqual(unchangedAnswer(payload));
  });
});
