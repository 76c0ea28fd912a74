// The schema, buckets and resolvers the Mercurius tests share: every
// resolver that runs is recorded, and no bucket refills while a test runs.
import { EventEmitter, on } from 'node:events';
import { GraphQLError } from 'graphql';
import mercurius from 'mercurius';
import type { IResolvers } from 'mercurius';
import { MemoryStore, Rate, TokenBucket, tokenBucketDirectiveTypeDefs } from '../../src/index.js';
import type { BucketKey, TokenBucket as Bucket } from '../../src/index.js';
import type { MercuriusTokenBucketOptions } from '../../src/mercurius/index.js';
import { RecordingStore } from './graphql.js';

export const schema = `${tokenBucketDirectiveTypeDefs}
directive @listSize(assumedSize: Int, slicingArguments: [String!], sizedFields: [String!], requireOneSlicingArgument: Boolean = true) on FIELD_DEFINITION
input Filter { first: Int = 500 }
type Item { id: ID! }
type Query {
  items(first: Int = 10): [Item!]! @tokenBucket(name: "api")
  filtered(filter: Filter): [Item!]! @tokenBucket(name: "api") @listSize(assumedSize: 1000, slicingArguments: ["filter.first"])
  cheap: Int @tokenBucket(name: "api", cost: 1)
  expensive: Int @tokenBucket(name: "tight", cost: 1)
  watched: Int @tokenBucket(name: "watch", cost: 1)
  boom: Int
  free: Int
}
type Mutation { buy: Int @tokenBucket(name: "api", cost: 5) }
type Subscription {
  ticks(first: Int = 3): [Item!]! @tokenBucket(name: "live") @listSize(slicingArguments: ["first"])
  held: Int! @tokenBucket(name: "live", cost: 1)
  other: Int
}
`;

// One token an hour: nothing a test spends comes back while it runs.
export const api = new TokenBucket('api', 1000, Rate.perHour(1));
export const tight = new TokenBucket('tight', 1, Rate.perHour(1));
export const watch = new TokenBucket('watch', 1, Rate.perHour(1));
export const live = new TokenBucket('live', 10, Rate.perHour(1));
export const buckets = [api, tight, watch, live];

/** `items` has only this many to give, whatever it is asked for: what `refundUnusedCost` gives back. */
export const STOCK = 7;

/** Every resolver that ran, by field name (with the size it was asked for, where it has one). */
export const runs: string[] = [];
/** What `held` waits for between its events. */
export const held = new EventEmitter();

const items = (n: number) => Array.from({ length: Math.max(0, Math.min(n, 5000)) }, (_, i) => ({ id: String(i) }));

export const resolvers: IResolvers = {
  Query: {
    items: (_: unknown, { first }: { first: number }) => (runs.push(`items:${first}`), items(Math.min(first, STOCK))),
    // A null size reads as everything: priced as the assumed 1000.
    filtered: (_: unknown, { filter }: { filter?: { first?: number | null } }) => (runs.push(`filtered:${String(filter?.first)}`), items(filter?.first ?? 1000)),
    cheap: () => (runs.push('cheap'), 1),
    expensive: () => (runs.push('expensive'), 2),
    watched: () => (runs.push('watched'), 4),
    boom: () => {
      runs.push('boom');
      throw new Error('boom');
    },
    free: () => (runs.push('free'), 5),
  },
  Mutation: { buy: () => (runs.push('buy'), 1) },
  Subscription: {
    ticks: {
      subscribe: async function* (_: unknown, { first }: { first: number }) {
        runs.push(`ticks:${first}`);
        yield { ticks: items(Math.min(first, 2)) };
        yield { ticks: items(1) };
      },
    },
    held: {
      subscribe: () => (runs.push('held'), mapped(on(held, 'event'))),
    },
    other: { subscribe: async function* () {} },
  },
};

async function* mapped(events: AsyncIterable<unknown[]>): AsyncGenerator<{ held: unknown }> {
  for await (const [n] of events) yield { held: n };
}

/** A user whose `identify` fails for the `tight` bucket, as a database that is down would. */
export const BROKEN = 'broken';
export const DATABASE_FAULT = 'pg: password authentication failed for user "billing" at 10.0.0.7:5432';

/** The user an operation is charged to: `x-user-id` over HTTP, the `user` connection parameter over the WebSocket. */
export function userOf(context: unknown): string {
  const { reply, _connectionInit: init } = context as { reply?: { request?: { headers: Record<string, unknown> } }; _connectionInit?: { user?: unknown } };
  const header = reply?.request?.headers['x-user-id'];
  return String(typeof init?.user === 'string' ? init.user : header);
}

/** `identify` by user, failing as a broken database would for BROKEN users' `tight` bucket, and as the application asks for some. */
export function identify(context: unknown, bucket: Bucket): BucketKey {
  const user = userOf(context);
  if (user.startsWith(BROKEN) && bucket === tight) throw new Error(DATABASE_FAULT);
  if (user.startsWith('unauthenticated')) throw new GraphQLError('Sign in first.', { extensions: { code: 'UNAUTHENTICATED', http: { status: 401 } } });
  if (user.startsWith('forbidden')) throw new mercurius.ErrorWithProps('Not for you.', { code: 'FORBIDDEN' }, 403);
  if (user.startsWith('nobody')) return undefined as unknown as BucketKey;
  return user;
}

/** A MemoryStore whose clock stands still, recorded. */
export function stillStore(): RecordingStore {
  const now = Date.now();
  return new RecordingStore(new MemoryStore({ now: () => now }));
}

/** The limiter's options over `store`: reports, refunds and RateLimit headers on. */
export function limits(store: RecordingStore, overrides: Partial<MercuriusTokenBucketOptions> = {}): MercuriusTokenBucketOptions {
  return { store, buckets, identify, measure: ['watch'], reportCost: true, refundUnusedCost: true, rateLimitHeaders: true, ...overrides };
}

/** What a user's bucket holds now. */
export async function left(store: RecordingStore, bucket: Bucket, key: BucketKey): Promise<number> {
  const admission = await store.acquire(bucket, key, 0);
  if (!admission.allowed) throw new Error('a cost-0 acquire was denied');
  return admission.remaining;
}

let users = 0;
/** A user no other test spends tokens of. */
export function freshUser(prefix = 'user'): string {
  users += 1;
  return `${prefix}-${users}`;
}
