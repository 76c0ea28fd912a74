// SPEC §7 since 0.4 and §8: the coprocessor's charge covers the plan the
// Router runs, for the plan shapes a prediction from `@join__field(graph:)`
// misses. No Router binary runs here: Apollo Gateway without the limiter,
// planning with the same query planner from the same supergraph, executes
// each admitted operation over the shape's subgraphs, which count their work
// (objects and entity resolutions), as the Router's execution would.
import { ApolloGateway } from '@apollo/gateway';
import { ApolloServer } from '@apollo/server';
import { afterAll, expect, it } from 'vitest';
import { MemoryStore, Rate, TokenBucket } from '../src/index.js';
import { routerCoprocessor } from '../src/router/index.js';
import { captureLogger, serveHttp } from './support/graphql.js';
import type { GraphQLOperation } from './support/graphql.js';
import { INTERFACE_OBJECT, PROGRESSIVE_OVERRIDE, SHAREABLE, keyChain, serveShape } from './support/plan-shapes.js';
import type { Shape } from './support/plan-shapes.js';
import { serveCoprocessor, throughRouter } from './support/router.js';

const stops: (() => Promise<void>)[] = [];
afterAll(async () => {
  await Promise.all(stops.splice(0).map((stop) => stop()));
});

/** What the coprocessor charged for `query` over `shape`, and the work the subgraphs did to run it. */
async function chargedAndDone(shape: Shape, query: string): Promise<{ cost: number; work: number }> {
  const served = await serveShape(shape);
  stops.push(served.stop);
  const server = new ApolloServer({ gateway: new ApolloGateway({ supergraphSdl: served.supergraph }), logger: captureLogger() });
  const execution = await serveHttp(server, async () => ({}));
  stops.push(() => server.stop());
  const coprocessor = await serveCoprocessor(
    routerCoprocessor({
      store: new MemoryStore(),
      buckets: [new TokenBucket('api', 1_000_000, Rate.perSecond(1_000))],
      identify: () => 'someone',
      rules: { Query: { bucket: 'api' } },
      reportCost: true,
      logger: captureLogger(),
    }),
  );
  stops.push(() => coprocessor.stop());
  served.work.reset();
  const answer = await throughRouter({ request: coprocessor }, { query }, served.supergraph, async (body) => (await execution.post(body as unknown as GraphQLOperation)).body as Record<string, unknown>);
  expect(answer.body['errors']).toBeUndefined();
  const cost = (answer.body['extensions'] as { rateLimit: Record<string, { cost: number }> }).rateLimit['api']!.cost;
  return { cost, work: served.work.total };
}

it.each([
  // recent 20 × (Item 1 + the fetch to catalog that tells its type 1)
  ['@interfaceObject', INTERFACE_OBJECT, '{ recent(first: 20) { __typename } }', 40],
  // stock 20 × (Product 1 + the fetch to pricing 1) with the label unset; with it drawn, inventory serves price (20)
  ['a progressive @override', PROGRESSIVE_OVERRIDE, '{ stock(first: 20) { price } }', 40],
  // products 20 × (Product 1 + one fetch per hop)
  ['a key chain of two hops', keyChain(2), '{ products(first: 20) { detail } }', 60],
  ['a key chain of four hops', keyChain(4), '{ products(first: 20) { detail } }', 100],
  // products 20 × (Product 1 + category (Category 1 + one fetch 1))
  ['a @shareable field', SHAREABLE, '{ products(first: 20) { category { name } } }', 60],
] as [string, Shape, string, number][])('%s: the charge is never below the work of the plan', async (_name, shape, query, expected) => {
  const { cost, work } = await chargedAndDone(shape, query);
  expect(cost).toBe(expected);
  expect(cost).toBeGreaterThanOrEqual(work);
});
