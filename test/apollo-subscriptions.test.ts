// Subscriptions and Apollo Server's plugin. Apollo Server serves WebSocket
// subscriptions outside its request pipeline, so the plugin says at start-up
// how subscriptions are limited when the schema prices them; a subscription
// POSTed over HTTP goes through the pipeline and is charged like any
// operation, never run uncharged.
import { ApolloServer } from '@apollo/server';
import type { BaseContext } from '@apollo/server';
import { makeExecutableSchema } from '@graphql-tools/schema';
import { afterEach, describe, expect, it } from 'vitest';
import { tokenBucketSubscriptions } from '../src/graphql-ws/index.js';
import { MemoryStore, Rate, TokenBucket, tokenBucketDirectiveTypeDefs, tokenBucketPlugin } from '../src/index.js';
import { postJson } from './support/adapters.js';
import { captureLogger, serveHttp } from './support/graphql.js';
import type { ResponseBody } from './support/graphql.js';

const live = new TokenBucket('live', 2, Rate.perMinute(1));
const api = new TokenBucket('api', 100, Rate.perMinute(100));

const servers: ApolloServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

async function startWith(typeDefs: string, resolvers: Parameters<typeof makeExecutableSchema>[0]['resolvers'] = {}) {
  const schema = makeExecutableSchema({ typeDefs: `${tokenBucketDirectiveTypeDefs}\n${typeDefs}`, resolvers });
  const logger = captureLogger();
  const infos: string[] = [];
  const store = new MemoryStore();
  const server = new ApolloServer({
    schema,
    logger: { ...logger, info: (message: unknown) => void infos.push(String(message)) },
    plugins: [tokenBucketPlugin({ store, buckets: [live, api], identify: () => 'someone' })],
  });
  servers.push(server);
  return { schema, server, logger, infos, store };
}

describe('at start-up, a schema whose subscriptions are priced', () => {
  it('is warned about when no tokenBucketSubscriptions limits them, naming the annotations', async () => {
    const { server, logger } = await startWith(`
      type Query { a: Int }
      type Subscription { ticks: Int @tokenBucket(name: "live", cost: 1) quiet: Int }
    `);
    await server.start();
    expect(logger.warnings).toEqual([expect.stringContaining('@tokenBucket on Subscription.ticks prices subscriptions')]);
    expect(logger.warnings[0]).toContain("tokenBucketSubscriptions from 'graphql-token-bucket/graphql-ws'");
  });

  it('finds a type-level annotation on the subscription root, and one on a type only a subscription reaches', async () => {
    const rooted = await startWith(`
      type Query { a: Int }
      type Subscription @tokenBucket(name: "live", cost: 1) { ticks: Int }
    `);
    await rooted.server.start();
    expect(rooted.logger.warnings).toEqual([expect.stringContaining('@tokenBucket on Subscription prices subscriptions')]);

    const nested = await startWith(`
      type Query { a: Int }
      type Subscription { bookAdded: Book }
      union Book = Paper | Ebook
      type Paper { pages: Int }
      interface Priced { price: Int @tokenBucket(name: "api", cost: 1) }
      type Ebook implements Priced { price: Int }
    `);
    await nested.server.start();
    expect(nested.logger.warnings).toEqual([expect.stringContaining('@tokenBucket on Priced.price prices subscriptions')]);
  });

  it('is logged as limited when a tokenBucketSubscriptions was made for the same schema', async () => {
    const { schema, server, logger, infos, store } = await startWith(`
      type Query { a: Int }
      type Subscription { ticks: Int @tokenBucket(name: "live", cost: 1) }
    `);
    tokenBucketSubscriptions({ schema, store, buckets: [live, api], identify: () => 'someone' });
    await server.start();
    expect(logger.warnings).toEqual([]);
    expect(infos).toEqual([expect.stringContaining('subscriptions (@tokenBucket on Subscription.ticks) are limited over graphql-ws by tokenBucketSubscriptions')]);
  });

  it('says nothing when no subscription can be charged', async () => {
    const { server, logger, infos } = await startWith(`
      type Query @tokenBucket(name: "api") { a: Int }
      type Subscription { ticks: Int }
    `);
    await server.start();
    expect(logger.warnings).toEqual([]);
    expect(infos.filter((m) => m.includes('graphql-token-bucket'))).toEqual([]);
  });
});

describe('a subscription POSTed to Apollo Server over HTTP', () => {
  it('is charged before anything runs, and refused with 429 once its bucket is empty', async () => {
    const resolved = { count: 0 };
    const subscribed = { count: 0 };
    const { server, store } = await startWith(
      `
      type Query { a: Int }
      type Subscription { ticks: Int @tokenBucket(name: "live", cost: 1) }
    `,
      {
        Subscription: {
          ticks: {
            subscribe: async function* () {
              subscribed.count += 1;
              yield { ticks: 1 };
            },
            resolve: () => {
              resolved.count += 1;
              return 1;
            },
          },
        },
      },
    );
    const http = await serveHttp(server, () => Promise.resolve({} as BaseContext));
    const TICKS = { query: 'subscription { ticks }' };
    // Whatever Apollo Server makes of it (a single result, the field resolved once), it pays first.
    for (const accept of ['application/json', 'multipart/mixed;subscriptionSpec="1.0", application/json']) {
      const answer = await postJson<ResponseBody>(http.url, TICKS, { accept });
      expect(answer.status).toBe(200);
      expect(answer.body.data).toEqual({ ticks: 1 });
    }
    expect(resolved.count).toBe(2);
    expect(await store.acquire(live, 'someone', 0)).toEqual({ allowed: true, remaining: 0 });

    const denied = await postJson<ResponseBody>(http.url, TICKS);
    expect(denied.status).toBe(429);
    expect(denied.headers.get('retry-after')).toBe('60');
    expect(denied.body).toEqual({
      errors: [{ message: expect.any(String), extensions: { code: 'RATE_LIMITED', retryAfter: expect.any(Number), bucket: 'live', cost: 1 } }],
    });
    expect(resolved.count).toBe(2);
    expect(subscribed.count).toBe(0);
  });
});
