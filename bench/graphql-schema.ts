import { tokenBucketDirectiveTypeDefs } from '../src/index.js';

/*
 * The schema, resolvers and operation of the GraphQL benchmark, shared by the
 * load driver (bench/graphql-bench.ts) and the server process
 * (bench/graphql-server.ts) so every variant serves the same thing.
 */

/**
 * The server variants, in the order each round runs them. `ours+usage` is
 * `ours` with `refundUnusedCost` and `rateLimitHeaders` on.
 */
export const VARIANTS = ['none', 'ours', 'ours+usage', 'graphql-rate-limit-directive'] as const;
export type Variant = (typeof VARIANTS)[number];

export function isVariant(value: string | undefined): value is Variant {
  return (VARIANTS as readonly (string | undefined)[]).includes(value);
}

/**
 * The flood benchmark's servers (bench/flood-bench.ts): tokenBucketPlugin on
 * RedisStore whose `price` bucket one operation empties for an hour, with the
 * deny cache on (the default) and off.
 */
export const FLOOD_VARIANTS = ['flooded', 'flooded-no-cache'] as const;
export type FloodVariant = (typeof FLOOD_VARIANTS)[number];

export function isFloodVariant(value: string | undefined): value is FloodVariant {
  return (FLOOD_VARIANTS as readonly (string | undefined)[]).includes(value);
}

/** The `price` bucket of the flooded servers: QUERY takes all of it, and it refills in an hour. */
export const FLOOD_PRICE_CAPACITY = 10;

/** Header carrying the caller's identity; both limiters key on it. */
export const IDENTITY_HEADER = 'x-user';
export const IDENTITY = 'bench-user';

/** Three buckets and ten list items, each charging `price`: `api` 10 (complexity: 10 × Item 1), `list` 1, `price` 10. */
export const QUERY = '{ items(first: 10) { id name price } }';

const SCHEMA_BODY = (query: string, items: string, price: string): string => `
type Query ${query} {
  items(first: Int = 10): [Item!]! ${items}
}

type Item {
  id: ID!
  name: String!
  price: Float! ${price}
}
`;

/** `none` serves this schema without the plugin; `ours` adds the plugin. */
export const TOKEN_BUCKET_TYPE_DEFS = `${tokenBucketDirectiveTypeDefs}
${SCHEMA_BODY('@tokenBucket(name: "api")', '@tokenBucket(name: "list", cost: 1)', '@tokenBucket(name: "price", cost: 1)')}`;

/**
 * graphql-rate-limit-directive's limits: a fixed window per field execution,
 * as large as its `Int` arguments allow, so nothing is denied during a run.
 */
export const PEER_LIMIT = 2_000_000_000;
export const PEER_DURATION_SECONDS = 60;

/**
 * The peer's directive on the same places. Its directive is not repeatable
 * and a field-level one replaces the type-level one, so the `Query`-level
 * limit covers no field here: the peer consumes once for `items` and once per
 * `price` resolved (11 Redis calls per operation).
 */
export function peerTypeDefs(directiveTypeDefs: string): string {
  const limit = `@rateLimit(limit: ${PEER_LIMIT}, duration: ${PEER_DURATION_SECONDS})`;
  return `${directiveTypeDefs}
${SCHEMA_BODY(limit, limit, limit)}`;
}

/**
 * Our buckets: never short during a run, yet drained faster than they refill
 * (like a busy bucket, each key is read and written on every operation) and
 * gone a few minutes after the run.
 */
export const OUR_CAPACITY = 1e12;
export const OUR_REFILL_PER_SECOND = 1000;

interface Item {
  id: string;
  name: string;
  price: number;
}

const ITEMS: readonly Item[] = Array.from({ length: 100 }, (_, i) => ({
  id: String(i + 1),
  name: `item ${i + 1}`,
  price: Math.round((i + 1) * 1.25 * 100) / 100,
}));

/** The same resolvers for every variant; `price` has its own so the peer wraps a real resolver, not the default one. */
export const RESOLVERS = {
  Query: {
    items: (_source: unknown, args: { first?: number | null }): readonly Item[] =>
      ITEMS.slice(0, Math.max(0, Math.min(args.first ?? 10, ITEMS.length))),
  },
  Item: {
    price: (item: Item): number => item.price,
  },
};
