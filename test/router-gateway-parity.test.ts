// SPEC §8: the coprocessor charges what Apollo Gateway's plugin charges for
// the same supergraph and operation (§7), and gives back what it gives back.
// A real Apollo Gateway with the plugin over real subgraphs is the reference;
// the coprocessor gets the same supergraph as the Router would send it, and
// at its response stage the response the same gateway (without the plugin)
// sends for the operation, standing for the Router's execution.
import { ApolloGateway } from '@apollo/gateway';
import { ApolloServer } from '@apollo/server';
import { GraphQLError } from 'graphql';
import type { GraphQLRequestContext } from '@apollo/server';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { Rate, RedisStore, TokenBucket, tokenBucketPlugin } from '../src/index.js';
import type { TokenBucketPluginOptions } from '../src/index.js';
import { routerCoprocessor } from '../src/router/index.js';
import type { RouterRequest } from '../src/router/index.js';
import { redisClient, uniquePrefix } from './support/clients.js';
import { startSubgraphs } from './support/federation.js';
import type { Subgraphs } from './support/federation.js';
import { captureLogger, serveHttp } from './support/graphql.js';
import type { GraphQLOperation, HttpEndpoint } from './support/graphql.js';
import { serveCoprocessor, throughRouter } from './support/router.js';
import type { CoprocessorServer } from './support/router.js';

const redis = redisClient(inject('redisUrl'));
let subgraphs: Subgraphs;
let renamed: Subgraphs;
const stops: (() => Promise<void>)[] = [];

beforeAll(async () => {
  [subgraphs, renamed] = await Promise.all([startSubgraphs({ reviewsPerProduct: 3 }), startSubgraphs({ renamed: true, reviewsPerProduct: 1 })]);
});
afterAll(async () => {
  await Promise.all(stops.splice(0).map((stop) => stop()));
  await Promise.all([subgraphs.stop(), renamed.stop()]);
  redis.disconnect();
});

type Shared = Pick<TokenBucketPluginOptions, 'buckets' | 'rules' | 'reportCost' | 'refundUnusedCost' | 'rateLimitHeaders' | 'measure' | 'costHeader'> & {
  /** Given to both, in place of the x-user-id header; typed `never` as what it returns may be no identity at all. */
  identify?: () => never;
};

const BUCKETS = [new TokenBucket('api', 100_000, Rate.perHour(1)), new TokenBucket('lookups', 1_000, Rate.perHour(1))];

async function gateway(sdl: string, plugin: Shared | undefined): Promise<HttpEndpoint> {
  const { identify, ...shared } = plugin ?? { buckets: [] };
  const server = new ApolloServer({
    gateway: new ApolloGateway({ supergraphSdl: sdl }),
    logger: captureLogger(),
    plugins: plugin
      ? [
          tokenBucketPlugin({
            store: new RedisStore(redis, { prefix: uniquePrefix('parity-gateway') }),
            identify: identify ?? (({ request }: GraphQLRequestContext<object>) => request.http?.headers.get('x-user-id') ?? 'anonymous'),
            ...shared,
          }),
        ]
      : [],
  });
  const endpoint = await serveHttp(server, async () => ({}));
  stops.push(() => server.stop());
  return endpoint;
}

async function coprocessor(options: Shared): Promise<CoprocessorServer> {
  const { identify, ...shared } = options;
  const served = await serveCoprocessor(
    routerCoprocessor({
      store: new RedisStore(redis, { prefix: uniquePrefix('parity-router') }),
      identify: identify ?? ((request: RouterRequest) => request.headers['x-user-id']?.[0] ?? 'anonymous'),
      logger: captureLogger(),
      ...shared,
    }),
  );
  stops.push(() => served.stop());
  return served;
}

/** Operations across the pricing rules: sizes from arguments and variables, defaults, aliases, fragments, @requires, entity fetches, @skip. */
const OPERATIONS: GraphQLOperation[] = [
  { query: '{ products(first: 3) { id name price reviews { body author } shippingEstimate } }' },
  { query: '{ products { id } }' },
  { query: 'query Q($n: Int) { products(first: $n) { price weight reviews { body } } }', variables: { n: 7 } },
  { query: 'query Q($n: Int = 4) { products(first: $n) { ...P } }  fragment P on Product { id reviews { author } shippingEstimate }' },
  { query: '{ a: products(first: 2) { price } b: products(first: 5) { id ... on Product { shippingEstimate } } }' },
  { query: 'query Q($skip: Boolean!) { products(first: 6) { id reviews @skip(if: $skip) { body } } }', variables: { skip: true } },
  { query: 'query Q($skip: Boolean!) { products(first: 6) { id reviews @skip(if: $skip) { body } } }', variables: { skip: false } },
  { query: '{ product(id: "4") { name weight shippingEstimate reviews { body } } }' },
  { query: 'query Two { products(first: 1) { id } } query One { product(id: "1") { id } }', operationName: 'One' },
  { query: '{ products(first: 2) { __typename id } __typename }' },
];

interface Priced {
  status: number;
  rateLimit: unknown;
}

let users = 0;

describe('the coprocessor charges what Apollo Gateway charges', () => {
  it.each([
    ['reportCost', { buckets: BUCKETS, reportCost: true }],
    ['refundUnusedCost', { buckets: BUCKETS, reportCost: true, refundUnusedCost: true }],
    ['rules', { buckets: BUCKETS, reportCost: true, refundUnusedCost: true, rules: { 'Query.product': { bucket: 'lookups', cost: 2 }, 'Product.reviews': { bucket: 'lookups' } } }],
  ] as [string, Shared][])('for every operation, estimate and refund, with %s', async (_name, options) => {
    const sdl = subgraphs.compose();
    const [withPlugin, plain, router] = await Promise.all([gateway(sdl, options), gateway(sdl, undefined), coprocessor(options)]);
    for (const operation of OPERATIONS) {
      users += 1;
      const headers = { 'x-user-id': `parity-${users}` };
      const atGateway = await withPlugin.post(operation, headers);
      const atRouter = await throughRouter({ request: router }, { ...operation, headers }, sdl, async (body) => (await plain.post(body as unknown as GraphQLOperation)).body as Record<string, unknown>);
      const gatewaySaw: Priced = { status: atGateway.status, rateLimit: atGateway.body.extensions?.['rateLimit'] };
      const routerSaw: Priced = { status: atRouter.status, rateLimit: (atRouter.body['extensions'] as Record<string, unknown> | undefined)?.['rateLimit'] };
      expect(gatewaySaw.rateLimit, operation.query).toBeDefined();
      expect(routerSaw, operation.query).toEqual(gatewaySaw);
      expect(atRouter.body['data'], operation.query).toEqual(atGateway.body.data);
    }
  });

  it('with @cost, @listSize and @tokenBucket imported under other names', async () => {
    const sdl = renamed.compose();
    const options: Shared = { buckets: BUCKETS, reportCost: true, refundUnusedCost: true };
    const [withPlugin, plain, router] = await Promise.all([gateway(sdl, options), gateway(sdl, undefined), coprocessor(options)]);
    for (const operation of OPERATIONS.slice(0, 4)) {
      users += 1;
      const headers = { 'x-user-id': `parity-${users}` };
      const atGateway = await withPlugin.post(operation, headers);
      const atRouter = await throughRouter({ request: router }, { ...operation, headers }, sdl, async (body) => (await plain.post(body as unknown as GraphQLOperation)).body as Record<string, unknown>);
      expect((atRouter.body['extensions'] as Record<string, unknown>)['rateLimit'], operation.query).toEqual(atGateway.body.extensions?.['rateLimit']);
    }
  });

  it('denies what it denies, with the same error and wait', async () => {
    const sdl = subgraphs.compose();
    const options: Shared = { buckets: [new TokenBucket('api', 200, Rate.perHour(1))] };
    const [withPlugin, router] = await Promise.all([gateway(sdl, options), coprocessor(options)]);
    const headers = { 'x-user-id': `parity-deny-${users}` };
    const operation = { query: '{ products(first: 3) { id name price reviews { body author } shippingEstimate } }' };
    const decisions: [number, number][] = [];
    for (let i = 0; i < 4; i++) {
      const atGateway = await withPlugin.post(operation, headers);
      const atRouter = await throughRouter({ request: router }, { ...operation, headers }, sdl, () => ({ data: { products: [] } }));
      decisions.push([atGateway.status, atRouter.status]);
      if (atGateway.status === 429) {
        const [gatewayError] = atGateway.body.errors ?? [];
        const [routerError] = atRouter.body['errors'] as { message: string; extensions: Record<string, unknown> }[];
        expect({ ...routerError!.extensions, retryAfter: undefined }).toEqual({ ...gatewayError!.extensions, retryAfter: undefined });
        expect(Math.abs((routerError!.extensions['retryAfter'] as number) - (gatewayError!.extensions!['retryAfter'] as number))).toBeLessThan(60);
        // The two were asked one after the other: the waits differ by the time between (the bucket refills one token an hour).
        expect(Math.abs(Number(atRouter.headers['retry-after']?.[0]) - Number(atGateway.headers.get('retry-after')))).toBeLessThan(60);
      }
    }
    // 200 tokens, 69 a time: two pass.
    expect(decisions).toEqual([
      [200, 200],
      [200, 200],
      [429, 429],
      [429, 429],
    ]);
  });

  /** What a client sees of a response: status, the limiter's header fields, errors and extensions (waits rounded away: the two are asked one after the other). */
  function seen(status: number, headers: Record<string, string>, errors: unknown, extensions: unknown): string {
    const fields = Object.fromEntries(Object.entries(headers).filter(([name]) => /^(ratelimit|ratelimit-policy|retry-after)$/.test(name)).sort());
    return JSON.stringify({ status, fields, errors, extensions })
      .replace(/"retryAfter":[\d.]+/g, '"retryAfter":"N"')
      .replace(/Retry after [\d.]+ s/g, 'Retry after N s')
      .replace(/t=\d+/g, 't=N')
      .replace(/"retry-after":"\d+"/g, '"retry-after":"N"');
  }

  it.each([
    ['rateLimitHeaders and refunds', { rateLimitHeaders: true, reportCost: true, refundUnusedCost: true }],
    ['measure', { measure: true, reportCost: true, rateLimitHeaders: true }],
    ['the GraphQL-Cost header', { costHeader: true }],
  ] as [string, Shared][])('the same status, header fields, errors and report, admitted and denied, with %s', async (_name, extra) => {
    const sdl = subgraphs.compose();
    const options: Shared = { ...extra, buckets: [new TokenBucket('api', 150, Rate.perHour(1))] };
    const [withPlugin, plain, router] = await Promise.all([gateway(sdl, options), gateway(sdl, undefined), coprocessor(options)]);
    users += 1;
    const operation = { query: '{ products(first: 3) { id name price reviews { body author } shippingEstimate } }' };
    for (const cost of [undefined, 'report', 'validate', 'bogus', undefined, undefined]) {
      const headers: Record<string, string> = { 'x-user-id': `parity-fields-${users}`, ...(cost === undefined ? {} : { 'graphql-cost': cost }) };
      const atGateway = await withPlugin.post(operation, headers);
      const atRouter = await throughRouter({ request: router }, { ...operation, headers }, sdl, async (body) => (await plain.post(body as unknown as GraphQLOperation)).body as Record<string, unknown>);
      const gatewayFields: Record<string, string> = {};
      atGateway.headers.forEach((value, name) => (gatewayFields[name] = value));
      const routerFields = Object.fromEntries(Object.entries(atRouter.headers).map(([name, values]) => [name, values.join(', ')]));
      expect(seen(atRouter.status, routerFields, atRouter.body['errors'], atRouter.body['extensions']), cost).toBe(
        seen(atGateway.status, gatewayFields, atGateway.body.errors, atGateway.body.extensions),
      );
    }
  });

  it.each([
    ['returns undefined', () => undefined],
    ['returns an object', () => ({})],
    ['throws an Error', () => {
      throw new Error('an internal detail');
    }],
    ['throws a GraphQLError with a status', () => {
      throw new GraphQLError('Who are you?', { extensions: { code: 'UNAUTHENTICATED', http: { status: 401 } } });
    }],
  ] as unknown as [string, () => never][])('the same answer when identify %s', async (_name, identify) => {
    const sdl = subgraphs.compose();
    const options: Shared = { buckets: BUCKETS, identify };
    const [withPlugin, router] = await Promise.all([gateway(sdl, options), coprocessor(options)]);
    const operation = { query: '{ products(first: 2) { id } }' };
    const atGateway = await withPlugin.post(operation, {});
    const atRouter = await throughRouter({ request: router }, operation, sdl, () => {
      throw new Error('the operation ran');
    });
    expect({ status: atRouter.status, errors: atRouter.body['errors'] }).toEqual({ status: atGateway.status, errors: atGateway.body.errors });
  });
});
