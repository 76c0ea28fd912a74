// SPEC §7, rules without directives: the `rules` option maps schema
// coordinates to bucket rules exactly as @tokenBucket there would, on every
// adapter (Apollo Server, GraphQL Yoga, graphql-ws), with the same start-up
// checks: an unknown bucket, a cost above capacity, an unknown coordinate.
import { ApolloServer } from '@apollo/server';
import { makeExecutableSchema } from '@graphql-tools/schema';
import { createYoga } from 'graphql-yoga';
import { afterEach, describe, expect, it } from 'vitest';
import { useTokenBucket } from '../src/envelop/index.js';
import { tokenBucketSubscriptions } from '../src/graphql-ws/index.js';
import { MemoryStore, Rate, TokenBucket, tokenBucketPlugin } from '../src/index.js';
import type { TokenBucketRules } from '../src/index.js';
import { disposeClients, run, serveApolloWithSockets, socketClient } from './support/adapters.js';
import { serveHttp } from './support/graphql.js';
import type { ResponseBody } from './support/graphql.js';

// Code-first: no directive anywhere.
const schema = makeExecutableSchema({
  typeDefs: `
    type Query { search(term: String): [Book!]! book: Book }
    type Book { id: ID! title: String }
    type Subscription { ticks: Int! }
  `,
  resolvers: {
    Query: { search: () => [{ id: '1', title: 'Dune' }], book: () => ({ id: '2', title: 'Emma' }) },
    Subscription: {
      ticks: {
        subscribe: async function* () {
          yield { ticks: 1 };
        },
      },
    },
  },
});

const api = new TokenBucket('api', 100, Rate.perHour(1));
const search = new TokenBucket('search', 5, Rate.perHour(1));
const buckets = [api, search];
const rules: TokenBucketRules = { Query: { bucket: 'api' }, 'Query.search': [{ bucket: 'search', cost: 1 }], Subscription: { bucket: 'search', cost: 4 } };
const QUERY = '{ search(term: "a") { id } book { title } }';
// api: search 10 (default list size) × Book 1 + book 1 = 11; search: 1
const EXPECTED = { api: { cost: 11, remaining: 89, capacity: 100 }, search: { cost: 1, remaining: 4, capacity: 5 } };

const stops: (() => Promise<void>)[] = [];
afterEach(async () => {
  await disposeClients();
  await Promise.all(stops.splice(0).map((stop) => stop()));
});

function options() {
  return { store: new MemoryStore(), buckets, identify: () => 'someone', rules, reportCost: true };
}

describe('rules on every adapter', () => {
  it('Apollo Server charges them as directives', async () => {
    const server = new ApolloServer({ schema, plugins: [tokenBucketPlugin(options())] });
    const http = await serveHttp(server, async () => ({}));
    stops.push(() => server.stop());
    expect((await http.post({ query: QUERY })).body.extensions?.['rateLimit']).toEqual(EXPECTED);
  });

  it('GraphQL Yoga charges them as directives', async () => {
    const yoga = createYoga({ schema, logging: false, plugins: [useTokenBucket(options())] });
    const response = await yoga.fetch('http://yoga.test/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: QUERY }),
    });
    expect(((await response.json()) as ResponseBody).extensions?.['rateLimit']).toEqual(EXPECTED);
  });

  it('graphql-ws charges them as directives, subscriptions included', async () => {
    const server = await serveApolloWithSockets({ schema, sockets: tokenBucketSubscriptions({ schema, ...options() }) });
    stops.push(() => server.stop());
    const client = socketClient(server.wsUrl);
    const query = await run(client, { query: QUERY });
    expect(query.results[0]?.extensions?.['rateLimit']).toEqual(EXPECTED);
    const ticks = await run(client, { query: 'subscription { ticks }' });
    expect(ticks.results[0]?.data).toEqual({ ticks: 1 });
    // search: 5 - 1 (the query) - 4 (the subscription) = 0 left: the next subscription is refused.
    const refused = await run(client, { query: 'subscription { ticks }' });
    expect(refused.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', bucket: 'search', cost: 4 });
  });

  it('the start-up checks apply: unknown bucket, cost above capacity, unknown coordinate', async () => {
    const bad: [TokenBucketRules, RegExp][] = [
      [{ 'Query.search': { bucket: 'serch', cost: 1 } }, /rules\["Query.search"\] names bucket "serch", which is not in the plugin's buckets \("api", "search"\)/],
      [{ 'Query.search': { bucket: 'search', cost: 6 } }, /rules\["Query.search"\] \(bucket "search", cost 6\) costs more than the bucket's capacity of 5/],
      [{ 'Query.serch': { bucket: 'search' } }, /rules: "Query.serch" is not an object type, an interface or one of their fields in the schema/],
    ];
    for (const [given, message] of bad) {
      const settings = { ...options(), rules: given };
      const server = new ApolloServer({ schema, plugins: [tokenBucketPlugin(settings)] });
      await expect(server.start()).rejects.toThrow(message);
      expect(() => createYoga({ schema, logging: false, plugins: [useTokenBucket(settings)] })).toThrow(message);
      expect(() => tokenBucketSubscriptions({ schema, ...settings })).toThrow(message);
    }
    expect(() => tokenBucketPlugin({ ...options(), rules: { 'Query.search()': { bucket: 'search' } } })).toThrow(/is not a schema coordinate/);
    expect(() => tokenBucketPlugin({ ...options(), rules: { Query: { bucket: 'api', cost: -1 } } })).toThrow(RangeError);
  });
});
