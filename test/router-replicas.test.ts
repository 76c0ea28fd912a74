// SPEC §8: several coprocessor replicas behind one Router, on one
// RedisStore. Nothing passes between the stages but the Router's context:
// the request stage at one replica, the response stage at another. A store
// gives back only what it took itself, so a refund happens at the replica
// that charged.
import { afterAll, describe, expect, inject, it } from 'vitest';
import { Rate, RedisStore, TokenBucket } from '../src/index.js';
import { routerCoprocessor } from '../src/router/index.js';
import type { RouterCoprocessorOptions, RouterRequest } from '../src/router/index.js';
import { redisClient, uniquePrefix } from './support/clients.js';
import { EXAMPLE_QUERY, compose, subgraphTypeDefs } from './support/federation.js';
import { captureLogger } from './support/graphql.js';
import { serveCoprocessor, throughRouter } from './support/router.js';
import type { CoprocessorServer, Execute } from './support/router.js';

const redis = redisClient(inject('redisUrl'));
const SDL = compose(subgraphTypeDefs(), { products: 'http://products:4001', reviews: 'http://reviews:4002', inventory: 'http://inventory:4003' });
const SECRET = 'replicas-share-this-secret-0123456789abcdef';
const servers: CoprocessorServer[] = [];

afterAll(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop()));
  redis.disconnect();
});

async function replicas(count: number, options: Partial<RouterCoprocessorOptions> = {}): Promise<CoprocessorServer[]> {
  // One store object per replica, as separate processes have, on one Redis and one prefix.
  const prefix = uniquePrefix('router-replicas');
  const started = await Promise.all(
    Array.from({ length: count }, () =>
      serveCoprocessor(
        routerCoprocessor({
          store: new RedisStore(redis, { prefix }),
          buckets: [new TokenBucket('api', 300, new Rate(1, 10_000))],
          identify: (request: RouterRequest) => request.headers['x-user-id']?.[0] ?? 'anonymous',
          contextSecret: SECRET,
          reportCost: true,
          refundUnusedCost: true,
          rateLimitHeaders: true,
          logger: captureLogger(),
          ...options,
        }),
      ),
    ),
  );
  servers.push(...started);
  return started;
}

/** 3 products, no reviews: 3 × 13 = 39 of the 69 estimated. */
const threeProducts: Execute = () => ({
  data: { products: [1, 2, 3].map((i) => ({ id: String(i), name: `p${i}`, price: 1, reviews: [], shippingEstimate: 1 })) },
});

describe('replicas behind a load balancer', () => {
  it('reports at whichever replica the response reaches; refunds where the tokens were taken', async () => {
    const [a, b] = await replicas(2);
    const request = { query: EXAMPLE_QUERY, headers: { 'x-user-id': 'replicated' } };
    // The request stage at a, the response stage at b: the report and the RateLimit fields as a saw the
    // bucket, and the estimate kept (b's store did not take the tokens, so it cannot give them back).
    const across = await throughRouter({ request: a!, response: b! }, request, SDL, threeProducts);
    expect(across.status).toBe(200);
    expect(across.body['extensions']).toEqual({ rateLimit: { api: { cost: 69, remaining: 231, capacity: 300 } } });
    expect(across.headers['ratelimit']).toEqual(['"api";r=231;t=690']);
    // Both stages at b: priced there and given back there.
    const same = await throughRouter({ request: b!, response: b! }, request, SDL, threeProducts);
    expect(same.body['extensions']).toEqual({ rateLimit: { api: { cost: 69, actualCost: 39, remaining: 192, capacity: 300 } } });
    expect(same.headers['ratelimit']).toEqual(['"api";r=192;t=1080']);
  });

  it('denies at any replica once the shared bucket is short', async () => {
    const all = await replicas(3, { refundUnusedCost: false });
    const request = { query: EXAMPLE_QUERY, headers: { 'x-user-id': 'drained' } };
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await throughRouter({ request: all[i % 3]!, response: all[(i + 1) % 3]! }, request, SDL, threeProducts)).status);
    // 300 tokens, 69 a time: four pass.
    expect(statuses).toEqual([200, 200, 200, 200, 429, 429]);
  });
});
