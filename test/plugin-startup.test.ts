// SPEC §3 "At start-up": a schema the buckets cannot serve fails the server's
// start, with a message naming the schema coordinate and the bucket.
import { ApolloServer } from '@apollo/server';
import { describe, expect, it } from 'vitest';
import { MAX_BATCH_REQUESTS, MemoryStore, Rate, TokenBucket, tokenBucketDirectiveTypeDefs, tokenBucketPlugin } from '../src/index.js';
import type { TokenBucketPluginOptions } from '../src/index.js';
import { captureLogger, singleResult } from './support/graphql.js';

const search = new TokenBucket('search', 20, new Rate(1, 3000));
const api = new TokenBucket('api', 100, Rate.perMinute(100));

function server(sdl: string, buckets: TokenBucket[] = [search, api]): ApolloServer {
  return new ApolloServer({
    typeDefs: `${tokenBucketDirectiveTypeDefs}\n${sdl}`,
    resolvers: { Query: { search: () => [], hello: () => 'hi' } },
    logger: captureLogger(),
    plugins: [tokenBucketPlugin({ store: new MemoryStore(), buckets, identify: () => 'someone' })],
  });
}

async function startError(apollo: ApolloServer): Promise<string> {
  const error = await apollo.start().then(
    () => undefined,
    (reason: unknown) => reason,
  );
  await apollo.stop().catch(() => undefined);
  expect(error).toBeInstanceOf(Error);
  return (error as Error).message;
}

describe('start-up checks', () => {
  it('fails the start when a field names a bucket that is not in `buckets`', async () => {
    const message = await startError(server('type Query { search: [String] @tokenBucket(name: "serch", cost: 1) hello: String }'));
    expect(message).toContain('Query.search');
    expect(message).toContain('"serch"');
  });

  it('fails the start when a type names a bucket that is not in `buckets`', async () => {
    const message = await startError(server('type Query @tokenBucket(name: "everything") { search: [String] hello: String }'));
    expect(message).toMatch(/\bQuery\b/);
    expect(message).toContain('"everything"');
  });

  it('fails the start when an interface names a bucket that is not in `buckets`', async () => {
    const message = await startError(
      server(`
        interface Node @tokenBucket(name: "nodes") { id: ID! }
        type Item implements Node { id: ID! }
        type Query { search: [Item] hello: String }
      `),
    );
    expect(message).toContain('Node');
    expect(message).toContain('"nodes"');
  });

  it('fails the start when a fixed cost is above its bucket\'s capacity', async () => {
    const message = await startError(server('type Query { search: [String] @tokenBucket(name: "search", cost: 21) hello: String }'));
    expect(message).toContain('Query.search');
    expect(message).toContain('"search"');
    expect(message).toContain('21');
    expect(message).toContain('20');
  });

  it('names every faulty annotation, not only the first', async () => {
    const message = await startError(
      server('type Query { search: [String] @tokenBucket(name: "search", cost: 50) hello: String @tokenBucket(name: "nope") }'),
    );
    expect(message).toContain('Query.search');
    expect(message).toContain('Query.hello');
    expect(message).toContain('"nope"');
  });

  it('fails the start with no buckets at all when the schema uses one', async () => {
    const message = await startError(server('type Query { search: [String] @tokenBucket(name: "search") hello: String }', []));
    expect(message).toContain('Query.search');
    expect(message).toContain('"search"');
  });

  it('starts when a fixed cost equals the capacity, and serves the operation', async () => {
    const apollo = server('type Query { search: [String] @tokenBucket(name: "search", cost: 20) hello: String @tokenBucket(name: "api") }');
    await apollo.start();
    try {
      const result = singleResult(await apollo.executeOperation({ query: '{ search hello }' }));
      expect(result.errors).toBeUndefined();
      expect(result.data).toEqual({ search: [], hello: 'hi' });
    } finally {
      await apollo.stop();
    }
  });

  it('starts with buckets the schema does not use', async () => {
    const apollo = server('type Query { search: [String] hello: String }', [search, api, new TokenBucket('spare', 1, Rate.perSecond(1))]);
    await apollo.start();
    await apollo.stop();
  });
});

describe('options', () => {
  const valid: TokenBucketPluginOptions = { store: new MemoryStore(), buckets: [search], identify: () => 'x' };

  it('rejects a missing store, identify or buckets at construction', () => {
    expect(() => tokenBucketPlugin({ ...valid, store: undefined as never })).toThrow(/store/);
    expect(() => tokenBucketPlugin({ ...valid, identify: undefined as never })).toThrow(/identify/);
    expect(() => tokenBucketPlugin({ ...valid, buckets: undefined as never })).toThrow(/buckets/);
  });

  it('rejects two buckets of the same name', () => {
    expect(() => tokenBucketPlugin({ ...valid, buckets: [search, new TokenBucket('search', 5, Rate.perSecond(1))] })).toThrow(
      /"search"/,
    );
  });

  it('rejects more buckets than one store call takes, since an operation takes all of its in one call', () => {
    const many = (n: number) => Array.from({ length: n }, (_, i) => new TokenBucket(`b${i}`, 10, Rate.perSecond(1)));
    expect(() => tokenBucketPlugin({ ...valid, buckets: many(MAX_BATCH_REQUESTS) })).not.toThrow();
    expect(() => tokenBucketPlugin({ ...valid, buckets: many(MAX_BATCH_REQUESTS + 1) })).toThrow(
      new RangeError('tokenBucketPlugin option "buckets" holds 1001 buckets, more than the 1000 one store call takes'),
    );
  });

  it('rejects bad onStoreError, storeTimeoutMs and defaultListSize values', () => {
    expect(() => tokenBucketPlugin({ ...valid, onStoreError: 'ignore' as never })).toThrow(RangeError);
    expect(() => tokenBucketPlugin({ ...valid, storeTimeoutMs: 0 })).toThrow(RangeError);
    expect(() => tokenBucketPlugin({ ...valid, storeTimeoutMs: Number.NaN })).toThrow(RangeError);
    expect(() => tokenBucketPlugin({ ...valid, defaultListSize: -1 })).toThrow(RangeError);
    expect(() => tokenBucketPlugin({ ...valid, defaultListSize: 2.5 })).toThrow(RangeError);
  });
});
