// SPEC §6 "Since 0.4", NestJS: a NestJS application (@nestjs/core,
// @nestjs/graphql with the Apollo driver) limited by tokenBucketPlugin, as
// the manual's recipe builds it — code-first with @Directive, schema-first,
// and `rules` — answers a denied operation 429 with Retry-After, takes the
// identity from the context factory (middleware ran before it; a guard has
// not), and limits subscriptions over graphql-ws with the schema Nest built.
import type { ApolloServerPlugin, GraphQLRequestListener } from '@apollo/server';
import { Plugin } from '@nestjs/apollo';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryStore } from '../../src/index.js';
import { disposeClients, postJson, run, socketClient } from '../support/adapters.js';
import type { ResponseBody } from '../support/graphql.js';
import { RecordingStore } from '../support/graphql.js';
import { buckets, runs, startNestApp } from './apps.js';
import type { NestApp, NestAppOptions } from './apps.js';

const apps: NestApp[] = [];
afterEach(async () => {
  runs.splice(0);
  await disposeClients();
  await Promise.all(apps.splice(0).map(({ app }) => app.close()));
});

/** A MemoryStore whose clock stands still: nothing refills while a test runs. */
function stillStore(): RecordingStore {
  const now = Date.now();
  return new RecordingStore(new MemoryStore({ now: () => now }));
}

async function start(options: Partial<NestAppOptions> = {}): Promise<NestApp & { store: RecordingStore }> {
  const store = stillStore();
  const nest = await startNestApp({ store, ...options });
  apps.push(nest);
  return { ...nest, store };
}

const post = (url: string, query: string, headers: Record<string, string> = {}) => postJson<ResponseBody>(url, { query }, headers);

describe.each(['code-first', 'schema-first'] as const)('a NestJS application, %s', (form) => {
  it('answers the operation a bucket denies 429 with Retry-After and RATE_LIMITED, running no resolver', async () => {
    const { url } = await start({ form });
    const user = { 'x-user-id': `${form}-reader` };
    for (let i = 0; i < 2; i++) expect((await post(url, '{ search(term: "1") { id } }', user)).status).toBe(200);
    runs.splice(0);
    const denied = await post(url, '{ search(term: "1") { id } }', user);
    expect(denied.status).toBe(429);
    expect(denied.headers.get('retry-after')).toBe('18000');
    expect(denied.body).toEqual({
      errors: [{ message: expect.stringMatching(/^Rate limit of "search" exceeded/), extensions: { code: 'RATE_LIMITED', retryAfter: 18000, bucket: 'search', cost: 5 } }],
    });
    expect(runs).toEqual([]);
    // Another user has tokens of their own.
    expect((await post(url, '{ search(term: "1") { id } }', { 'x-user-id': `${form}-other` })).status).toBe(200);
  });

  it('prices a list by its size argument', async () => {
    const { url, store } = await start({ form });
    expect((await post(url, '{ books(first: 30) { title } }', { 'x-user-id': 'lists' })).status).toBe(200);
    expect((await post(url, '{ books { title } }', { 'x-user-id': 'lists' })).status).toBe(200);
    expect(store.calls.map((call) => call.map((r) => `${r.bucket.name}:${r.cost}`))).toEqual([['api:30'], ['api:10']]);
  });
});

describe('a NestJS application, code-first, with IBM cost weights', () => {
  it("charges a field's @cost given with @Directive, which the schema does not declare", async () => {
    const { url, store } = await start();
    expect((await post(url, '{ report }', { 'x-user-id': 'weights' })).body).toEqual({ data: { report: 7 } });
    expect(store.calls.map((call) => call.map((r) => `${r.bucket.name}:${r.cost}`))).toEqual([['api:7']]);
  });

  it("charges @Field's complexity option as the field's weight", async () => {
    const { url, store } = await start();
    const answer = await post(url, '{ shelf(first: 4) { pages } }', { 'x-user-id': 'weights' });
    expect(answer.body).toEqual({ data: { shelf: [{ pages: 100 }, { pages: 101 }, { pages: 102 }, { pages: 103 }] } });
    // 4 × (Book 1 + pages 3); without the complexity, 4 × 1
    expect(store.calls.map((call) => call.map((r) => `${r.bucket.name}:${r.cost}`))).toEqual([['api:16']]);
  });
});

describe('a size a pipe fills in', () => {
  it('is priced at the assumedSize the field declares, for the null or absent argument the pipe replaces', async () => {
    const { url, store } = await start();
    const user = { 'x-user-id': 'shelves' };
    for (const query of ['{ shelf { id } }', '{ shelf(first: null) { id } }', '{ shelf(first: 2) { id } }']) expect((await post(url, query, user)).status).toBe(200);
    expect(runs).toEqual(['shelf:30', 'shelf:30', 'shelf:2']);
    expect(store.calls.map((call) => call.map((r) => `${r.bucket.name}:${r.cost}`))).toEqual([['api:30'], ['api:30'], ['api:2']]);
  });
});

/** A "page size normaliser" as a Nest `@Plugin()`: Nest adds it after the driver's plugins, so after the limiter. */
@Plugin()
class RaisesInPlace implements ApolloServerPlugin {
  async requestDidStart(): Promise<GraphQLRequestListener<object>> {
    return {
      async didResolveOperation({ request }) {
        if (request.variables) request.variables['n'] = 30;
      },
    };
  }
}

@Plugin()
class ReplacesTheVariables implements ApolloServerPlugin {
  async requestDidStart(): Promise<GraphQLRequestListener<object>> {
    return {
      async executionDidStart({ request }) {
        request.variables = { n: 30 };
      },
    };
  }
}

describe('a @Plugin() after the limiter', () => {
  it.each([
    ['raises a size in place', RaisesInPlace],
    ['replaces the variables', ReplacesTheVariables],
  ])('that %s runs no more than was charged, and shows no internal message', async (_what, plugin) => {
    const { url, store } = await start({ providers: [plugin] });
    const answer = await postJson<ResponseBody>(url, { query: 'query($n: Int) { books(first: $n) { id } }', variables: { n: 2 } }, { 'x-user-id': 'paged' });
    const charged = store.calls.flat().reduce((sum, r) => sum + r.cost, 0);
    expect(charged).toBe(2);
    const ran = runs.map((r) => Number(r.split(':')[1])).reduce((sum, n) => sum + n, 0);
    expect(ran).toBeLessThanOrEqual(charged);
    expect((answer.body.data as { books?: unknown[] } | null | undefined)?.books?.length ?? 0).toBeLessThanOrEqual(2);
    if (answer.status !== 200) expect(answer.body.errors?.map((e) => e.message)).toEqual([expect.stringMatching(/^(Internal server error|Cannot assign to read only property 'n' of object '#<Object>')$/)]);
  });
});

describe('a NestJS application priced by rules, with no directive in its code', () => {
  it('charges as @tokenBucket would', async () => {
    const { url, store } = await start({ form: 'rules', rules: { 'Query.books': { bucket: 'api' } } });
    expect((await post(url, '{ books(first: 4) { id } }', { 'x-user-id': 'ruled' })).status).toBe(200);
    expect(store.calls.map((call) => call.map((r) => `${r.bucket.name}:${r.cost}`))).toEqual([['api:4']]);
    const never = await post(url, '{ books(first: 101) { id } }', { 'x-user-id': 'ruled' });
    expect(never.status).toBe(429);
    expect(never.body.errors?.[0]?.extensions).toEqual({ code: 'RATE_LIMITED', retryAfter: null, bucket: 'api', cost: 101 });
  });
});

describe('whose tokens', () => {
  it('identify reads what middleware put on the request; a user a guard sets is not there yet', async () => {
    const { url, identified } = await start();
    const guarded = await post(url, '{ whoami }', { 'x-guarded-user': 'alice' });
    // The guard runs with the resolver, after the limiter: identify saw no user and failed.
    expect(guarded.status).toBe(500);
    expect(guarded.body.errors?.[0]?.extensions?.['code']).toBe('INTERNAL_SERVER_ERROR');
    expect(identified).toEqual([{ user: undefined, guardedUser: undefined }]);
    expect(runs).toEqual([]);

    const viaMiddleware = await post(url, '{ whoami }', { 'x-user-id': 'alice' });
    expect(viaMiddleware.body).toEqual({ data: { whoami: 'alice' } });
    expect(identified[1]).toEqual({ user: 'alice', guardedUser: 'alice' });
  });
});

describe('subscriptions over graphql-ws, with the schema Nest built', () => {
  it('are priced when they start, and a denied one gets RATE_LIMITED while the socket lives on', async () => {
    const { wsUrl, store } = await start({ subscriptions: true });
    const client = socketClient(wsUrl, { user: 'watcher' });
    for (let i = 0; i < buckets.live.capacity; i++) {
      expect(await run(client, { query: 'subscription { ticks }' })).toEqual({ results: [{ data: { ticks: 1 } }, { data: { ticks: 2 } }], completed: true });
    }
    const denied = await run(client, { query: 'subscription { ticks }' });
    expect(denied.results).toEqual([]);
    expect(denied.errors).toEqual([{ message: expect.stringMatching(/^Rate limit of "live" exceeded/), extensions: { code: 'RATE_LIMITED', retryAfter: 3600, bucket: 'live', cost: 1 } }]);
    expect(runs).toEqual(['ticks', 'ticks']);
    // Queries over the socket are charged as over HTTP.
    expect(await run(client, { query: '{ books(first: 3) { id } }' })).toMatchObject({ results: [{ data: { books: [{ id: '1' }, { id: '2' }, { id: '3' }] } }], completed: true });
    expect(store.calls.map((call) => call.map((r) => `${r.bucket.name}:${r.cost}`))).toEqual([['live:1'], ['live:1'], ['live:1'], ['api:3']]);
  });
});
