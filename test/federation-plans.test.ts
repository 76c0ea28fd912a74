// SPEC §7 since 0.4, "Price the plan": through real Apollo Gateway and
// Hive Gateway over subgraphs served on HTTP, the charge is never below the
// objects and entity resolutions the subgraphs count, for the plans a
// prediction from `@join__field(graph:)` misses — `@interfaceObject` type
// resolution, a progressive `@override(label:)`, keys reached only through
// other subgraphs, and a `@shareable` field taken from either subgraph. At
// Apollo Gateway the charge is the plan's own: exactly the work.
import { ApolloGateway } from '@apollo/gateway';
import { ApolloServer } from '@apollo/server';
import { createGatewayRuntime } from '@graphql-hive/gateway-runtime';
import { afterAll, describe, expect, it } from 'vitest';
import { useTokenBucket } from '../src/envelop/index.js';
import { MemoryStore, Rate, TokenBucket, tokenBucketPlugin } from '../src/index.js';
import { serveHttp } from './support/graphql.js';
import type { ResponseBody } from './support/graphql.js';
import { INTERFACE_OBJECT, PROGRESSIVE_OVERRIDE, SHAREABLE, keyChain, serveShape } from './support/plan-shapes.js';
import type { Shape } from './support/plan-shapes.js';

const stops: (() => Promise<void>)[] = [];
afterAll(async () => {
  await Promise.all(stops.splice(0).map((stop) => stop()));
});

const rules = { Query: { bucket: 'api' } };
const options = () => ({ store: new MemoryStore(), buckets: [new TokenBucket('api', 1_000_000, Rate.perSecond(1_000))], identify: () => 'someone', reportCost: true, rules });

type Gateway = 'Apollo Gateway' | 'Hive Gateway';
type Post = (query: string) => Promise<{ cost: number; work: number }>;

/** A gateway over `shape`'s subgraphs: each post answers what was charged and what the subgraphs did for it. */
async function gatewayOver(shape: Shape, gateway: Gateway): Promise<Post> {
  const served = await serveShape(shape);
  stops.push(served.stop);
  let send: (query: string) => Promise<ResponseBody>;
  if (gateway === 'Apollo Gateway') {
    const server = new ApolloServer({ gateway: new ApolloGateway({ supergraphSdl: served.supergraph }), plugins: [tokenBucketPlugin(options())] });
    const endpoint = await serveHttp(server, async () => ({}));
    stops.push(() => server.stop());
    send = async (query) => (await endpoint.post({ query })).body;
  } else {
    const runtime = createGatewayRuntime({ supergraph: served.supergraph, logging: false, plugins: () => [useTokenBucket(options())] });
    stops.push(async () => {
      await runtime.dispose();
    });
    send = async (query) => {
      const response = await runtime.fetch('http://gateway.test/graphql', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query }) });
      return (await response.json()) as ResponseBody;
    };
  }
  return async (query) => {
    served.work.reset();
    const body = await send(query);
    expect(body.errors).toBeUndefined();
    const cost = (body.extensions?.['rateLimit'] as Record<string, { cost: number }>)['api']!.cost;
    return { cost, work: served.work.total };
  };
}

describe.each(['Apollo Gateway', 'Hive Gateway'] as const)('%s: the charge covers the plan that runs', (gateway) => {
  const apollo = gateway === 'Apollo Gateway';

  it('@interfaceObject: the objects, and the fetch that tells each one its type', async () => {
    const post = await gatewayOver(INTERFACE_OBJECT, gateway);
    // recent 20 × (Item 1 + the fetch to catalog 1) = 40, which the subgraphs do.
    expect(await post('{ recent(first: 20) { __typename } }')).toEqual({ cost: 40, work: 40 });
    const typed = await post('{ recent(first: 20) { seen ... on Book { title } ... on Movie { minutes } } }');
    expect(typed.cost).toBeGreaterThanOrEqual(typed.work);
    expect(typed.work).toBe(40);
  });

  it('progressive @override: the fetch the label leaves, whichever side runs', async () => {
    const post = await gatewayOver(PROGRESSIVE_OVERRIDE, gateway);
    // Apollo Gateway plans with no label set: stock 20 × (Product 1 + the fetch to pricing 1) = 40.
    // Hive Gateway draws the label as it resolves, and may ask both sides for an object: 20 × (1 + 2) = 60.
    for (let i = 0; i < (apollo ? 1 : 6); i++) {
      const { cost, work } = await post('{ stock(first: 20) { price } }');
      expect(cost).toBe(apollo ? 40 : 60);
      expect(cost).toBeGreaterThanOrEqual(work);
      if (apollo) expect(work).toBe(40);
    }
  });

  it('a key chain: one fetch per hop, per object', async () => {
    for (const hops of [2, 4]) {
      const post = await gatewayOver(keyChain(hops), gateway);
      // products 20 × (Product 1 + one fetch per hop): 60 with two hops, 100 with four.
      const expected = 20 * (1 + hops);
      expect(await post('{ products(first: 20) { detail } }')).toEqual({ cost: expected, work: expected });
    }
  });

  it('@shareable: the category, and the fetch for its name, from whichever subgraph serves it', async () => {
    const post = await gatewayOver(SHAREABLE, gateway);
    // Apollo Gateway: products 20 × (Product 1 + category (Category 1 + one fetch 1)) = 60.
    // Hive Gateway takes the category from both subgraphs, the product again from catalog: 20 × 4 = 80.
    const { cost, work } = await post('{ products(first: 20) { category { name } } }');
    expect(cost).toBeGreaterThanOrEqual(work);
    if (apollo) expect({ cost, work }).toEqual({ cost: 60, work: 60 });
  });
});
