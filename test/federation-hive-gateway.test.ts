// SPEC §7, Hive Gateway: useTokenBucket in a real createGatewayRuntime prices
// the client's operation against the unified schema before the plan runs
// (a denial calls no subgraph), refunds price the gateway's response, and a
// schema that arrives after start-up and fails the checks is logged once and
// answered RATE_LIMITER_UNAVAILABLE (503) for every priced operation.
import { createGatewayRuntime } from '@graphql-hive/gateway-runtime';
import type { YogaInitialContext } from 'graphql-yoga';
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { useTokenBucket } from '../src/envelop/index.js';
import type { UseTokenBucketOptions } from '../src/envelop/index.js';
import { Rate, RedisStore, TokenBucket } from '../src/index.js';
import { redisClient, uniquePrefix } from './support/clients.js';
import { EXAMPLE_QUERY, startSubgraphs } from './support/federation.js';
import type { Subgraphs } from './support/federation.js';
import { captureLogger } from './support/graphql.js';
import type { CapturedLogger, ResponseBody } from './support/graphql.js';

const redis = redisClient(inject('redisUrl'));
let subgraphs: Subgraphs;
let renamed: Subgraphs;
const disposals: (() => Promise<void>)[] = [];

beforeAll(async () => {
  [subgraphs, renamed] = await Promise.all([startSubgraphs(), startSubgraphs({ renamed: true })]);
});
afterAll(async () => {
  await Promise.all(disposals.splice(0).map((dispose) => dispose()));
  await Promise.all([subgraphs.stop(), renamed.stop()]);
  redis.disconnect();
});
beforeEach(() => subgraphs.work.reset());

let users = 0;
function user(): Record<string, string> {
  users += 1;
  return { 'x-user-id': `hive-user-${users}` };
}

interface Answer {
  status: number;
  headers: Headers;
  body: ResponseBody;
}

type Context = YogaInitialContext;

function hive(supergraph: string, options: Partial<UseTokenBucketOptions<Context>> = {}): { post(query: string, headers: Record<string, string>): Promise<Answer>; get(query: string, headers: Record<string, string>): Promise<Answer>; logger: CapturedLogger } {
  const logger = captureLogger();
  const gateway = createGatewayRuntime({
    supergraph,
    logging: false,
    plugins: () => [
      useTokenBucket<Context>({
        store: new RedisStore(redis, { prefix: uniquePrefix('hive-gateway') }),
        buckets: [new TokenBucket('api', 1000, Rate.perHour(1))],
        identify: ({ request }) => request.headers.get('x-user-id') ?? 'anonymous',
        reportCost: true,
        logger,
        ...options,
      }),
    ],
  });
  disposals.push(async () => {
    await gateway.dispose();
  });
  return {
    logger,
    async post(query, headers) {
      const response = await gateway.fetch('http://gateway.test/graphql', {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json', ...headers },
        body: JSON.stringify({ query }),
      });
      return { status: response.status, headers: response.headers, body: (await response.json()) as ResponseBody };
    },
    async get(query, headers) {
      const response = await gateway.fetch(`http://gateway.test/graphql?query=${encodeURIComponent(query)}`, {
        headers: { accept: 'application/graphql-response+json', ...headers },
      });
      return { status: response.status, headers: response.headers, body: (await response.json()) as ResponseBody };
    },
  };
}

function firstOf(n: number): string {
  return EXAMPLE_QUERY.replace('first: 3', `first: ${n}`);
}

describe('Hive Gateway: priced before the plan runs', () => {
  it('prices the operation with its @requires selection, scaling with first:, calling no subgraph', async () => {
    const gateway = hive(subgraphs.compose());
    // first: 1 → 1 × (Product 1 + price 3 + reviews 10 × 1 + shippingEstimate 5 + required weight 2
    //                  + entity fetches from reviews and inventory 2) = 23
    // first: 3 → 69; first: 30 → 690
    for (const [n, cost] of [
      [1, 23],
      [3, 69],
      [30, 690],
    ] as const) {
      const answer = await gateway.post(firstOf(n), { ...user(), 'graphql-cost': 'validate' });
      expect(answer.status).toBe(200);
      expect(answer.body.extensions?.['rateLimit']).toEqual({ api: { cost, remaining: 1000, capacity: 1000 } });
    }
    expect(subgraphs.work.total).toBe(0);
  });

  it('reads @cost, @listSize and @tokenBucket imported under other names', async () => {
    // The unified schema keeps @weight, @size and @limit but not the @link naming them: each is known by its shape.
    const answer = await hive(renamed.compose()).post(EXAMPLE_QUERY, { ...user(), 'graphql-cost': 'validate' });
    expect(answer.body.extensions?.['rateLimit']).toEqual({ api: { cost: 69, remaining: 1000, capacity: 1000 } });
  });

  it('runs the plan once admitted; refunds price the response the gateway sends', async () => {
    const gateway = hive(subgraphs.compose(), { refundUnusedCost: true });
    const answer = await gateway.post(EXAMPLE_QUERY, user());
    expect(answer.status).toBe(200);
    expect(answer.body.errors).toBeUndefined();
    // actual: 3 × (1 + price 3 + 2 reviews + shippingEstimate 5 + required weight 2 + 2 entity fetches) = 45
    expect(answer.body.extensions?.['rateLimit']).toEqual({ api: { cost: 69, actualCost: 45, remaining: 955, capacity: 1000 } });
    expect(subgraphs.work.calls.inventory).toBeGreaterThan(0);
  });

  it('a denial is a 429 with Retry-After, and no subgraph is called', async () => {
    const gateway = hive(subgraphs.compose(), { buckets: [new TokenBucket('api', 100, Rate.perMinute(10))] });
    const who = user();
    expect((await gateway.post(EXAMPLE_QUERY, who)).status).toBe(200);
    subgraphs.work.reset();
    const denied = await gateway.post(EXAMPLE_QUERY, who);
    expect(denied.status).toBe(429);
    expect(Number(denied.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(denied.body.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', bucket: 'api', cost: 69 });
    const never = await gateway.post(firstOf(30), user());
    expect(never.body.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', retryAfter: null, cost: 690 });
    expect(subgraphs.work.total).toBe(0);
  });

  it('a GET is priced like a POST', async () => {
    const gateway = hive(subgraphs.compose(), { buckets: [new TokenBucket('api', 100, Rate.perMinute(10))] });
    const answer = await gateway.get(firstOf(30), user());
    // 690 > 100: never.
    expect(answer.status).toBe(429);
    expect(answer.body.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', cost: 690, retryAfter: null });
    expect(subgraphs.work.total).toBe(0);
  });

  it('a late schema naming an unknown bucket: logged once, every priced operation answered 503 RATE_LIMITER_UNAVAILABLE', async () => {
    const sdl = subgraphs.compose({ products: subgraphs.typeDefs.products.replace('(name: "api")', '(name: "apii")') });
    const gateway = hive(sdl);
    for (let i = 0; i < 3; i++) {
      const answer = await gateway.post(EXAMPLE_QUERY, user());
      expect(answer.status).toBe(503);
      expect(answer.body.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITER_UNAVAILABLE' });
      expect(answer.body.errors?.[0]?.message).toMatch(/cannot price operations/);
    }
    expect(gateway.logger.errors).toHaveLength(1);
    expect(gateway.logger.errors[0]).toMatch(/@tokenBucket on Query names bucket "apii", which is not in the plugin's buckets \("api"\)/);
    expect(subgraphs.work.total).toBe(0);
  });

  it('an update is priced by its own supergraph; one the checks refuse is logged and priced by the last accepted', async () => {
    let current = subgraphs.compose();
    const logger = captureLogger();
    const gateway = createGatewayRuntime({
      supergraph: () => current,
      logging: false,
      plugins: () => [
        useTokenBucket<Context>({
          store: new RedisStore(redis, { prefix: uniquePrefix('hive-gateway') }),
          buckets: [new TokenBucket('api', 1000, Rate.perHour(1))],
          identify: ({ request }) => request.headers.get('x-user-id') ?? 'anonymous',
          logger,
        }),
      ],
    });
    disposals.push(async () => {
      await gateway.dispose();
    });
    const validate = async (): Promise<unknown> => {
      const response = await gateway.fetch('http://gateway.test/graphql', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'graphql-cost': 'validate', ...user() },
        body: JSON.stringify({ query: EXAMPLE_QUERY }),
      });
      return ((await response.json()) as ResponseBody).extensions?.['rateLimit'];
    };
    expect(await validate()).toEqual({ api: { cost: 69, remaining: 1000, capacity: 1000 } });
    // price weighs 4: 3 × (1 + 4 + 10 + 5 + 2 + 2) = 72
    current = subgraphs.compose({ products: subgraphs.typeDefs.products.replace('price: Int @cost(weight: 3)', 'price: Int @cost(weight: 4)') });
    gateway.invalidateUnifiedGraph();
    expect(await validate()).toEqual({ api: { cost: 72, remaining: 1000, capacity: 1000 } });
    // An unknown bucket on a new field's type-level rule: logged once; the last accepted supergraph still prices (66).
    current = subgraphs.compose({ products: subgraphs.typeDefs.products.replace('price: Int @cost(weight: 3)', 'price: Int @cost(weight: 4) @tokenBucket(name: "other")') });
    gateway.invalidateUnifiedGraph();
    expect(await validate()).toEqual({ api: { cost: 72, remaining: 1000, capacity: 1000 } });
    expect(await validate()).toEqual({ api: { cost: 72, remaining: 1000, capacity: 1000 } });
    expect(logger.errors).toHaveLength(1);
    expect(logger.errors[0]).toMatch(/the updated schema was not accepted.*"other", which is not in the plugin's buckets/);
  });

  it('rules: buckets on a unified schema without any @tokenBucket', async () => {
    const typeDefs = subgraphs.typeDefs.products.replace(/@link\(url: "https:\/\/graphql-token-bucket[^\n]*/, '').replace(/directive @tokenBucket[^\n]*/, '').replace(' @tokenBucket(name: "api")', '');
    const gateway = hive(subgraphs.compose({ products: typeDefs }), {
      buckets: [new TokenBucket('api', 1000, Rate.perHour(1)), new TokenBucket('lookups', 5, Rate.perMinute(5))],
      rules: { Query: { bucket: 'api' }, 'Query.product': [{ bucket: 'lookups', cost: 1 }] },
    });
    const answer = await gateway.post('{ products(first: 3) { id } product(id: "1") { name shippingEstimate } }', { ...user(), 'graphql-cost': 'validate' });
    // api: products 3 × 1 + product 1 × (1 + shippingEstimate 5 + required weight 2 + its entity fetch 1) = 12; lookups: 1
    expect(answer.body.extensions?.['rateLimit']).toEqual({ api: { cost: 12, remaining: 1000, capacity: 1000 }, lookups: { cost: 1, remaining: 5, capacity: 5 } });
  });
});
