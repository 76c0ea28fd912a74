// SPEC §7, entity fetches at both gateways: every subgraph an object needs
// fetched from is one fetch of its own, however many subgraphs the
// supergraph has, and however the document spreads or repeats the fields
// that need them (fragments, a response key repeated).
import { composeServices } from '@apollo/composition';
import { startStandaloneServer } from '@apollo/server/standalone';
import { buildSubgraphSchema } from '@apollo/subgraph';
import { ApolloGateway } from '@apollo/gateway';
import { ApolloServer } from '@apollo/server';
import { createGatewayRuntime } from '@graphql-hive/gateway-runtime';
import { parse } from 'graphql';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { useTokenBucket } from '../src/envelop/index.js';
import { MemoryStore, Rate, TokenBucket, tokenBucketPlugin } from '../src/index.js';
import { startSubgraphs } from './support/federation.js';
import type { Subgraphs } from './support/federation.js';
import { serveHttp } from './support/graphql.js';
import type { ResponseBody } from './support/graphql.js';

type Post = (query: string, headers?: Record<string, string>) => Promise<ResponseBody>;
const stops: (() => Promise<void>)[] = [];
let subgraphs: Subgraphs;

beforeAll(async () => {
  subgraphs = await startSubgraphs();
});
afterAll(async () => {
  await Promise.all(stops.splice(0).map((stop) => stop()));
  await subgraphs.stop();
});
beforeEach(() => subgraphs.work.reset());

const bucket = () => new TokenBucket('api', 1_000_000, Rate.perSecond(1_000));

async function apolloGateway(supergraphSdl: string): Promise<Post> {
  const server = new ApolloServer({
    gateway: new ApolloGateway({ supergraphSdl }),
    plugins: [tokenBucketPlugin({ store: new MemoryStore(), buckets: [bucket()], identify: () => 'someone', reportCost: true })],
  });
  const endpoint = await serveHttp(server, async () => ({}));
  stops.push(() => server.stop());
  return async (query, headers = {}) => (await endpoint.post({ query }, headers)).body;
}

function hiveGateway(supergraph: string): Post {
  const gateway = createGatewayRuntime({
    supergraph,
    logging: false,
    plugins: () => [useTokenBucket({ store: new MemoryStore(), buckets: [bucket()], identify: () => 'someone', reportCost: true })],
  });
  stops.push(async () => {
    await gateway.dispose();
  });
  return async (query, headers = {}) => {
    const response = await gateway.fetch('http://gateway.test/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ query }),
    });
    return (await response.json()) as ResponseBody;
  };
}

function cost(body: ResponseBody): number | undefined {
  expect(body.errors).toBeUndefined();
  return (body.extensions?.['rateLimit'] as Record<string, { cost: number }> | undefined)?.['api']?.cost;
}

describe('a supergraph of 40 subgraphs', () => {
  // g00 serves products; each of g01 … g39 resolves one field of Product.
  const GRAPHS = 40;
  const federation = '@link(url: "https://specs.apollo.dev/federation/v2.9", import: ["@key"])';
  let supergraph: string;
  beforeAll(() => {
    const services = Array.from({ length: GRAPHS }, (_, i) => {
      const name = `g${String(i).padStart(2, '0')}`;
      const sdl =
        i === 0
          ? `extend schema ${federation} type Query { products: [Product!]! } type Product @key(fields: "id") { id: ID! }`
          : `extend schema ${federation} type Product @key(fields: "id") { id: ID! f${i}: Int }`;
      return { name, typeDefs: parse(sdl), url: `http://127.0.0.1:9/${name}` };
    });
    const result = composeServices(services);
    if (result.errors !== undefined) throw new Error(result.errors.map((e) => e.message).join('; '));
    supergraph = result.supergraphSdl;
  });

  const query = `{ products { ${Array.from({ length: GRAPHS - 1 }, (_, i) => `f${i + 1}`).join(' ')} } }`;

  it('each subgraph an object is fetched from counts, at both gateways', async () => {
    // The subgraphs compose no @tokenBucket: the bucket comes from rules.
    const rules = { Query: { bucket: 'api' } };
    const apollo = new ApolloServer({
      gateway: new ApolloGateway({ supergraphSdl: supergraph }),
      plugins: [tokenBucketPlugin({ store: new MemoryStore(), buckets: [bucket()], identify: () => 'someone', reportCost: true, rules })],
    });
    const endpoint = await serveHttp(apollo, async () => ({}));
    stops.push(() => apollo.stop());
    const hive = createGatewayRuntime({
      supergraph,
      logging: false,
      plugins: () => [useTokenBucket({ store: new MemoryStore(), buckets: [bucket()], identify: () => 'someone', reportCost: true, rules })],
    });
    stops.push(async () => {
      await hive.dispose();
    });
    // products 10 (default list size) × (Product 1 + one entity fetch from each of g01 … g39: 39) = 400
    const dry = { 'graphql-cost': 'validate' };
    expect(cost((await endpoint.post({ query }, dry)).body)).toBe(400);
    const answer = await hive.fetch('http://gateway.test/graphql', { method: 'POST', headers: { 'content-type': 'application/json', ...dry }, body: JSON.stringify({ query }) });
    expect(cost((await answer.json()) as ResponseBody)).toBe(400);
  });
});

describe('fields of other subgraphs spread through fragments or under a repeated key', () => {
  // Each costs as the merged document does:
  // products(first: 3) × (Product 1 + reviews 10 × Review 1 + shippingEstimate 5 + its required weight 2
  //                       + the entity fetches from reviews and inventory 2) = 3 × 20 = 60
  const merged = '{ products(first: 3) { reviews { body } shippingEstimate } }';
  const fragments = 'fragment A on Product { reviews { body } } fragment B on Product { shippingEstimate }';
  const documents = [
    merged,
    `{ products(first: 3) { ...A ...B } } ${fragments}`,
    `{ products(first: 3) { ...A } products(first: 3) { ...B } } ${fragments}`,
    `{ ...QA ...QB } fragment QA on Query { products(first: 3) { ...A } } fragment QB on Query { products(first: 3) { ...B } } ${fragments}`,
  ];

  for (const name of ['Apollo Gateway', 'Hive Gateway'] as const) {
    it(`${name}: every document is charged 60, and the subgraphs do the same work`, async () => {
      const post = name === 'Apollo Gateway' ? await apolloGateway(subgraphs.compose()) : hiveGateway(subgraphs.compose());
      for (const query of documents) {
        subgraphs.work.reset();
        expect(cost(await post(query))).toBe(60);
        // 3 products; reviews and inventory each find the 3 again, products the 3 weights
        expect(subgraphs.work.calls).toEqual({ products: 4, reviews: 6, inventory: 6 });
        expect(subgraphs.work.units).toBeLessThanOrEqual(60);
      }
    });
  }
});

describe('a root field two subgraphs resolve (@shareable)', () => {
  const federation = '@link(url: "https://specs.apollo.dev/federation/v2.9", import: ["@key", "@shareable"])';
  const calls = { products: 0, references: 0 };
  let supergraph: string;
  beforeAll(async () => {
    const services = [];
    for (const name of ['left', 'right'] as const) {
      const typeDefs = parse(`extend schema ${federation} type Query { products(first: Int = 10): [Product!]! @shareable } type Product @key(fields: "id") { id: ID! ${name}: Int }`);
      const resolvers = {
        Query: {
          products: (_: unknown, { first }: { first: number }) => {
            calls.products += 1;
            return Array.from({ length: first }, (_, i) => ({ id: String(i), [name]: i }));
          },
        },
        Product: {
          __resolveReference: (ref: { id: string }) => {
            calls.references += 1;
            return { id: ref.id, [name]: Number(ref.id) };
          },
        },
      };
      const server = new ApolloServer({ schema: buildSubgraphSchema({ typeDefs, resolvers: resolvers as never }) });
      const { url } = await startStandaloneServer(server, { listen: { port: 0, host: '127.0.0.1' } });
      stops.push(() => server.stop());
      services.push({ name, typeDefs, url });
    }
    const result = composeServices(services);
    if (result.errors !== undefined) throw new Error(result.errors.map((e) => e.message).join('; '));
    supergraph = result.supergraphSdl;
  });

  for (const name of ['Apollo Gateway', 'Hive Gateway'] as const) {
    it(`${name}: fields of both subgraphs cost the entity fetch the gateway makes for each object`, async () => {
      const post = async (query: string) => {
        const rules = { Query: { bucket: 'api' } };
        if (name === 'Hive Gateway') {
          const gateway = createGatewayRuntime({ supergraph, logging: false, plugins: () => [useTokenBucket({ store: new MemoryStore(), buckets: [bucket()], identify: () => 'someone', reportCost: true, rules })] });
          stops.push(async () => {
            await gateway.dispose();
          });
          const response = await gateway.fetch('http://gateway.test/graphql', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query }) });
          return (await response.json()) as ResponseBody;
        }
        const server = new ApolloServer({ gateway: new ApolloGateway({ supergraphSdl: supergraph }), plugins: [tokenBucketPlugin({ store: new MemoryStore(), buckets: [bucket()], identify: () => 'someone', reportCost: true, rules })] });
        const endpoint = await serveHttp(server, async () => ({}));
        stops.push(() => server.stop());
        return (await endpoint.post({ query })).body;
      };
      calls.products = 0;
      calls.references = 0;
      // products(first: 3) × (Product 1 + one more fetch of each product, from the subgraph the list did not come from, 1) = 6
      expect(cost(await post('{ products(first: 3) { left right } }'))).toBe(6);
      // The gateway asks each subgraph for the list: 3 products from each, 6 objects.
      expect(calls).toEqual({ products: 2, references: 0 });
      // One subgraph resolves it all: products(first: 3) × Product 1 = 3
      expect(cost(await post('{ products(first: 3) { right } }'))).toBe(3);
      expect(calls).toEqual({ products: 3, references: 0 });
    });
  }
});
