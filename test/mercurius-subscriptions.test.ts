// SPEC §6 "Since 0.4", Mercurius over its WebSocket (a listening Fastify, a
// real graphql-ws client): a subscription is priced when it starts, with the
// variables it runs with, and a denied one is refused with RATE_LIMITED
// while the socket and its other subscriptions live on; queries and
// mutations over the socket are charged as over HTTP.
import { afterEach, describe, expect, it } from 'vitest';
import { disposeClients, run, start } from './support/adapters.js';
import { captureLogger, waitFor } from './support/graphql.js';
import type { ResponseBody } from './support/graphql.js';
import { serveMercurius } from './support/mercurius.js';
import type { MercuriusServer, ServeMercuriusOptions } from './support/mercurius.js';
import { DATABASE_FAULT, freshUser, held, left, limits, live, resolvers, runs, schema, stillStore } from './support/mercurius-schema.js';
import type { RecordingStore } from './support/graphql.js';

const servers: MercuriusServer[] = [];
afterEach(async () => {
  runs.splice(0);
  await disposeClients();
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

async function listening(store: RecordingStore, options: Partial<ServeMercuriusOptions> = {}): Promise<MercuriusServer> {
  const server = await serveMercurius({ schema, resolvers, limits: limits(store), ...options });
  servers.push(server);
  await server.listen();
  return server;
}

const TICKS = { query: 'subscription($n: Int) { ticks(first: $n) { id } }' };

describe('mercuriusTokenBucket over the WebSocket', () => {
  it('prices a subscription when it starts, with its variables, and reports it on the first event', async () => {
    const store = stillStore();
    const server = await listening(store);
    const user = freshUser();
    const outcome = await run(server.socket({ user }), { ...TICKS, variables: { n: 6 } });
    expect(outcome).toEqual({
      results: [{ data: { ticks: [{ id: '0' }, { id: '1' }] }, extensions: { rateLimit: { live: { cost: 6, remaining: 4, capacity: 10 } } } }, { data: { ticks: [{ id: '0' }] } }],
      completed: true,
    });
    expect(runs).toEqual(['ticks:6']);
    expect(await left(store, live, user)).toBe(4);
  });

  it('refuses a denied subscription with RATE_LIMITED before it starts; the socket and its running subscription live on', async () => {
    const store = stillStore();
    const server = await listening(store);
    const user = freshUser();
    const client = server.socket({ user });
    const before = held.listenerCount('event');
    const running = start(client, { query: 'subscription { held }' });
    await waitFor('the subscription to start', 5_000, () => held.listenerCount('event') > before);
    held.emit('event', 1);
    await waitFor('its first event', 5_000, () => running.results.length === 1);

    expect(await left(store, live, user)).toBe(9);
    const denied = await run(client, { ...TICKS, variables: { n: 10 } });
    expect(denied).toEqual({
      results: [],
      errors: [expect.objectContaining({ message: expect.stringMatching(/^Rate limit of "live" exceeded/), extensions: { code: 'RATE_LIMITED', retryAfter: 3600, bucket: 'live', cost: 10 } })],
      completed: false,
    });
    expect(await run(client, { ...TICKS, variables: { n: 2 } })).toMatchObject({ completed: true });

    held.emit('event', 2);
    await waitFor('its second event', 5_000, () => running.results.length === 2);
    expect(running.results.map((r) => r.data)).toEqual([{ held: 1 }, { held: 2 }]);
    running.cancel();
    expect(runs).toEqual(['held', 'ticks:2']);
  });

  it('refuses a subscription document Mercurius would run unvalidated, charging nothing', async () => {
    const store = stillStore();
    const server = await listening(store);
    const client = server.socket({ user: freshUser() });
    // Two root fields: graphql-js would subscribe to the first and resolve the second on every event.
    const refused = await run(client, { query: 'subscription { other ticks(first: 9) { id } }' });
    expect(refused.errors?.[0]?.message).toBe('Anonymous Subscription must select only one top level field.');
    expect(await run(client, { query: 'subscription { ticks(first: 1) { nope } }' })).toMatchObject({ errors: [{ message: 'Cannot query field "nope" on type "Item".' }] });
    expect(runs).toEqual([]);
    expect(store.calls).toEqual([]);
  });

  it("prices a subscription whose field's subscribe was replaced in place after one had started", async () => {
    const store = stillStore();
    const server = await listening(store);
    const user = freshUser();
    const client = server.socket({ user });
    expect(await run(client, { ...TICKS, variables: { n: 1 } })).toMatchObject({ completed: true });
    const field = server.app.graphql.schema.getSubscriptionType()?.getFields()['ticks'];
    if (field === undefined) throw new Error('no ticks field');
    field.subscribe = async function* () {
      runs.push('replaced');
      yield { ticks: [{ id: 'r' }] };
    };
    expect(await run(client, { ...TICKS, variables: { n: 4 } })).toMatchObject({ results: [{ data: { ticks: [{ id: 'r' }] } }], completed: true });
    expect(runs).toEqual(['ticks:1', 'replaced']);
    expect(await left(store, live, user)).toBe(5);
  });

  it('identify failing ends that subscription alone with a generic error; the fault is logged', async () => {
    const store = stillStore();
    const logger = captureLogger();
    const server = await listening(store, { limits: limits(store, { logger, identify: () => Promise.reject(new Error(DATABASE_FAULT)) }) });
    const client = server.socket({ user: freshUser() });
    const failed = await run(client, TICKS);
    expect(failed.errors?.map(({ message, extensions }) => ({ message, extensions }))).toEqual([{ message: 'Internal server error', extensions: { code: 'INTERNAL_SERVER_ERROR' } }]);
    expect(JSON.stringify(failed)).not.toContain('10.0.0.7');
    expect(logger.errors).toEqual([expect.stringContaining(DATABASE_FAULT)]);
    expect(await run(client, { query: 'subscription { other }' })).toEqual({ results: [], completed: true });
    expect(runs).toEqual([]);
  });

  it('identify returning what is not an identity ends that operation alone; the socket and its running subscription live on', async () => {
    const store = stillStore();
    const logger = captureLogger();
    // No key for `ticks` (its context prints the operation it runs), one for `held`.
    const identify = (context: unknown) => (String((context as { __currentQuery?: unknown }).__currentQuery).includes('ticks') ? (undefined as unknown as string) : 'reader');
    const server = await listening(store, { limits: limits(store, { logger, identify }) });
    const client = server.socket({ user: freshUser() });
    // Subscriptions of tests before may still be leaving.
    const before = held.listenerCount('event');
    const running = start(client, { query: 'subscription { held }' });
    await waitFor('the subscription to start', 5_000, () => held.listenerCount('event') > before);
    held.emit('event', 1);
    await waitFor('its first event', 5_000, () => running.results.length === 1);
    const failed = await run(client, TICKS);
    expect(failed).toEqual({ results: [], errors: [{ message: 'Internal server error', locations: [{ line: 1, column: 25 }], path: ['ticks'], extensions: { code: 'INTERNAL_SERVER_ERROR' } }], completed: false });
    held.emit('event', 2);
    await waitFor('its second event', 5_000, () => running.results.length === 2);
    expect(running.results.map((r) => r.data)).toEqual([{ held: 1 }, { held: 2 }]);
    expect(logger.errors).toEqual([expect.stringMatching(/identify returned undefined for bucket "live", which is not an identity/)]);
    expect(runs).toEqual(['held']);
    running.cancel();
  });

  it('a subscription whose variables do not coerce is refused before it is priced: nothing charged', async () => {
    const store = stillStore();
    const server = await listening(store);
    const user = freshUser();
    const refused = await run(server.socket({ user }), { ...TICKS, variables: { n: 'many' } });
    expect(refused.results).toEqual([]);
    expect(refused.errors?.[0]?.message).toMatch(/^Variable "\$n" got invalid value "many"/);
    expect(store.calls).toEqual([]);
    expect(runs).toEqual([]);
  });

  it.each([
    ['an enforced bucket', [], { results: [], errors: ['RATE_LIMITER_UNAVAILABLE'] }],
    ['only measured buckets', ['live'], { results: 2, errors: [] }],
  ] as const)('a failing store under onStoreError deny, a subscription priced by %s', async (_what, measure, expected) => {
    const failing = stillStore();
    failing.inner.acquireAll = () => Promise.reject(new Error('ECONNREFUSED 10.0.0.8:6379'));
    failing.inner.acquire = () => Promise.reject(new Error('ECONNREFUSED 10.0.0.8:6379'));
    const logger = captureLogger();
    const server = await listening(failing, { limits: limits(failing, { logger, onStoreError: 'deny', measure: [...measure] }) });
    // What start-up said (the events' lists not charged) aside.
    const startUp = logger.warnings.length;
    const client = server.socket({ user: freshUser() });
    const outcome = await run(client, { ...TICKS, variables: { n: 1 } });
    expect({ results: expected.results === 2 ? outcome.results.length : outcome.results, errors: (outcome.errors ?? []).map((e) => e.extensions?.['code']) }).toEqual(expected);
    expect(JSON.stringify(outcome)).not.toContain('10.0.0.8');
    expect(logger.warnings.slice(startUp)).toEqual([expect.stringMatching(/^graphql-token-bucket: store failed, (denying|allowing) the operation/)]);
    // The socket lives on.
    expect(await run(client, { query: 'subscription { other }' })).toEqual({ results: [], completed: true });
  });

  it('says at start-up that the lists its subscriptions\' events carry are not charged, unless chargeEachEvent is on', async () => {
    const store = stillStore();
    const quiet = captureLogger();
    servers.push(await serveMercurius({ schema, resolvers, limits: limits(store, { logger: quiet, chargeEachEvent: true }) }));
    expect(quiet.warnings).toEqual([]);
    const logger = captureLogger();
    servers.push(await serveMercurius({ schema, resolvers, limits: limits(store, { logger }) }));
    expect(logger.warnings).toEqual([
      'graphql-token-bucket: mercuriusTokenBucket charges a subscription once, when it starts (chargeEachEvent is false), but its events carry lists (Subscription.ticks) ' +
        'whose size the schema prices: the work of each event is not charged. Set chargeEachEvent: true to charge every event as it is sent.',
    ]);
  });

  it('charges each event with chargeEachEvent, and ends the subscription with RATE_LIMITED when one is denied', async () => {
    const store = stillStore();
    const server = await listening(store, { limits: limits(store, { chargeEachEvent: true }) });
    const user = freshUser();
    const client = server.socket({ user });
    // Start 3, first event 3: the second event finds 4 left of 10.
    const outcome = await run(client, { ...TICKS, variables: { n: 3 } });
    expect(outcome.results).toEqual([{ data: { ticks: [{ id: '0' }, { id: '1' }] }, extensions: { rateLimit: { live: { cost: 3, remaining: 4, capacity: 10 } } } }, { data: { ticks: [{ id: '0' }] }, extensions: { rateLimit: { live: { cost: 3, remaining: 1, capacity: 10 } } } }]);
    const denied = await run(client, { ...TICKS, variables: { n: 1 } });
    expect(denied.results).toEqual([]);
    expect(denied.errors?.[0]?.extensions?.['code']).toBe('RATE_LIMITED');
    expect(await left(store, live, user)).toBe(0);
  });

  it('charges queries and mutations sent over the socket as over HTTP', async () => {
    const store = stillStore();
    const server = await listening(store, { mercurius: { subscription: { fullWsTransport: true } } });
    const client = server.socket({ user: freshUser() });
    const first = await run(client, { query: '{ expensive }' });
    expect(first).toEqual({ results: [{ data: { expensive: 2 }, extensions: { rateLimit: { tight: { cost: 1, actualCost: 1, remaining: 0, capacity: 1 } } } }], completed: true });
    const denied = await run(client, { query: '{ expensive }' });
    expect((denied.errors ?? (denied.results[0] as ResponseBody | undefined)?.errors)?.map((e) => e.extensions?.['code'])).toEqual(['RATE_LIMITED']);
    expect(runs).toEqual(['expensive']);
  });
});
