import { readFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { ApolloServer } from '@apollo/server';
import type { BaseContext } from '@apollo/server';
import type { Redis } from 'ioredis';
import {
  MemoryStore,
  Rate,
  RedisStore,
  TokenBucket,
  tokenBucketDirectiveTypeDefs,
  tokenBucketPlugin,
} from '../src/index.js';
import type { BucketStore, TokenBucketPluginOptions } from '../src/index.js';

export interface ExampleContext extends BaseContext {
  /** The client's address: login attempts are limited per address. */
  ip: string;
  /** `x-user-id` header: everything else is limited per user (or per address without one). */
  user: string | undefined;
}

export const buckets = {
  api: new TokenBucket('api', 1000, Rate.perMinute(1000)),
  search: new TokenBucket('search', 20, new Rate(1, 3000)),
  export: new TokenBucket('export', 500, Rate.perMinute(500)),
  login: new TokenBucket('login', 5, Rate.perMinute(5)),
};

export const typeDefs = `${tokenBucketDirectiveTypeDefs}\n${readFileSync(new URL('../schema/example.graphql', import.meta.url), 'utf8')}`;

const books = Array.from({ length: 50 }, (_, i) => ({ id: String(i + 1), title: `Book ${i + 1}`, author: { name: `Author ${(i % 7) + 1}` } }));

const resolvers = {
  Query: {
    search: (_: unknown, { term, first }: { term: string; first: number }) =>
      books.filter((b) => b.title.toLowerCase().includes(term.toLowerCase())).slice(0, Math.max(0, first)),
    export: (_: unknown, { rows }: { rows: number }) =>
      Array.from({ length: Math.max(0, Math.min(rows, 10_000)) }, (_, i) => ({ id: String(i), cells: [`r${i}c1`, `r${i}c2`] })),
    books: (_: unknown, { first }: { first: number }) => books.slice(0, Math.max(0, first)),
    book: (_: unknown, { id }: { id: string }) => books.find((b) => b.id === id) ?? null,
  },
  Author: {
    books: (author: { name: string }, { first }: { first: number }) => books.filter((b) => b.author.name === author.name).slice(0, Math.max(0, first)),
  },
  Mutation: {
    login: (_: unknown, { password }: { email: string; password: string }) =>
      password === 'hunter2' ? { ok: true, token: 'example-token' } : { ok: false, token: null },
  },
};

export interface ExampleOptions {
  store?: BucketStore;
  plugin?: Partial<TokenBucketPluginOptions<ExampleContext>>;
}

/** The example's Apollo server, with `MemoryStore` unless a store is given. */
export function createExampleServer(options: ExampleOptions = {}): ApolloServer<ExampleContext> {
  return new ApolloServer<ExampleContext>({
    typeDefs,
    resolvers,
    allowBatchedHttpRequests: true,
    includeStacktraceInErrorResponses: false,
    plugins: [
      tokenBucketPlugin<ExampleContext>({
        store: options.store ?? new MemoryStore(),
        buckets: Object.values(buckets),
        identify: ({ contextValue }, bucket) => (bucket === buckets.login ? contextValue.ip : (contextValue.user ?? contextValue.ip)),
        reportCost: true,
        // Apollo Sandbox introspects this server (about 15,000 tokens of `api`
        // with the default list size); production servers turn introspection off.
        chargeIntrospection: false,
        ...options.plugin,
      }),
    ],
  });
}

export function exampleContext({ req }: { req: IncomingMessage }): Promise<ExampleContext> {
  const user = req.headers['x-user-id'];
  return Promise.resolve({ ip: req.socket.remoteAddress ?? 'unknown', user: typeof user === 'string' && user !== '' ? user : undefined });
}

/** `REDIS_URL` set: a RedisStore shared by every replica; else this process's memory. */
export function storeFromEnvironment(redis: Redis | undefined): BucketStore {
  return redis ? new RedisStore(redis) : new MemoryStore();
}
