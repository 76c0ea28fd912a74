// SPEC §7, property: over random operations on the federated graph, what a
// gateway charges is never below the work the subgraphs' resolvers do
// together for it (objects returned, entities found again by key for the
// gateway's fetches, weighted fields resolved, the fields @requires makes the
// gateway fetch included), behind Apollo Gateway and Hive Gateway alike. Resolvers honour the sizes the schema states (first:,
// the default list size for reviews): a schema that understates them is the
// schema's lie, not the pricer's.
import { ApolloGateway } from '@apollo/gateway';
import { ApolloServer } from '@apollo/server';
import { createGatewayRuntime } from '@graphql-hive/gateway-runtime';
import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { useTokenBucket } from '../src/envelop/index.js';
import { MemoryStore, Rate, TokenBucket, tokenBucketPlugin } from '../src/index.js';
import { startSubgraphs } from './support/federation.js';
import type { Subgraphs } from './support/federation.js';
import { serveHttp } from './support/graphql.js';
import type { HttpEndpoint, ResponseBody } from './support/graphql.js';

const api = new TokenBucket('api', 1_000_000_000, Rate.perSecond(1_000_000));
let subgraphs: Subgraphs;
let apollo: HttpEndpoint;
let stopApollo: () => Promise<void>;
let hive: ReturnType<typeof createGatewayRuntime>;

beforeAll(async () => {
  subgraphs = await startSubgraphs({ reviewsPerProduct: 3 });
  const supergraph = subgraphs.compose();
  const server = new ApolloServer({
    gateway: new ApolloGateway({ supergraphSdl: supergraph }),
    plugins: [tokenBucketPlugin({ store: new MemoryStore(), buckets: [api], identify: () => 'someone', reportCost: true })],
  });
  apollo = await serveHttp(server, async () => ({}));
  stopApollo = () => server.stop();
  hive = createGatewayRuntime({
    supergraph,
    logging: false,
    plugins: () => [useTokenBucket({ store: new MemoryStore(), buckets: [api], identify: () => 'someone', reportCost: true })],
  });
});
afterAll(async () => {
  await stopApollo();
  await hive.dispose();
  await subgraphs.stop();
});

const productFields = fc
  .subarray(['id', 'name', 'price', 'weight', 'reviews { body author }', 'reviews { __typename }', 'shippingEstimate', '__typename'], { minLength: 1 })
  .map((fields) => fields.join(' '));
const rootField = fc.oneof(
  fc.record({ first: fc.integer({ min: 0, max: 12 }), fields: productFields }).map(({ first, fields }) => `products(first: ${first}) { ${fields} }`),
  fc.record({ id: fc.integer({ min: 1, max: 50 }), fields: productFields }).map(({ id, fields }) => `product(id: "${id}") { ${fields} }`),
  productFields.map((fields) => `products { ${fields} }`),
);
const operation = fc.array(rootField, { minLength: 1, maxLength: 3 }).map((fields) => `{ ${fields.map((f, i) => `a${i}: ${f}`).join(' ')} }`);

async function charged(query: string, gateway: 'apollo' | 'hive'): Promise<number> {
  let body: ResponseBody;
  if (gateway === 'apollo') {
    body = (await apollo.post({ query })).body;
  } else {
    const response = await hive.fetch('http://gateway.test/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query }),
    });
    body = (await response.json()) as ResponseBody;
  }
  expect(body.errors).toBeUndefined();
  return (body.extensions?.['rateLimit'] as Record<string, { cost: number }>)['api']!.cost;
}

it('a gateway never charges less than the subgraphs work', async () => {
  await fc.assert(
    fc.asyncProperty(operation, fc.constantFrom('apollo' as const, 'hive' as const), async (query, gateway) => {
      subgraphs.work.reset();
      const cost = await charged(query, gateway);
      expect(cost).toBeGreaterThanOrEqual(subgraphs.work.units);
    }),
    { numRuns: 40 },
  );
}, 120_000);
