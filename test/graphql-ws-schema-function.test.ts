// SPEC §6 "Since 0.4": tokenBucketSubscriptions also takes the schema as a
// function, for servers that build it after their options (NestJS): each
// operation is priced against what it returns, a schema whose annotations
// fail the checks is logged and what it prices refused, and whatever goes
// wrong ends that operation alone.
import { buildSchema } from 'graphql';
import type { GraphQLSchema } from 'graphql';
import { afterEach, describe, expect, it } from 'vitest';
import { tokenBucketSubscriptions } from '../src/graphql-ws/index.js';
import { MemoryStore, Rate, TokenBucket, tokenBucketDirectiveTypeDefs, tokenBucketPlugin } from '../src/index.js';
import { disposeClients, run, serveApolloWithSockets, socketClient } from './support/adapters.js';
import { captureLogger } from './support/graphql.js';

const stops: (() => Promise<void>)[] = [];
afterEach(async () => {
  await disposeClients();
  await Promise.all(stops.splice(0).map((stop) => stop()));
});

const live = new TokenBucket('live', 1, Rate.perHour(1));
const sdl = (bucket: string) => `${tokenBucketDirectiveTypeDefs} type Query { a: Int @tokenBucket(name: "${bucket}", cost: 1) free: Int }`;

/** graphql-ws (beside Apollo Server) serving `served`, limited by a tokenBucketSubscriptions given `schema`. */
async function serve(served: GraphQLSchema, schema: Parameters<typeof tokenBucketSubscriptions>[0]['schema']) {
  const logger = captureLogger();
  const server = await serveApolloWithSockets({
    schema: served,
    logger,
    sockets: {
      ...tokenBucketSubscriptions({ store: new MemoryStore(), buckets: [live], identify: () => 'me', schema, logger }),
      roots: { query: { a: () => 1, free: () => 2 } },
    },
  });
  stops.push(() => server.stop());
  return { client: socketClient(server.wsUrl), logger };
}

describe('tokenBucketSubscriptions given the schema as a function', () => {
  it('prices each operation against the schema the function returns when it comes', async () => {
    const built: { schema?: GraphQLSchema } = {};
    const schema = buildSchema(sdl('live'));
    const { client } = await serve(schema, () => {
      if (built.schema === undefined) throw new Error('not built yet');
      return built.schema;
    });
    built.schema = schema;
    expect(await run(client, { query: '{ a }' })).toEqual({ results: [{ data: { a: 1 } }], completed: true });
    expect((await run(client, { query: '{ a }' })).errors?.map((e) => e.extensions?.['code'])).toEqual(['RATE_LIMITED']);
  });

  it('a function that fails, or returns what is not a schema, ends that operation alone; the fault is logged', async () => {
    const schema = buildSchema(sdl('live'));
    let answer: unknown = undefined;
    const { client, logger } = await serve(schema, () => {
      if (answer === undefined) throw new Error('the schema is not built yet');
      return answer as GraphQLSchema;
    });
    const internal = [{ message: 'Internal server error', extensions: { code: 'INTERNAL_SERVER_ERROR' } }];
    expect((await run(client, { query: '{ free }' })).errors).toEqual(internal);
    answer = 'schema';
    expect((await run(client, { query: '{ free }' })).errors).toEqual(internal);
    expect(logger.errors).toEqual([expect.stringContaining('the schema is not built yet'), expect.stringContaining('option "schema" returned string, not a GraphQLSchema')]);
    answer = schema;
    expect(await run(client, { query: '{ free }' })).toEqual({ results: [{ data: { free: 2 } }], completed: true });
  });

  it('a schema naming a bucket not in buckets is logged once; what it prices is refused, what it does not runs', async () => {
    const schema = buildSchema(sdl('nope'));
    const { client, logger } = await serve(schema, () => schema);
    for (let i = 0; i < 2; i++) {
      expect((await run(client, { query: '{ a }' })).errors?.map((e) => e.extensions?.['code'])).toEqual(['RATE_LIMITER_UNAVAILABLE']);
    }
    expect(await run(client, { query: '{ free }' })).toEqual({ results: [{ data: { free: 2 } }], completed: true });
    expect(logger.errors).toEqual([expect.stringMatching(/names bucket "nope", which is not in the plugin's buckets/)]);
  });

  it('throws at once for a schema option that is neither', () => {
    expect(() => tokenBucketSubscriptions({ store: new MemoryStore(), buckets: [live], identify: () => 'me', schema: 'type Query { a: Int }' as never })).toThrow(
      'tokenBucketSubscriptions option "schema" must be the GraphQLSchema given to useServer, or a function that returns it',
    );
  });

  it("Apollo Server's plugin says at start-up that subscriptions are limited over graphql-ws, not that they go unpriced", async () => {
    const schema = buildSchema(`${tokenBucketDirectiveTypeDefs} type Query { a: Int } type Subscription { s: Int @tokenBucket(name: "live", cost: 1) }`);
    const limits = { store: new MemoryStore(), buckets: [live], identify: () => 'me' };
    tokenBucketSubscriptions({ ...limits, schema: () => schema });
    const logger = { ...captureLogger(), infos: [] as string[] };
    logger.info = (message: unknown) => void logger.infos.push(String(message));
    const plugin = tokenBucketPlugin(limits);
    await plugin.serverWillStart?.({ schema, logger } as never);
    expect(logger.warnings).toEqual([]);
    expect(logger.infos).toEqual([expect.stringMatching(/are limited over graphql-ws by tokenBucketSubscriptions/)]);
  });
});
