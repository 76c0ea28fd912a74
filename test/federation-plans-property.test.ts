// SPEC §7 since 0.4, property: over random operations on a supergraph with
// an `@interfaceObject`, a progressive `@override(label:)` and an entity
// found by a second key only, behind real Apollo Gateway and Hive Gateway,
// the charge is never below the objects the subgraphs return and the
// entities they resolve for the gateway's fetches — neither the estimate
// nor, after the refund, the response's price. Resolvers honour the sizes
// the schema states (`first:`, defaults). At Apollo Gateway, whose plan is
// priced, the response's price is the work exactly, and the bound that
// prices where no plan is made is never below the plan's charge.
import { ApolloGateway } from '@apollo/gateway';
import { ApolloServer } from '@apollo/server';
import { createGatewayRuntime } from '@graphql-hive/gateway-runtime';
import fc from 'fast-check';
import { getOperationAST, parse } from 'graphql';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { useTokenBucket } from '../src/envelop/index.js';
import { CostModel, MemoryStore, Rate, TokenBucket, supergraphPricing, tokenBucketPlugin } from '../src/index.js';
import { serveHttp } from './support/graphql.js';
import type { HttpEndpoint, ResponseBody } from './support/graphql.js';
import { MIXED, serveShape } from './support/plan-shapes.js';
import type { ServedShape } from './support/plan-shapes.js';

const options = () => ({
  store: new MemoryStore(),
  buckets: [new TokenBucket('api', 1_000_000_000, Rate.perSecond(1_000_000))],
  identify: () => 'someone',
  reportCost: true,
  refundUnusedCost: true,
  rules: { Query: { bucket: 'api' } },
});

let served: ServedShape;
/** The same supergraph priced by the bound, as where no plan is made. */
let bound: CostModel;
let apollo: HttpEndpoint;
let stopApollo: () => Promise<void>;
let hive: ReturnType<typeof createGatewayRuntime>;

beforeAll(async () => {
  served = await serveShape(MIXED);
  const source = supergraphPricing(served.supergraph);
  bound = new CostModel(source.schema, { ...source, plans: undefined, rules: new Map([['Query', [{ bucket: 'api', cost: null }]]]) });
  const server = new ApolloServer({ gateway: new ApolloGateway({ supergraphSdl: served.supergraph }), plugins: [tokenBucketPlugin(options())] });
  apollo = await serveHttp(server, async () => ({}));
  stopApollo = () => server.stop();
  hive = createGatewayRuntime({ supergraph: served.supergraph, logging: false, plugins: () => [useTokenBucket(options())] });
}, 60_000);
afterAll(async () => {
  await stopApollo();
  await hive.dispose();
  await served.stop();
});

const first = fc.option(fc.integer({ min: 0, max: 6 }), { nil: undefined }).map((n) => (n === undefined ? '' : `(first: ${n})`));
const some = (fields: string[]) => fc.subarray(fields, { minLength: 1 }).map((chosen) => chosen.join(' '));
const itemFields = ['id', '__typename', 'seen', '... on Book { title }', '... on Book { author { id } }', '... on Book { author { name } }', '... on Movie { minutes }'];
const productFields = fc.tuple(some(['id', 'stock', 'price', 'sku', '__typename', 'reviews { body }']), first).map(([fields, size]) => fields.replace('reviews {', `reviews${size} {`));
const rootField = fc.oneof(
  // (Hive Gateway fails a named fragment on the type an @interfaceObject holds: Item resolves to the interface itself.)
  fc.tuple(first, some([...itemFields, '...B'])).map(([size, fields]) => `items${size} { ${fields} }`),
  fc.tuple(first, some(itemFields)).map(([size, fields]) => `recent${size} { ${fields} }`),
  fc.tuple(first, productFields).map(([size, fields]) => `products${size} { ${fields} }`),
);
const operation = fc
  .array(rootField, { minLength: 1, maxLength: 3 })
  .map((fields) => `{ ${fields.map((f, i) => `a${i}: ${f}`).join(' ')} }${fields.some((f) => f.includes('...B')) ? ' fragment B on Book { title author { name } }' : ''}`);

async function charged(query: string, gateway: 'apollo' | 'hive'): Promise<{ cost: number; actualCost: number }> {
  let body: ResponseBody;
  if (gateway === 'apollo') {
    body = (await apollo.post({ query })).body;
  } else {
    const response = await hive.fetch('http://gateway.test/graphql', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query }) });
    body = (await response.json()) as ResponseBody;
  }
  expect(body.errors, JSON.stringify(body.errors)).toBeUndefined();
  return (body.extensions?.['rateLimit'] as Record<string, { cost: number; actualCost: number }>)['api']!;
}

it('a gateway never charges less than the objects and entity resolutions of the plan it runs', async () => {
  await fc.assert(
    fc.asyncProperty(operation, fc.constantFrom('apollo' as const, 'hive' as const), async (query, gateway) => {
      served.work.reset();
      const { cost, actualCost } = await charged(query, gateway);
      const work = served.work.total;
      expect(cost).toBeGreaterThanOrEqual(work);
      expect(actualCost).toBeGreaterThanOrEqual(work);
      if (gateway === 'apollo') {
        expect(actualCost).toBe(work);
        // The bound is above Apollo Gateway's plan too.
        const document = parse(query);
        expect(bound.costOf(document, getOperationAST(document)!, {}).get('api')).toBeGreaterThanOrEqual(cost);
      }
    }),
    { numRuns: 60 },
  );
}, 300_000);
