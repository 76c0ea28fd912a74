// Federated graphs whose plans a prediction from `@join__field(graph:)`
// misses: real subgraphs (@apollo/subgraph in Apollo Server, each on a free
// port), composed with @apollo/composition, counting the work each does —
// every object a resolver returns 1, every entity it finds by key for the
// gateway (`__resolveReference`) 1.
import { createServer } from 'node:http';
import { composeServices } from '@apollo/composition';
import { ApolloServer } from '@apollo/server';
import { ApolloServerPluginDrainHttpServer } from '@apollo/server/plugin/drainHttpServer';
import { buildSubgraphSchema } from '@apollo/subgraph';
import { expressMiddleware } from '@as-integrations/express5';
import express from 'express';
import { parse } from 'graphql';
import { listen } from './adapters.js';

/** Objects and entity resolutions, per subgraph. */
export class ShapeWork {
  readonly bySubgraph = new Map<string, number>();
  add(subgraph: string, units: number): void {
    this.bySubgraph.set(subgraph, (this.bySubgraph.get(subgraph) ?? 0) + units);
  }
  get total(): number {
    let total = 0;
    for (const units of this.bySubgraph.values()) total += units;
    return total;
  }
  reset(): void {
    this.bySubgraph.clear();
  }
}

type Resolvers = Record<string, Record<string, (...args: never[]) => unknown>>;

export interface Subgraph {
  readonly typeDefs: string;
  resolvers(work: ShapeWork): Resolvers;
}

export interface Shape {
  readonly subgraphs: Readonly<Record<string, Subgraph>>;
}

const federation = (imports: string) => `extend schema @link(url: "https://specs.apollo.dev/federation/v2.9", import: ["@key", "@listSize", ${imports}])`;

/** `first` items made by `make`, each counted as an object of `subgraph`. */
function list<T>(work: ShapeWork, subgraph: string, first: number, make: (i: number) => T): T[] {
  const items = Array.from({ length: Math.max(0, Math.min(first, 1000)) }, (_, i) => make(i));
  work.add(subgraph, items.length);
  return items;
}

/** A `__resolveReference` that counts one entity of `subgraph` and answers what `complete` adds to the representation. */
function reference(work: ShapeWork, subgraph: string, complete: (ref: Record<string, string>) => Record<string, unknown> = () => ({})) {
  return (ref: Record<string, string>) => {
    work.add(subgraph, 1);
    return { ...ref, ...complete(ref) };
  };
}

const ROOT_LIST = (field: string, type: string) => `${field}(first: Int = 10): [${type}!]! @listSize(slicingArguments: ["first"])`;

/**
 * `@interfaceObject`: activity lists `Item`s it holds as an object type;
 * only catalog knows each item's own type.
 * `{ recent(first: 20) { __typename } }`: 20 items, then 20 entities from catalog — 40.
 */
export const INTERFACE_OBJECT: Shape = {
  subgraphs: {
    catalog: {
      typeDefs: `${federation('')}
        interface Item @key(fields: "id") { id: ID! }
        type Book implements Item @key(fields: "id") { id: ID! title: String }
        type Movie implements Item @key(fields: "id") { id: ID! minutes: Int }`,
      resolvers: (work) => ({
        Item: { __resolveReference: reference(work, 'catalog', (ref) => ({ __typename: Number(ref['id']) % 2 === 0 ? 'Book' : 'Movie', title: 't', minutes: 90 })) },
        Book: { __resolveReference: reference(work, 'catalog', () => ({ title: 't' })) },
        Movie: { __resolveReference: reference(work, 'catalog', () => ({ minutes: 90 })) },
      }),
    },
    activity: {
      typeDefs: `${federation('"@interfaceObject"')}
        type Item @key(fields: "id") @interfaceObject { id: ID! seen: Int }
        type Query { ${ROOT_LIST('recent', 'Item')} }`,
      resolvers: (work) => ({
        Query: { recent: (_: unknown, { first }: { first: number }) => list(work, 'activity', first, (i) => ({ id: String(i), seen: i })) },
        Item: { __resolveReference: reference(work, 'activity', (ref) => ({ seen: Number(ref['id']) })) },
      }),
    },
  },
};

/**
 * Progressive `@override`: inventory takes `price` over from pricing for
 * the share of requests its label says. Apollo Gateway plans with no label
 * set: from pricing. `{ stock(first: 20) { price } }`: 20 items, then 20
 * entities from pricing — 40.
 */
export const PROGRESSIVE_OVERRIDE: Shape = {
  subgraphs: {
    inventory: {
      typeDefs: `${federation('"@override"')}
        type Query { ${ROOT_LIST('stock', 'Product')} }
        type Product @key(fields: "id") { id: ID! price: Int @override(from: "pricing", label: "percent(50)") }`,
      resolvers: (work) => ({
        Query: { stock: (_: unknown, { first }: { first: number }) => list(work, 'inventory', first, (i) => ({ id: String(i), price: 1 })) },
        Product: { __resolveReference: reference(work, 'inventory', () => ({ price: 1 })) },
      }),
    },
    pricing: {
      typeDefs: `${federation('')}
        type Product @key(fields: "id") { id: ID! price: Int }`,
      resolvers: (work) => ({ Product: { __resolveReference: reference(work, 'pricing', () => ({ price: 2 })) } }),
    },
  },
};

/**
 * A key chain of `hops` fetches: `products` knows a product's `k0` (its id);
 * subgraph `h1` finds it by `k0` and knows `k1`, …, and `h<hops>` alone,
 * found by `k<hops-1>` only, has `detail`. `{ products(first: 20) { detail } }`:
 * 20 products, then 20 entities from each hop — 20 × (1 + hops).
 */
export function keyChain(hops: number): Shape {
  const subgraphs: Record<string, Subgraph> = {
    products: {
      typeDefs: `${federation('')}
        type Query { ${ROOT_LIST('products', 'Product')} }
        type Product @key(fields: "k0") { k0: ID! }`,
      resolvers: (work) => ({
        Query: { products: (_: unknown, { first }: { first: number }) => list(work, 'products', first, (i) => ({ k0: String(i) })) },
        Product: { __resolveReference: reference(work, 'products') },
      }),
    },
  };
  for (let hop = 1; hop <= hops; hop++) {
    const name = `h${hop}`;
    const own = hop === hops ? `k${hop - 1}: ID! detail: String` : `k${hop - 1}: ID! k${hop}: ID!`;
    const keys = hop === hops ? `@key(fields: "k${hop - 1}")` : `@key(fields: "k${hop - 1}") @key(fields: "k${hop}")`;
    subgraphs[name] = {
      typeDefs: `${federation('')}
        type Product ${keys} { ${own} }`,
      resolvers: (work) => ({
        Product: {
          // Any key of this hop leads to the same product: each key's value names it by its number.
          __resolveReference: reference(work, name, (ref) => {
            const known = Object.values(ref).find((v) => typeof v === 'string' && v !== 'Product') ?? '0';
            const id = known.replace(/^k\d+-/, '');
            return { [`k${hop - 1}`]: hop === 1 ? id : `k${hop - 1}-${id}`, [`k${hop}`]: `k${hop}-${id}`, detail: `detail ${id}` };
          }),
        },
      }),
    };
  }
  return { subgraphs };
}

/**
 * `@shareable`: products and catalog both serve `Product.category`; only
 * catalog has `Category.name`. `{ products(first: 20) { category { name } } }`:
 * whichever subgraph the gateway takes the category from, each product's
 * category costs an object and an entity fetch — 20 × 3 = 60.
 */
export const SHAREABLE: Shape = {
  subgraphs: {
    products: {
      typeDefs: `${federation('"@shareable"')}
        type Query { ${ROOT_LIST('products', 'Product')} }
        type Product @key(fields: "id") { id: ID! category: Category @shareable }
        type Category @key(fields: "id") { id: ID! }`,
      resolvers: (work) => ({
        Query: { products: (_: unknown, { first }: { first: number }) => list(work, 'products', first, (i) => ({ id: String(i) })) },
        Product: {
          __resolveReference: reference(work, 'products'),
          category: (p: { id: string }) => {
            work.add('products', 1);
            return { id: `c${p.id}` };
          },
        },
        Category: { __resolveReference: reference(work, 'products') },
      }),
    },
    catalog: {
      typeDefs: `${federation('"@shareable"')}
        type Product @key(fields: "id") { id: ID! category: Category @shareable }
        type Category @key(fields: "id") { id: ID! name: String }`,
      resolvers: (work) => ({
        Product: {
          __resolveReference: reference(work, 'catalog'),
          category: (p: { id: string }) => {
            work.add('catalog', 1);
            return { id: `c${p.id}`, name: `category ${p.id}` };
          },
        },
        Category: { __resolveReference: reference(work, 'catalog', (ref) => ({ name: `category ${ref['id']}` })) },
      }),
    },
  },
};

export interface ServedShape {
  readonly work: ShapeWork;
  readonly supergraph: string;
  stop(): Promise<void>;
}

/** Serves each subgraph of `shape` over HTTP and composes the supergraph. */
export async function serveShape(shape: Shape): Promise<ServedShape> {
  const work = new ShapeWork();
  const servers: ApolloServer[] = [];
  const services = [];
  for (const [name, subgraph] of Object.entries(shape.subgraphs)) {
    const typeDefs = parse(subgraph.typeDefs);
    const app = express();
    const httpServer = createServer(app);
    // Longer than any test: the subgraph never closes a kept-alive connection as the gateway reuses it (ECONNRESET on a loaded machine).
    httpServer.keepAliveTimeout = 10 * 60_000;
    const server = new ApolloServer({
      schema: buildSubgraphSchema({ typeDefs, resolvers: subgraph.resolvers(work) as never }),
      logger: quiet,
      plugins: [ApolloServerPluginDrainHttpServer({ httpServer })],
    });
    await server.start();
    app.use('/', express.json(), expressMiddleware(server));
    const port = await listen(httpServer);
    servers.push(server);
    services.push({ name, typeDefs, url: `http://127.0.0.1:${port}/` });
  }
  const result = composeServices(services);
  if (result.errors !== undefined) throw new Error(`composition failed: ${result.errors.map((e) => e.message).join('; ')}`);
  return {
    work,
    supergraph: result.supergraphSdl,
    stop: async () => {
      await Promise.all(servers.map((s) => s.stop()));
    },
  };
}

const quiet = { debug() {}, info() {}, warn() {}, error() {} };

/**
 * Every shape at once, for random operations: catalog's `Item`s (`Book`,
 * `Movie`), which activity holds as an `@interfaceObject`; a book's author,
 * named by people; products whose price inventory takes over from pricing by
 * a label; and reviews, found only by the `sku` pricing knows (a second key).
 * Every list honours `first`.
 */
export const MIXED: Shape = {
  subgraphs: {
    catalog: {
      typeDefs: `${federation('')}
        interface Item @key(fields: "id") { id: ID! }
        type Book implements Item @key(fields: "id") { id: ID! title: String author: Author }
        type Movie implements Item @key(fields: "id") { id: ID! minutes: Int }
        type Author @key(fields: "id") { id: ID! }
        type Query { ${ROOT_LIST('items', 'Item')} }`,
      resolvers: (work) => {
        const item = (id: string) => (Number(id) % 2 === 0 ? { __typename: 'Book', id, title: `t${id}` } : { __typename: 'Movie', id, minutes: 90 });
        return {
          Query: { items: (_: unknown, { first }: { first: number }) => list(work, 'catalog', first, (i) => item(String(i))) },
          Item: { __resolveReference: reference(work, 'catalog', (ref) => item(ref['id']!)) },
          Book: {
            __resolveReference: reference(work, 'catalog', (ref) => item(ref['id']!)),
            author: (book: { id: string }) => {
              work.add('catalog', 1);
              return { id: `a${book.id}` };
            },
          },
          Movie: { __resolveReference: reference(work, 'catalog', (ref) => item(ref['id']!)) },
          Author: { __resolveReference: reference(work, 'catalog') },
        };
      },
    },
    people: {
      typeDefs: `${federation('')}
        type Author @key(fields: "id") { id: ID! name: String }`,
      resolvers: (work) => ({ Author: { __resolveReference: reference(work, 'people', (ref) => ({ name: `n${ref['id']}` })) } }),
    },
    activity: {
      typeDefs: `${federation('"@interfaceObject"')}
        type Item @key(fields: "id") @interfaceObject { id: ID! seen: Int }
        type Query { ${ROOT_LIST('recent', 'Item')} }`,
      resolvers: (work) => ({
        Query: { recent: (_: unknown, { first }: { first: number }) => list(work, 'activity', first, (i) => ({ id: String(i), seen: i })) },
        Item: { __resolveReference: reference(work, 'activity', (ref) => ({ seen: Number(ref['id']) })) },
      }),
    },
    inventory: {
      typeDefs: `${federation('"@override"')}
        type Query { ${ROOT_LIST('products', 'Product')} }
        type Product @key(fields: "id") { id: ID! stock: Int price: Int @override(from: "pricing", label: "percent(50)") }`,
      resolvers: (work) => ({
        Query: { products: (_: unknown, { first }: { first: number }) => list(work, 'inventory', first, (i) => ({ id: String(i), stock: i, price: 1 })) },
        Product: { __resolveReference: reference(work, 'inventory', () => ({ stock: 1, price: 1 })) },
      }),
    },
    pricing: {
      typeDefs: `${federation('')}
        type Product @key(fields: "id") @key(fields: "sku") { id: ID! sku: ID! price: Int }`,
      resolvers: (work) => ({
        Product: {
          __resolveReference: reference(work, 'pricing', (ref) => {
            const id = ref['id'] ?? (ref['sku'] ?? 'sku-0').slice(4);
            return { id, sku: `sku-${id}`, price: 2 };
          }),
        },
      }),
    },
    reviews: {
      typeDefs: `${federation('')}
        type Product @key(fields: "sku") { sku: ID! reviews(first: Int = 3): [Review!]! @listSize(slicingArguments: ["first"]) }
        type Review { body: String }`,
      resolvers: (work) => ({
        Product: {
          __resolveReference: reference(work, 'reviews'),
          reviews: (product: { sku: string }, { first }: { first: number }) => list(work, 'reviews', first, (i) => ({ body: `${product.sku} review ${i}` })),
        },
      }),
    },
  },
};
