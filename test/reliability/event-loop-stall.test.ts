// The store timeout is wall-clock time, and a Node process can stall: a huge
// batch, a slow resolver, a long GC. A store reply that arrived during the
// stall must still win over the timer: otherwise under 'deny' healthy Redis
// answers turn into 503s, and under 'allow' operations Redis denied run
// anyway, so anyone who can stall the server gets past its limits.
import { ApolloServer } from '@apollo/server';
import type { ApolloServerPlugin } from '@apollo/server';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { Rate, RedisStore, TokenBucket, tokenBucketDirectiveTypeDefs, tokenBucketPlugin } from '../../src/index.js';
import { redisClient, uniquePrefix } from '../support/clients.js';

const STORE_TIMEOUT_MS = 100;
const STALL_MS = 300;
const ROUNDS = 5;
const VICTIMS = 5;
const api = new TokenBucket('api', 10, Rate.perHour(10));

let redis: Redis | undefined;
beforeAll(async () => {
  redis = redisClient(inject('redisUrl'));
  await redis.ping();
});
afterAll(() => {
  redis?.disconnect();
});

/** Once armed, the next operation hogs the CPU right after its acquire has gone out, as a heavy neighbour would. */
function staller(): { plugin: ApolloServerPlugin; arm(): void } {
  let armed = false;
  return {
    arm: () => (armed = true),
    plugin: {
      async requestDidStart() {
        return {
          async didResolveOperation() {
            if (!armed) return;
            armed = false;
            setImmediate(() => {
              const end = performance.now() + STALL_MS;
              while (performance.now() < end);
            });
          },
        };
      },
    },
  };
}

async function run(onStoreError: 'allow' | 'deny', drained: boolean): Promise<Record<string, number>> {
  const { plugin, arm } = staller();
  const store = new RedisStore(redis!, { prefix: uniquePrefix(`stall ${onStoreError}`) });
  const server = new ApolloServer({
    typeDefs: `${tokenBucketDirectiveTypeDefs}\ntype Query @tokenBucket(name: "api") { thing: Thing } type Thing { id: ID }`,
    resolvers: { Query: { thing: () => ({ id: '1' }) } },
    plugins: [
      tokenBucketPlugin({
        store,
        buckets: [api],
        identify: () => 'victim',
        onStoreError,
        storeTimeoutMs: STORE_TIMEOUT_MS,
      }),
      plugin,
    ],
  });
  await server.start();
  const outcomes: Record<string, number> = {};
  try {
    // Unstalled first: the connection is up and the script loaded, so a stall meets one round trip only.
    for (let i = 0; i < (drained ? api.capacity : 1); i++) await server.executeOperation({ query: '{ thing { id } }' });
    for (let round = 0; round < ROUNDS; round++) {
      const pending = Array.from({ length: VICTIMS }, () => server.executeOperation({ query: '{ thing { id } }' }));
      arm();
      for (const response of await Promise.all(pending)) {
        const result = response.body.kind === 'single' ? response.body.singleResult : undefined;
        const outcome = String(result?.errors?.[0]?.extensions?.['code'] ?? (result?.data ? 'data' : 'nothing'));
        outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
      }
      if (!drained) await store.reset(api, 'victim');
    }
  } finally {
    await server.stop();
  }
  return outcomes;
}

describe(`an event-loop stall of ${STALL_MS} ms with storeTimeoutMs ${STORE_TIMEOUT_MS}`, () => {
  it("under 'deny' does not turn Redis's answers into 503s", async () => {
    const outcomes = await run('deny', false);
    console.log(`[stall/deny] ${ROUNDS} stalls × ${VICTIMS} operations with tokens to spare: ${JSON.stringify(outcomes)}`);
    expect(outcomes).toEqual({ data: ROUNDS * VICTIMS });
  });

  it("under 'allow' does not let operations Redis denied run", async () => {
    const outcomes = await run('allow', true);
    console.log(`[stall/allow] ${ROUNDS} stalls × ${VICTIMS} operations on a drained bucket: ${JSON.stringify(outcomes)}`);
    expect(outcomes).toEqual({ RATE_LIMITED: ROUNDS * VICTIMS });
  });
});
