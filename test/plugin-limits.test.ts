// SPEC §3 through `executeOperation`: what an operation is charged, that a
// denial runs no resolver and takes nothing, `reportCost`, and `identify`.
import { ApolloServer } from '@apollo/server';
import type { BaseContext, GraphQLRequestContext } from '@apollo/server';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryStore, Rate, TokenBucket, tokenBucketDirectiveTypeDefs, tokenBucketPlugin } from '../src/index.js';
import type { BucketKey, TokenBucketPluginOptions } from '../src/index.js';
import { RecordingStore, captureLogger, errorCodes, singleResult } from './support/graphql.js';
import type { ResponseBody } from './support/graphql.js';

interface Context extends BaseContext {
  user: string;
  org?: string;
}

const typeDefs = `${tokenBucketDirectiveTypeDefs}
type Query {
  search(term: String!): [Item!]! @tokenBucket(name: "search", cost: 5)
  items(first: Int = 10): [Item!]! @tokenBucket(name: "items")
  a: Int @tokenBucket(name: "a", cost: 3)
  b: Int @tokenBucket(name: "b", cost: 3)
  free: Int
}
type Item {
  id: ID!
  title: String!
  related(first: Int = 2): [Item!]!
}
type Mutation {
  post(text: String!): Boolean! @tokenBucket(name: "a", cost: 1)
}
`;

// Slow rates: nothing refills a whole token while a test runs, so `remaining` is exact.
const search = new TokenBucket('search', 20, new Rate(1, 3000));
const items = new TokenBucket('items', 100, Rate.perMinute(100));
const a = new TokenBucket('a', 10, Rate.perHour(60));
const b = new TokenBucket('b', 5, Rate.perHour(5));
const allBuckets = [search, items, a, b];

interface Harness {
  run(query: string, context?: Partial<Context>, variables?: Record<string, unknown>): Promise<ResponseBody & { status: number | undefined }>;
  store: RecordingStore;
  /** Resolver calls by `Type.field`. */
  calls: Map<string, number>;
  /** What tokens `key` has left in `bucket`, read with a cost-0 acquire. */
  left(bucket: TokenBucket, key: BucketKey): Promise<number>;
}

const servers: ApolloServer<Context>[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

async function harness(options: Partial<TokenBucketPluginOptions<Context>> = {}): Promise<Harness> {
  const calls = new Map<string, number>();
  const count = <T>(coordinate: string, value: T) => () => {
    calls.set(coordinate, (calls.get(coordinate) ?? 0) + 1);
    return value;
  };
  const item = { id: '1', title: 'One' };
  const store = new RecordingStore(new MemoryStore());
  const server = new ApolloServer<Context>({
    typeDefs,
    resolvers: {
      Query: {
        search: count('Query.search', [item]),
        items: count('Query.items', [item]),
        a: count('Query.a', 1),
        b: count('Query.b', 2),
        free: count('Query.free', 3),
      },
      Item: { related: count('Item.related', [item]) },
      Mutation: { post: count('Mutation.post', true) },
    },
    logger: captureLogger(),
    includeStacktraceInErrorResponses: false,
    plugins: [
      tokenBucketPlugin<Context>({
        store,
        buckets: allBuckets,
        identify: ({ contextValue }) => contextValue.user,
        ...options,
      }),
    ],
  });
  servers.push(server);
  await server.start();
  return {
    store,
    calls,
    async run(query, context = {}, variables) {
      const response = await server.executeOperation(
        variables === undefined ? { query } : { query, variables },
        { contextValue: { user: 'alice', ...context } },
      );
      return { ...singleResult(response), status: response.http.status };
    },
    async left(bucket, key) {
      const admission = await store.acquire(bucket, key, 0);
      if (!admission.allowed) throw new Error('a cost-0 acquire was denied');
      return admission.remaining;
    },
  };
}

function rateLimit(body: ResponseBody): unknown {
  return body.extensions?.['rateLimit'];
}

describe('denial', () => {
  it('runs no resolver of a denied operation, on any bucket, and answers RATE_LIMITED', async () => {
    const h = await harness();
    const first = await h.run('{ a b free }');
    expect(first.data).toEqual({ a: 1, b: 2, free: 3 });
    const before = new Map(h.calls);

    const denied = await h.run('{ a b free }');
    expect(denied.status).toBe(429);
    expect(denied.data).toBeUndefined();
    expect(denied.errors).toEqual([
      { message: expect.any(String), extensions: { code: 'RATE_LIMITED', retryAfter: expect.any(Number), bucket: 'b', cost: 3 } },
    ]);
    expect(h.calls).toEqual(before);
  });

  it('runs no resolver of a denied mutation or of nested fields', async () => {
    const h = await harness();
    const drained = await h.run('{ s1: search(term: "x") { id } s2: search(term: "x") { id } s3: search(term: "x") { id } s4: search(term: "x") { id } }');
    expect(drained.errors).toBeUndefined();
    h.calls.clear();
    const denied = await h.run('{ search(term: "x") { id related { id } } }');
    expect(errorCodes(denied)).toEqual(['RATE_LIMITED']);
    expect(h.calls.size).toBe(0);

    for (let i = 0; i < 10; i++) expect((await h.run('mutation { post(text: "hi") }')).data).toEqual({ post: true });
    const mutation = await h.run('mutation { post(text: "one too many") }');
    expect(mutation.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', bucket: 'a', cost: 1 });
    expect(h.calls.get('Mutation.post')).toBe(10);
  });

  it('takes nothing from a bucket that had enough when another bucket of the operation is short', async () => {
    const h = await harness();
    expect((await h.run('{ a b }')).errors).toBeUndefined();
    expect(await h.left(a, 'alice')).toBe(7);
    expect(await h.left(b, 'alice')).toBe(2);

    for (let i = 0; i < 3; i++) expect(errorCodes(await h.run('{ a b }'))).toEqual(['RATE_LIMITED']);
    expect(await h.left(a, 'alice')).toBe(7);
    expect(await h.left(b, 'alice')).toBe(2);
    // `a` alone still has its 7 tokens.
    expect((await h.run('{ a }')).data).toEqual({ a: 1 });
    expect(await h.left(a, 'alice')).toBe(4);
  });

  it('reports the bucket with the longest wait when several are short, and that wait', async () => {
    const h = await harness();
    await h.run('{ a b }'); // a: 7 left, b: 2 left
    // a needs 9 (2 short at 1 a minute: 120 s); b needs 3 (1 short at 1 per 12 minutes: 720 s).
    const denied = await h.run('{ x1: a x2: a x3: a b }');
    const extensions = denied.errors?.[0]?.extensions;
    expect(extensions).toMatchObject({ code: 'RATE_LIMITED', bucket: 'b', cost: 3 });
    expect(extensions?.['retryAfter']).toBeGreaterThan(719);
    expect(extensions?.['retryAfter']).toBeLessThanOrEqual(720);
  });

  it('answers an operation above a capacity with retryAfter null, running nothing and calling no store', async () => {
    const h = await harness();
    // items is charged its complexity: 200 x (Item 1 + title 0 + related 0 x (1 + id 0)) = 200 > 100.
    const denied = await h.run('{ items(first: 200) { title related(first: 0) { id } } free }');
    expect(denied.status).toBe(429);
    expect(denied.errors).toEqual([
      { message: expect.any(String), extensions: { code: 'RATE_LIMITED', retryAfter: null, bucket: 'items', cost: 200 } },
    ]);
    expect(h.calls.size).toBe(0);
    expect(h.store.calls).toEqual([]);
  });

  it('makes no store call for an operation that touches no annotated field', async () => {
    const h = await harness({ reportCost: true });
    const result = await h.run('{ free __typename }');
    expect(result.data).toEqual({ free: 3, __typename: 'Query' });
    expect(result.extensions).toBeUndefined();
    expect(h.store.calls).toEqual([]);
  });

  it('takes every bucket of an operation in one store call', async () => {
    const h = await harness();
    // items: 2 x (Item 1 + id 0) = 2
    await h.run('{ a b search(term: "x") { id } items(first: 2) { id } }');
    expect(h.store.calls).toHaveLength(1);
    expect(h.store.calls[0]!.map((r) => [r.bucket.name, r.key, r.cost]).sort()).toEqual([
      ['a', 'alice', 3],
      ['b', 'alice', 3],
      ['items', 'alice', 2],
      ['search', 'alice', 5],
    ]);
  });
});

describe('reportCost', () => {
  it('adds { cost, remaining, capacity } per bucket to each response', async () => {
    const h = await harness({ reportCost: true });
    const query = '{ search(term: "x") { id } items(first: 3) { title related(first: 2) { id } } }';
    // items: 3 x (Item 1 + title 0 + related 2 x (Item 1 + id 0)) = 9.
    const first = await h.run(query);
    expect(first.data).toBeDefined();
    expect(first.extensions).toEqual({
      rateLimit: { search: { cost: 5, remaining: 15, capacity: 20 }, items: { cost: 9, remaining: 91, capacity: 100 } },
    });
    const second = await h.run(query);
    expect(rateLimit(second)).toEqual({
      search: { cost: 5, remaining: 10, capacity: 20 },
      items: { cost: 9, remaining: 82, capacity: 100 },
    });
  });

  it('reports nothing by default', async () => {
    const h = await harness();
    const result = await h.run('{ search(term: "x") { id } }');
    expect(result.data).toBeDefined();
    expect(result.extensions).toBeUndefined();
  });
});

describe('cost of aliases, fragments and variables', () => {
  it('charges each alias of a fixed-cost field', async () => {
    const h = await harness({ reportCost: true });
    const result = await h.run('{ one: search(term: "x") { id } two: search(term: "y") { title } }');
    expect(rateLimit(result)).toEqual({ search: { cost: 10, remaining: 10, capacity: 20 } });
    expect(h.calls.get('Query.search')).toBe(2);
  });

  it('expands named and inline fragments with sizes from variables and defaults', async () => {
    const h = await harness({ reportCost: true });
    const query = `
      query Page($n: Int!) { ...Page }
      fragment Page on Query { items(first: $n) { ...ItemFields ... on Item { more: related { id } } } }
      fragment ItemFields on Item { title related(first: 3) { id } }
    `;
    // n x (Item 1 + related 3 x (1 + 0) + more 2 x (1 + 0)) = 6n.
    expect(rateLimit(await h.run(query, {}, { n: 4 }))).toEqual({ items: { cost: 24, remaining: 76, capacity: 100 } });
    expect(rateLimit(await h.run(query, {}, { n: 0 }))).toEqual({ items: { cost: 0, remaining: 76, capacity: 100 } });
    // The default `first: 10` when the argument is left out: 10 x (1 + related 2 x 1) = 30.
    expect(rateLimit(await h.run('{ items { related { id } } }'))).toEqual({ items: { cost: 30, remaining: 46, capacity: 100 } });
  });

  it('does not charge a field left out by @skip or @include from a variable', async () => {
    const h = await harness({ reportCost: true });
    const query = 'query ($skip: Boolean!, $more: Boolean!) { search(term: "x") @skip(if: $skip) { id } a @include(if: $more) b }';
    const result = await h.run(query, {}, { skip: true, more: false });
    expect(result.data).toEqual({ b: 2 });
    expect(rateLimit(result)).toEqual({ b: { cost: 3, remaining: 2, capacity: 5 } });
    expect(h.store.calls[0]!.map((r) => r.bucket.name)).toEqual(['b']);
  });

  it('charges only the operation selected by operationName', async () => {
    const h = await harness({ reportCost: true });
    const document = 'query Cheap { a } query Dear { search(term: "x") { id } b }';
    const response = await servers[0]!.executeOperation(
      { query: document, operationName: 'Cheap' },
      { contextValue: { user: 'alice' } },
    );
    expect(rateLimit(singleResult(response))).toEqual({ a: { cost: 3, remaining: 7, capacity: 10 } });
    expect(h.store.calls).toHaveLength(1);
  });
});

describe('identify', () => {
  it('keeps the tokens of two identities apart', async () => {
    const h = await harness();
    expect((await h.run('{ b }', { user: 'alice' })).data).toEqual({ b: 2 });
    expect(errorCodes(await h.run('{ b }', { user: 'alice' }))).toEqual(['RATE_LIMITED']);
    expect((await h.run('{ b }', { user: 'bob' })).data).toEqual({ b: 2 });
    expect(errorCodes(await h.run('{ b }', { user: 'alice' }))).toEqual(['RATE_LIMITED']);
    expect(await h.left(b, 'alice')).toBe(2);
    expect(await h.left(b, 'bob')).toBe(2);
    expect(await h.left(b, 'carol')).toBe(5);
  });

  it('is asked once per touched bucket, with the request context and that bucket', async () => {
    const seen: { bucket: TokenBucket; context: Context; query: string | undefined }[] = [];
    const identify = (requestContext: GraphQLRequestContext<Context>, bucket: TokenBucket): string => {
      seen.push({ bucket, context: requestContext.contextValue, query: requestContext.request.query });
      return requestContext.contextValue.user;
    };
    const h = await harness({ identify });
    await h.run('{ a b free }', { user: 'dave' });
    expect(seen.map((s) => s.bucket).sort((x, y) => x.name.localeCompare(y.name))).toEqual([a, b]);
    expect(seen.every((s) => s.context.user === 'dave' && s.query === '{ a b free }')).toBe(true);

    seen.length = 0;
    await h.run('{ free }', { user: 'dave' });
    expect(seen).toEqual([]);
  });

  it('may key each bucket differently, and may answer asynchronously', async () => {
    const h = await harness({
      identify: async ({ contextValue }, bucket) => (bucket === b ? `org:${contextValue.org ?? 'none'}` : contextValue.user),
    });
    expect((await h.run('{ a b }', { user: 'erin', org: 'acme' })).errors).toBeUndefined();
    // Frank is in the same organisation: `b` is shared, `a` is his own.
    const frank = await h.run('{ a b }', { user: 'frank', org: 'acme' });
    expect(frank.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', bucket: 'b' });
    expect((await h.run('{ a }', { user: 'frank', org: 'acme' })).data).toEqual({ a: 1 });
    expect(await h.left(b, 'org:acme')).toBe(2);
    expect(await h.left(a, 'erin')).toBe(7);
    expect(await h.left(a, 'frank')).toBe(7);
  });

  it.each([
    ['returns undefined', () => undefined],
    ['returns an object', () => ({ id: 7 })],
    ['returns NaN', () => Number.NaN],
    ['throws', () => {
      throw new Error('no user in context');
    }],
  ])('fails the operation when identify %s, even with onStoreError allow: nothing runs, no store call', async (_name, identify) => {
    const h = await harness({ identify: identify as unknown as TokenBucketPluginOptions<Context>['identify'], onStoreError: 'allow' });
    const result = await h.run('{ a free }');
    expect(result.data).toBeUndefined();
    expect(result.errors).toHaveLength(1);
    expect(h.calls.size).toBe(0);
    expect(h.store.calls).toEqual([]);
    expect((await h.run('{ free }')).data).toEqual({ free: 3 });
  });

  it('accepts number and bigint keys without mixing them up with other identities', async () => {
    const h = await harness({ identify: ({ contextValue }) => (contextValue.user === 'n' ? 42 : 42n ** 3n) });
    expect((await h.run('{ b }', { user: 'n' })).data).toEqual({ b: 2 });
    expect((await h.run('{ b }', { user: 'big' })).data).toEqual({ b: 2 });
    expect(await h.left(b, 42)).toBe(2);
    expect(await h.left(b, 42n ** 3n)).toBe(2);
  });
});
