// SPEC §6 "Since 0.4": an identity that is not one — `identify` returning
// undefined, null, an object, a symbol, NaN, a plan's bucket of another name
// — is treated as identify throwing: that operation alone ends with a
// generic error (no internal message, stack traces on or off), the fault is
// logged with the bucket's name, nothing is charged and nothing runs; the
// caller's other operations, and over graphql-ws its socket and running
// subscriptions, live on. On Apollo Server, GraphQL Yoga, graphql-ws, Apollo
// Gateway and Hive Gateway.
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { Rate, RedisStore, TokenBucket } from '../src/index.js';
import type { Identity } from '../src/index.js';
import { run, start } from './support/adapters.js';
import { redisClient, uniquePrefix } from './support/clients.js';
import { HTTP_SERVERS, graphsOfThisFile, startServer, startSockets } from './support/every-server.js';
import type { ServerSetup, TestedServer } from './support/every-server.js';
import { RecordingStore, waitFor } from './support/graphql.js';
import { tokensLeft } from './support/http-servers.js';

const redis = redisClient(inject('redisUrl'));
const shared = graphsOfThisFile(redis);
const { stops } = shared;

const api = new TokenBucket('api', 1000, Rate.perHour(1));
const login = new TokenBucket('login', 10, Rate.perHour(1));

/** What identify returns for "login", by the user's name up to its first dash. */
const NON_IDENTITIES: Record<string, () => unknown> = {
  undefined: () => undefined,
  null: () => null,
  object: () => ({ ip: '10.0.0.7' }),
  symbol: () => Symbol('login'),
  nan: () => Number.NaN,
  boolean: () => true,
  'other plan': () => ({ key: 'x', bucket: new TokenBucket('logins', 1000, Rate.perSecond(1)) }),
};

/** A product is looked up through the "login" bucket too. */
const PRODUCT = '{ product(id: "1") { id name } }';
const PRODUCTS = '{ products(first: 2) { id } }';

let users = 0;
function userOf(kind: string): string {
  users += 1;
  return `${kind}-${users}`;
}

function setup(store: RecordingStore, more: Partial<ServerSetup> = {}): ServerSetup {
  return {
    limits: { store, buckets: [api, login], rules: { 'Query.product': { bucket: 'login', cost: 1 } } },
    identify: (user, bucket) => {
      const returns = NON_IDENTITIES[user.slice(0, user.lastIndexOf('-'))];
      return (bucket === login && returns !== undefined ? returns() : user) as Identity;
    },
    ...more,
  };
}

function recordingStore(): RecordingStore {
  return new RecordingStore(new RedisStore(redis, { prefix: uniquePrefix('non-identity') }));
}

const INTERNAL = { message: 'Internal server error', extensions: { code: 'INTERNAL_SERVER_ERROR' } };

describe.each(HTTP_SERVERS)('%s', (kind) => {
  let server: TestedServer;
  let store: RecordingStore;
  beforeAll(async () => {
    store = recordingStore();
    server = await startServer(kind, shared.graphs, setup(store));
    stops.push(() => server.stop());
  });

  it.each(Object.keys(NON_IDENTITIES))('identify returning %s: a generic 500 for that operation alone, logged with the bucket, nothing charged or run', async (what) => {
    const user = userOf(what);
    const calls = store.calls.length;
    const work = server.work.total;
    const errors = server.logger.errors.length;
    const answer = await server.post({ query: PRODUCT }, user);
    expect(answer.status).toBe(500);
    expect(answer.body.errors).toEqual([INTERNAL]);
    expect(answer.body.data ?? undefined).toBeUndefined();
    expect(server.work.total).toBe(work);
    expect(store.calls.slice(calls)).toEqual([]);
    expect(await tokensLeft(store, api, user)).toBe(1000);
    const logged = server.logger.errors.slice(errors);
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatch(/^graphql-token-bucket: .*identify returned .* for bucket "login"/);
    expect(logged[0]).not.toContain('10.0.0.7');

    // The same caller's operations that do not need the identity run and are charged.
    const other = await server.post({ query: PRODUCTS }, user);
    expect(other.status).toBe(200);
    expect(other.body.errors).toBeUndefined();
  });

  it('in a batch: only that operation fails; the other runs and is charged', async () => {
    const user = userOf('undefined');
    const answer = await server.post([{ query: PRODUCTS }, { query: PRODUCT }], user);
    expect(answer.status).toBe(500);
    const bodies = answer.body as unknown as { data?: unknown; errors?: unknown[] }[];
    expect(bodies[0]?.errors).toBeUndefined();
    expect(bodies[0]?.data).toEqual({ products: [{ id: '1' }, { id: '2' }] });
    expect(bodies[1]?.errors).toEqual([INTERNAL]);
    expect(await tokensLeft(store, api, user)).toBeLessThan(1000);
  });
});

describe.each(['Apollo Server', 'Apollo Gateway'] as const)('%s with stack traces in its error responses (its default outside production)', (kind) => {
  it('shows no internal message', async () => {
    const server = await startServer(kind, shared.graphs, setup(recordingStore(), { stacktraces: true }));
    stops.push(() => server.stop());
    const answer = await server.post({ query: PRODUCT }, userOf('undefined'));
    expect(answer.status).toBe(500);
    expect(answer.body.errors?.map((e) => [e.message, e.extensions?.['code']])).toEqual([['Internal server error', 'INTERNAL_SERVER_ERROR']]);
    // Its stack trace is the generic error's own: nothing of the fault.
    expect(JSON.stringify(answer.body)).not.toMatch(/identity|"login"|undefined/);
  });
});

describe('graphql-ws', () => {
  it.each(Object.keys(NON_IDENTITIES))('identify returning %s ends that operation alone; the socket and its running subscription live on', async (what) => {
    const store = recordingStore();
    const sockets = await startSockets(shared.graphs, setup(store));
    stops.push(() => sockets.stop());
    const user = userOf(what);
    const client = sockets.client(user);
    const listening = shared.graphs.events.listenerCount('product');
    const subscription = start(client, { query: 'subscription { productChanged { id } }' });
    await waitFor('the subscription to start', 5_000, () => shared.graphs.events.listenerCount('product') > listening);
    shared.graphs.events.emit('product', '1');
    await waitFor('its first event', 5_000, () => subscription.results.length === 1);

    const calls = store.calls.length;
    const work = sockets.work.total;
    const failed = await run(client, { query: PRODUCT });
    expect(failed).toEqual({ results: [], errors: [INTERNAL], completed: false });
    expect(sockets.work.total).toBe(work);
    expect(store.calls.slice(calls)).toEqual([]);
    expect(sockets.logger.errors).toEqual([expect.stringMatching(/^graphql-token-bucket: .*identify returned .* for bucket "login"/)]);

    expect(await run(client, { query: PRODUCTS })).toMatchObject({ results: [{ data: { products: [{ id: '1' }, { id: '2' }] } }], completed: true });
    shared.graphs.events.emit('product', '2');
    await waitFor('its second event', 5_000, () => subscription.results.length === 2);
    expect(subscription.results.map((r) => r.data)).toEqual([{ productChanged: { id: '1' } }, { productChanged: { id: '2' } }]);
    subscription.cancel();
    await waitFor('the subscription to end', 5_000, () => shared.graphs.events.listenerCount('product') === listening);
  });
});
