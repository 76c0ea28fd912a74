// A federated graph of three real subgraphs (@apollo/subgraph in Apollo
// Server, each on a free port), composed with @apollo/composition, with the
// calls of each subgraph's resolvers and the work they do counted.
import { composeServices } from '@apollo/composition';
import { ApolloServer } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import type { ApolloServerPlugin } from '@apollo/server';
import { buildSubgraphSchema } from '@apollo/subgraph';
import { parse } from 'graphql';

export const TOKEN_BUCKET_LINK = '@link(url: "https://graphql-token-bucket.dev/token-bucket/v1.0", import: ["@tokenBucket"]) @composeDirective(name: "@tokenBucket")';
const TOKEN_BUCKET_DEFINITION = 'directive @tokenBucket(name: String!, cost: Int) repeatable on FIELD_DEFINITION | OBJECT | INTERFACE';

export type SubgraphName = 'products' | 'reviews' | 'inventory';

/**
 * What the subgraphs did: resolver calls per subgraph, and their work in the
 * cost model's units — each object a resolver returns (each list item) 1,
 * each entity a subgraph finds by its key for the gateway
 * (`__resolveReference`) 1, each weighted scalar its `@cost` weight, required
 * fields resolved for the gateway included.
 */
export class Work {
  calls: Record<SubgraphName, number> = { products: 0, reviews: 0, inventory: 0 };
  units = 0;
  call(subgraph: SubgraphName, units = 0): void {
    this.calls[subgraph] += 1;
    this.units += units;
  }
  get total(): number {
    return this.calls.products + this.calls.reviews + this.calls.inventory;
  }
  reset(): void {
    this.calls = { products: 0, reviews: 0, inventory: 0 };
    this.units = 0;
  }
}

export interface SubgraphOptions {
  /** Directives as the subgraphs import them: the cost spec's own names, or renamed (`@weight`, `@size`, `@limit`). */
  renamed?: boolean;
  /** The bucket `Query` is annotated with (default "api"). */
  bucket?: string;
  /** Reviews each product has (default 2). */
  reviewsPerProduct?: number;
  /** Subgraph plugins (the limiter inside a subgraph). */
  plugins?: Partial<Record<SubgraphName, ApolloServerPlugin[]>>;
}

/**
 * products(first: 3) { id name price reviews { body author } shippingEstimate }
 * = 3 × (Product 1 + price 3 + reviews 10 (default list size) × Review 1
 *        + shippingEstimate 5 + its required weight 2
 *        + entity fetches from reviews and inventory 2) = 3 × 23 = 69.
 */
export const EXAMPLE_QUERY = '{ products(first: 3) { id name price reviews { body author } shippingEstimate } }';

export function subgraphTypeDefs(options: SubgraphOptions = {}): Record<SubgraphName, string> {
  const cost = options.renamed ? 'weight' : 'cost';
  const listSize = options.renamed ? 'size' : 'listSize';
  const limit = options.renamed ? 'limit' : 'tokenBucket';
  const imports = options.renamed ? '{ name: "@cost", as: "@weight" }, { name: "@listSize", as: "@size" }' : '"@cost", "@listSize"';
  const federation = (more: string) => `@link(url: "https://specs.apollo.dev/federation/v2.9", import: ["@key", "@composeDirective", ${more}${imports}])`;
  const bucketLink = options.renamed
    ? '@link(url: "https://example.com/limits/v0.3", import: [{ name: "@tokenBucket", as: "@limit" }]) @composeDirective(name: "@limit")'
    : TOKEN_BUCKET_LINK;
  return {
    products: `
      extend schema ${federation('')} ${bucketLink}
      ${TOKEN_BUCKET_DEFINITION.replace('@tokenBucket', `@${limit}`)}
      type Query @${limit}(name: "${options.bucket ?? 'api'}") {
        products(first: Int = 5): [Product!]! @${listSize}(slicingArguments: ["first"])
        product(id: ID!): Product
      }
      type Product @key(fields: "id") {
        id: ID!
        name: String
        price: Int @${cost}(weight: 3)
        weight: Int @${cost}(weight: 2)
      }`,
    reviews: `
      extend schema ${federation('')}
      type Product @key(fields: "id") {
        id: ID!
        reviews: [Review!]!
      }
      type Review {
        body: String
        author: String
      }`,
    inventory: `
      extend schema ${federation('"@external", "@requires", ')}
      type Product @key(fields: "id") {
        id: ID!
        weight: Int @external
        shippingEstimate: Int @requires(fields: "weight") @${cost}(weight: 5)
      }`,
  };
}

function resolvers(work: Work, reviewsPerProduct: number) {
  const product = (id: string) => ({ id, name: `product ${id}`, price: 10 });
  return {
    products: {
      Query: {
        products: (_: unknown, { first }: { first: number }) => {
          const list = Array.from({ length: Math.max(0, Math.min(first, 1000)) }, (_, i) => product(String(i + 1)));
          work.call('products', list.length);
          return list;
        },
        product: (_: unknown, { id }: { id: string }) => {
          work.call('products', 1);
          return product(id);
        },
      },
      Product: {
        __resolveReference: (ref: { id: string }) => {
          work.call('products', 1);
          return product(ref.id);
        },
        price: (p: { price: number }) => {
          work.call('products', 3);
          return p.price;
        },
        weight: (p: { id: string }) => {
          work.call('products', 2);
          return Number(p.id) * 100;
        },
      },
    },
    reviews: {
      Product: {
        __resolveReference: (ref: { id: string }) => {
          work.call('reviews', 1);
          return { id: ref.id };
        },
        reviews: (p: { id: string }) => {
          work.call('reviews', reviewsPerProduct);
          return Array.from({ length: reviewsPerProduct }, (_, i) => ({ body: `review ${i} of ${p.id}`, author: `author ${i}` }));
        },
      },
    },
    inventory: {
      Product: {
        __resolveReference: (ref: { id: string; weight?: number }) => {
          work.call('inventory', 1);
          return ref;
        },
        shippingEstimate: (p: { weight?: number }) => {
          work.call('inventory', 5);
          if (typeof p.weight !== 'number') throw new Error('the required weight did not arrive');
          return Math.ceil(p.weight / 10);
        },
      },
    },
  };
}

export interface Subgraphs {
  readonly work: Work;
  readonly urls: Record<SubgraphName, string>;
  readonly typeDefs: Record<SubgraphName, string>;
  /** The supergraph of these subgraphs, composed now (`typeDefs` may replace one subgraph's). */
  compose(typeDefs?: Partial<Record<SubgraphName, string>>): string;
  stop(): Promise<void>;
}

/** Starts the three subgraphs, each an Apollo Server on a free port. */
export async function startSubgraphs(options: SubgraphOptions = {}): Promise<Subgraphs> {
  const work = new Work();
  const typeDefs = subgraphTypeDefs(options);
  const allResolvers = resolvers(work, options.reviewsPerProduct ?? 2);
  const servers: ApolloServer[] = [];
  const urls = {} as Record<SubgraphName, string>;
  for (const name of ['products', 'reviews', 'inventory'] as const) {
    const server = new ApolloServer({
      schema: buildSubgraphSchema({ typeDefs: parse(typeDefs[name]), resolvers: allResolvers[name] as never }),
      plugins: options.plugins?.[name] ?? [],
      logger: quiet,
    });
    const { url } = await startStandaloneServer(server, {
      listen: { port: 0, host: '127.0.0.1' },
      context: async ({ req }) => ({ headers: req.headers }),
    });
    servers.push(server);
    urls[name] = url;
  }
  return {
    work,
    urls,
    typeDefs,
    compose: (replaced = {}) => compose({ ...typeDefs, ...replaced }, urls),
    stop: async () => {
      await Promise.all(servers.map((s) => s.stop()));
    },
  };
}

export function compose(typeDefs: Record<SubgraphName, string>, urls: Record<SubgraphName, string>): string {
  const result = composeServices(
    (Object.keys(typeDefs) as SubgraphName[]).map((name) => ({ name, typeDefs: parse(typeDefs[name]), url: urls[name] })),
  );
  if (result.errors !== undefined) throw new Error(`composition failed: ${result.errors.map((e) => e.message).join('; ')}`);
  return result.supergraphSdl;
}

const quiet = { debug() {}, info() {}, warn() {}, error() {} };
