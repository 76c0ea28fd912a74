// The three subgraphs of docs/federation.md, each an Apollo Server with
// @apollo/subgraph: `npx tsx examples/federation/subgraphs.ts` serves products,
// reviews and inventory on PRODUCTS_PORT, REVIEWS_PORT and INVENTORY_PORT
// (default 4001, 4002, 4003) until stopped.
import { readFileSync } from 'node:fs';
import { ApolloServer } from '@apollo/server';
import { ApolloServerPluginInlineTraceDisabled } from '@apollo/server/plugin/disabled';
import { startStandaloneServer } from '@apollo/server/standalone';
import { buildSubgraphSchema } from '@apollo/subgraph';
import { parse } from 'graphql';

export type SubgraphName = 'products' | 'reviews' | 'inventory';
export const SUBGRAPHS: readonly SubgraphName[] = ['products', 'reviews', 'inventory'];

/** Each subgraph's SDL, from the .graphql file next to this one. */
export const typeDefs = Object.fromEntries(
  SUBGRAPHS.map((name) => [name, readFileSync(new URL(`./${name}.graphql`, import.meta.url), 'utf8')]),
) as Record<SubgraphName, string>;

const product = (id: string) => ({ id, name: `product ${id}`, price: 10 * Number(id), weight: 100 * Number(id) });

const resolvers = {
  products: {
    Query: {
      products: (_: unknown, { first }: { first: number }) => Array.from({ length: Math.max(0, Math.min(first, 100)) }, (_, i) => product(String(i + 1))),
      product: (_: unknown, { id }: { id: string }) => product(id),
    },
    Product: { __resolveReference: (ref: { id: string }) => product(ref.id) },
  },
  reviews: {
    Product: {
      __resolveReference: (ref: { id: string }) => ({ id: ref.id }),
      reviews: (p: { id: string }) => [1, 2].map((n) => ({ body: `review ${n} of product ${p.id}`, author: `reader ${n}` })),
    },
  },
  inventory: {
    Product: {
      __resolveReference: (ref: { id: string; weight?: number }) => ref,
      shippingEstimate: (p: { weight: number }) => Math.ceil(p.weight / 10),
    },
  },
};

export interface RunningSubgraphs {
  urls: Record<SubgraphName, string>;
  stop(): Promise<void>;
}

/** Starts the three subgraphs on the given ports (0: any free port). */
export async function startSubgraphs(ports: Record<SubgraphName, number>): Promise<RunningSubgraphs> {
  const servers: ApolloServer[] = [];
  const urls = {} as Record<SubgraphName, string>;
  for (const name of SUBGRAPHS) {
    const server = new ApolloServer({
      schema: buildSubgraphSchema({ typeDefs: parse(typeDefs[name]), resolvers: resolvers[name] }),
      plugins: [ApolloServerPluginInlineTraceDisabled()], // no traces for Apollo GraphOS here
    });
    urls[name] = (await startStandaloneServer(server, { listen: { port: ports[name] } })).url;
    servers.push(server);
  }
  return { urls, stop: async () => void (await Promise.all(servers.map((server) => server.stop()))) };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const port = (name: string, fallback: number) => Number(process.env[`${name.toUpperCase()}_PORT`] ?? fallback);
  const running = await startSubgraphs({ products: port('products', 4001), reviews: port('reviews', 4002), inventory: port('inventory', 4003) });
  for (const name of SUBGRAPHS) console.log(`${name} subgraph at ${running.urls[name]}`);
}
