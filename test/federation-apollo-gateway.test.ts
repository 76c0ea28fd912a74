// SPEC §7, Apollo Gateway: tokenBucketPlugin in an Apollo Server running a
// real @apollo/gateway prices the client's operation from the supergraph SDL
// (the API schema has every directive stripped), once, before any subgraph
// is called; denials call no subgraph; refunds price the gateway's response;
// updates keep the last accepted model.
import { ApolloGateway } from '@apollo/gateway';
import { ApolloServer } from '@apollo/server';
import type { GraphQLRequestContext } from '@apollo/server';
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { Rate, RedisStore, TokenBucket, tokenBucketPlugin } from '../src/index.js';
import type { TokenBucketPluginOptions } from '../src/index.js';
import { redisClient, uniquePrefix } from './support/clients.js';
import { EXAMPLE_QUERY, startSubgraphs } from './support/federation.js';
import type { Subgraphs } from './support/federation.js';
import { captureLogger, serveHttp } from './support/graphql.js';
import type { CapturedLogger, HttpEndpoint, ResponseBody } from './support/graphql.js';

const redis = redisClient(inject('redisUrl'));
let subgraphs: Subgraphs;
let renamed: Subgraphs;
const stops: (() => Promise<void>)[] = [];

beforeAll(async () => {
  [subgraphs, renamed] = await Promise.all([startSubgraphs(), startSubgraphs({ renamed: true })]);
});
afterAll(async () => {
  await Promise.all(stops.splice(0).map((stop) => stop()));
  await Promise.all([subgraphs.stop(), renamed.stop()]);
  redis.disconnect();
});
beforeEach(() => {
  subgraphs.work.reset();
  renamed.work.reset();
});

let users = 0;
function user(): Record<string, string> {
  users += 1;
  return { 'x-user-id': `gateway-user-${users}` };
}

interface Gateway {
  endpoint: HttpEndpoint;
  logger: CapturedLogger;
  /** Hands the gateway a new supergraph, as a schema registry would. */
  update(supergraphSdl: string): void;
}

type Options = Partial<TokenBucketPluginOptions>;

async function gateway(supergraphSdl: string, options: Options = {}): Promise<Gateway> {
  let update: ((sdl: string) => void) | undefined;
  const gateway = new ApolloGateway({
    supergraphSdl: ({ update: u }) => {
      update = u;
      return Promise.resolve({ supergraphSdl });
    },
  });
  const logger = captureLogger();
  const server = new ApolloServer({
    gateway,
    logger,
    plugins: [
      tokenBucketPlugin({
        store: new RedisStore(redis, { prefix: uniquePrefix('apollo-gateway') }),
        buckets: [new TokenBucket('api', 1000, Rate.perHour(1))],
        identify: ({ request }: GraphQLRequestContext<object>) => request.http?.headers.get('x-user-id') ?? 'anonymous',
        reportCost: true,
        ...options,
      }),
    ],
  });
  const endpoint = await serveHttp(server, async () => ({}));
  stops.push(() => server.stop());
  return { endpoint, logger, update: (sdl) => update?.(sdl) };
}

function firstOf(n: number): string {
  return EXAMPLE_QUERY.replace('first: 3', `first: ${n}`);
}

describe('Apollo Gateway: priced from the supergraph', () => {
  it('prices the operation against the supergraph, scaling with first:, before any subgraph is called', async () => {
    const { endpoint } = await gateway(subgraphs.compose());
    // first: 1 → 1 × (Product 1 + price 3 + reviews 10 × 1 + shippingEstimate 5 + required weight 2
    //                  + entity fetches from reviews and inventory 2) = 23
    // first: 3 → 3 × 23 = 69; first: 30 → 30 × 23 = 690
    for (const [n, cost] of [
      [1, 23],
      [3, 69],
      [30, 690],
    ] as const) {
      const answer = await endpoint.post({ query: firstOf(n) }, { ...user(), 'graphql-cost': 'validate' });
      expect(answer.status).toBe(200);
      expect(answer.body.extensions?.['rateLimit']).toEqual({ api: { cost, remaining: 1000, capacity: 1000 } });
    }
    expect(subgraphs.work.total).toBe(0);
  });

  it('charges once at the gateway and runs the plan; refunds price the response the gateway sends', async () => {
    const { endpoint } = await gateway(subgraphs.compose(), { refundUnusedCost: true });
    const who = user();
    const answer = await endpoint.post({ query: EXAMPLE_QUERY }, who);
    expect(answer.status).toBe(200);
    expect(answer.body.errors).toBeUndefined();
    expect((answer.body.data?.['products'] as unknown[]).length).toBe(3);
    // actual: 3 products × (1 + price 3 + 2 reviews × 1 + shippingEstimate 5 + required weight 2 + 2 entity fetches) = 3 × 15 = 45
    expect(answer.body.extensions?.['rateLimit']).toEqual({ api: { cost: 69, actualCost: 45, remaining: 955, capacity: 1000 } });
    // products: 1 list + 3 prices + 3 weights; reviews: 3 references + 3 lists; inventory: 3 references + 3 estimates
    expect(subgraphs.work.calls).toEqual({ products: 7, reviews: 6, inventory: 6 });
  });

  it('a denial is a 429 with Retry-After, and no subgraph is called', async () => {
    const { endpoint } = await gateway(subgraphs.compose(), { buckets: [new TokenBucket('api', 100, Rate.perMinute(10))] });
    const who = user();
    expect((await endpoint.post({ query: EXAMPLE_QUERY }, who)).status).toBe(200);
    subgraphs.work.reset();
    const denied = await endpoint.post({ query: EXAMPLE_QUERY }, who);
    expect(denied.status).toBe(429);
    expect(Number(denied.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(denied.body.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', bucket: 'api', cost: 69 });
    expect(denied.body.data).toBeUndefined();
    // More than the capacity: never, and still nothing called.
    const never = await endpoint.post({ query: firstOf(30) }, user());
    expect(never.status).toBe(429);
    expect(never.body.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', retryAfter: null, cost: 690 });
    expect(subgraphs.work.total).toBe(0);
  });

  it('a GET is priced like a POST', async () => {
    const { endpoint } = await gateway(subgraphs.compose(), { buckets: [new TokenBucket('api', 100, Rate.perMinute(10))] });
    const url = new URL(endpoint.url);
    url.searchParams.set('query', firstOf(30));
    const get = await fetch(url, { headers: { 'apollo-require-preflight': 'true', ...user() } });
    // 690 > 100: never.
    expect(get.status).toBe(429);
    expect(((await get.json()) as ResponseBody).errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', cost: 690, retryAfter: null });
    expect(subgraphs.work.total).toBe(0);
  });

  it('an operationName that names no operation is refused with a 400 and no subgraph is called (the gateway reads "" as no name)', async () => {
    const { endpoint } = await gateway(subgraphs.compose(), { buckets: [new TokenBucket('api', 100, Rate.perHour(1))] });
    for (const operationName of ['', 'Nope']) {
      // 690 tokens > 100: never, had it been priced.
      const answer = await endpoint.post({ query: firstOf(30), operationName }, user());
      expect(answer.status).toBe(400);
      expect(answer.body.errors?.[0]).toMatchObject({ message: `Unknown operation named "${operationName}".`, extensions: { code: 'BAD_REQUEST' } });
      expect(answer.body.data).toBeUndefined();
    }
    expect(subgraphs.work.total).toBe(0);
  });

  it('reads @cost, @listSize and @tokenBucket imported under other names', async () => {
    const { endpoint } = await gateway(renamed.compose());
    const answer = await endpoint.post({ query: EXAMPLE_QUERY }, { ...user(), 'graphql-cost': 'validate' });
    // The same 3 × 23 through @weight, @size and @limit (imported from another URL).
    expect(answer.body.extensions?.['rateLimit']).toEqual({ api: { cost: 69, remaining: 1000, capacity: 1000 } });
  });

  it('a bucket the plugin does not know fails the start with the plugin message', async () => {
    const sdl = subgraphs.compose({ products: subgraphs.typeDefs.products.replace('(name: "api")', '(name: "apii")') });
    const gateway = new ApolloGateway({ supergraphSdl: sdl });
    const server = new ApolloServer({
      gateway,
      logger: captureLogger(),
      plugins: [
        tokenBucketPlugin({
          store: new RedisStore(redis, { prefix: uniquePrefix('apollo-gateway') }),
          buckets: [new TokenBucket('api', 1000, Rate.perHour(1))],
          identify: () => 'x',
        }),
      ],
    });
    await expect(server.start()).rejects.toThrow(/@tokenBucket on Query names bucket "apii", which is not in the plugin's buckets \("api"\)/);
    await server.stop().catch(() => {});
  });

  it('an update is priced by its own supergraph; one the checks refuse keeps the last accepted model, logged', async () => {
    const served = await gateway(subgraphs.compose());
    const validate = async () =>
      ((await served.endpoint.post({ query: EXAMPLE_QUERY }, { ...user(), 'graphql-cost': 'validate' })).body.extensions?.['rateLimit'] as Record<string, { cost: number }>)['api']?.cost;
    expect(await validate()).toBe(69);

    // price weighs 4 instead of 3: 3 × (1 + 4 + 10 + 5 + 2 + 2) = 72
    served.update(subgraphs.compose({ products: subgraphs.typeDefs.products.replace('price: Int @cost(weight: 3)', 'price: Int @cost(weight: 4)') }));
    expect(await validate()).toBe(72);

    // An unknown bucket: logged once, the last accepted supergraph (72) still prices.
    served.update(subgraphs.compose({ products: subgraphs.typeDefs.products.replace('(name: "api")', '(name: "other")').replace('weight: 3', 'weight: 1') }));
    expect(await validate()).toBe(72);
    expect(served.logger.errors.filter((e) => e.includes('the updated schema was not accepted'))).toHaveLength(1);
    expect(served.logger.errors[0]).toMatch(/"other", which is not in the plugin's buckets/);
  });

  it('rules: buckets on a supergraph without any @tokenBucket', async () => {
    const typeDefs = subgraphs.typeDefs.products.replace(/@link\(url: "https:\/\/graphql-token-bucket[^\n]*/, '').replace(/directive @tokenBucket[^\n]*/, '').replace(' @tokenBucket(name: "api")', '');
    const sdl = subgraphs.compose({ products: typeDefs });
    expect(sdl).not.toContain('tokenBucket');
    // Without rules nothing is limited: said once, as a warning.
    const unlimited = await gateway(sdl);
    expect(unlimited.logger.warnings.filter((w) => w.includes('names no bucket, so no operation is limited'))).toHaveLength(1);
    const { endpoint, logger } = await gateway(sdl, {
      buckets: [new TokenBucket('api', 1000, Rate.perHour(1)), new TokenBucket('lookups', 5, Rate.perMinute(5))],
      rules: { Query: { bucket: 'api' }, 'Query.product': [{ bucket: 'lookups', cost: 1 }] },
    });
    const answer = await endpoint.post({ query: '{ products(first: 3) { id } product(id: "1") { name shippingEstimate } }' }, { ...user(), 'graphql-cost': 'validate' });
    // api: products 3 × 1 + product 1 × (1 + shippingEstimate 5 + required weight 2 + its entity fetch 1) = 12; lookups: 1
    expect(answer.body.extensions?.['rateLimit']).toEqual({ api: { cost: 12, remaining: 1000, capacity: 1000 }, lookups: { cost: 1, remaining: 5, capacity: 5 } });
    expect(logger.warnings).toEqual([]);
  });
});
