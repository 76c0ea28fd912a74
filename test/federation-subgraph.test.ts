// SPEC §7, inside a subgraph: the plugin in a subgraph's own Apollo Server
// prices `_entities(representations:)` by the number of representations, keys
// on the identity the gateway forwards, and its denial reaches the client
// through either gateway where getRetryAfter finds it.
import { ApolloGateway, RemoteGraphQLDataSource } from '@apollo/gateway';
import { ApolloServer } from '@apollo/server';
import type { GraphQLRequestContext } from '@apollo/server';
import { createGatewayRuntime } from '@graphql-hive/gateway-runtime';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { Rate, RedisStore, TokenBucket, getRetryAfter, tokenBucketPlugin } from '../src/index.js';
import { redisClient, uniquePrefix } from './support/clients.js';
import { startSubgraphs } from './support/federation.js';
import type { Subgraphs } from './support/federation.js';
import type { ResponseBody } from './support/graphql.js';
import { serveHttp } from './support/graphql.js';

const redis = redisClient(inject('redisUrl'));
/** The identity the gateway forwards; a subgraph reachable only from the gateway can trust it. */
const forwarded = ({ request }: GraphQLRequestContext<object>) => request.http?.headers.get('x-user-id') ?? 'gateway';
let subgraphs: Subgraphs;
let supergraph: string;

beforeAll(async () => {
  subgraphs = await startSubgraphs({
    plugins: {
      products: [
        tokenBucketPlugin({
          store: new RedisStore(redis, { prefix: uniquePrefix('subgraph-products') }),
          buckets: [new TokenBucket('api', 1000, Rate.perHour(1))],
          identify: forwarded,
        }),
      ],
      reviews: [
        tokenBucketPlugin({
          store: new RedisStore(redis, { prefix: uniquePrefix('subgraph-reviews') }),
          buckets: [new TokenBucket('reviews', 3, Rate.perMinute(1))],
          identify: forwarded,
          rules: { 'Product.reviews': { bucket: 'reviews', cost: 1 } },
        }),
      ],
    },
  });
  supergraph = subgraphs.compose();
});
afterAll(async () => {
  await subgraphs.stop();
  redis.disconnect();
});

let users = 0;
function user(): string {
  users += 1;
  return `subgraph-user-${users}`;
}

const ENTITIES = 'query ($representations: [_Any!]!) { _entities(representations: $representations) { ... on Product { price } } }';

describe('the plugin inside a subgraph', () => {
  it('prices _entities by the number of representations', async () => {
    for (const [n, cost] of [
      // n × (Product 1 + price 3)
      [1, 4],
      [3, 12],
      [30, 120],
    ] as const) {
      const representations = Array.from({ length: n }, (_, i) => ({ __typename: 'Product', id: String(i + 1) }));
      const response = await fetch(subgraphs.urls.products, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'graphql-cost': 'validate', 'x-user-id': user() },
        body: JSON.stringify({ query: ENTITIES, variables: { representations } }),
      });
      const body = (await response.json()) as ResponseBody;
      expect(body.extensions?.['rateLimit']).toEqual({ api: { cost, remaining: 1000, capacity: 1000 } });
    }
  });

  it('a subgraph denial reaches the client through Apollo Gateway, where getRetryAfter reads it', async () => {
    const gateway = new ApolloGateway({
      supergraphSdl: supergraph,
      buildService: ({ url = '' }) =>
        new RemoteGraphQLDataSource<{ userId: string }>({
          url,
          willSendRequest({ request, context }) {
            request.http?.headers.set('x-user-id', context.userId);
          },
        }),
    });
    const server = new ApolloServer<{ userId: string }>({ gateway });
    const http = await serveHttp(server, async ({ req }) => ({ userId: String(req.headers['x-user-id']) }));
    try {
      const who = user();
      const query = '{ products(first: 3) { id reviews { body } } }';
      // reviews: 3 products × Product.reviews 1 = 3, the whole bucket.
      expect((await http.post({ query }, { 'x-user-id': who })).body.errors).toBeUndefined();
      const denied = await http.post({ query }, { 'x-user-id': who });
      // Apollo Gateway answers 200 with its own error, the subgraph's 429 body inside.
      expect(denied.status).toBe(200);
      expect(denied.body.errors?.[0]?.extensions).toMatchObject({ response: { status: 429 } });
      expect(getRetryAfter(denied.body)).toBeGreaterThan(0);
      // Another user's bucket is their own: the identity is the forwarded one.
      expect((await http.post({ query }, { 'x-user-id': user() })).body.errors).toBeUndefined();
    } finally {
      await server.stop();
    }
  });

  it('getRetryAfter reads a subgraph body Apollo Gateway kept as text', () => {
    const body = JSON.stringify({ errors: [{ message: 'denied', extensions: { code: 'RATE_LIMITED', retryAfter: 2.5, bucket: 'reviews', cost: 3 } }] });
    const wrapped = { errors: [{ message: '429: Too Many Requests', extensions: { code: 'INTERNAL_SERVER_ERROR', response: { status: 429, body } } }] };
    expect(getRetryAfter(wrapped)).toBe(2.5);
    // Another error with a response carries no retryAfter.
    expect(getRetryAfter({ errors: [{ message: '500', extensions: { response: { status: 500, body: '<html>' } } }] })).toBeUndefined();
  });

  it('a subgraph denial reaches the client through Hive Gateway, where getRetryAfter reads it', async () => {
    const hive = createGatewayRuntime({
      supergraph,
      logging: false,
      propagateHeaders: { fromClientToSubgraphs: ({ request }) => ({ 'x-user-id': request.headers.get('x-user-id') ?? '' }) },
    });
    try {
      const who = user();
      const post = async () => {
        const response = await hive.fetch('http://gateway.test/graphql', {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-user-id': who },
          body: JSON.stringify({ query: '{ products(first: 3) { id reviews { body } } }' }),
        });
        return { status: response.status, body: (await response.json()) as ResponseBody };
      };
      expect((await post()).body.errors).toBeUndefined();
      const denied = await post();
      // Hive Gateway passes the subgraph's error on as it is, with its path, in an HTTP 200.
      expect(denied.status).toBe(200);
      expect(denied.body.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', bucket: 'reviews', serviceName: 'reviews' });
      expect(getRetryAfter(denied.body)).toBeGreaterThan(0);
    } finally {
      await hive.dispose();
    }
  });
});
