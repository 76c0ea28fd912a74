// SPEC §4, the IETF RateLimit header fields (draft-ietf-httpapi-ratelimit-headers):
// the exact strings for known bucket states, and through real HTTP on Apollo
// Server and GraphQL Yoga on admitted and denied responses and in batches.
import { afterEach, describe, expect, it } from 'vitest';
import { RateLimitFields, rateLimitItem, rateLimitPolicyItem } from '../src/core/ratelimit-headers.js';
import { MemoryStore, Rate, TokenBucket, tokenBucketDirectiveTypeDefs } from '../src/index.js';
import type { BucketStore, LimiterOptions } from '../src/index.js';
import { SERVERS, startHttpServer, tokensLeft } from './support/http-servers.js';
import type { RunningHttpServer, ServerKind } from './support/http-servers.js';
import type { ResponseBody } from './support/graphql.js';

/**
 * RFC 9651 §3.1: a List of Items, members separated by `,` and optional
 * spaces; here each Item a String with Integer parameters (at most 15 digits).
 */
const SF_ITEM = /"[A-Za-z0-9_.-]{1,64}"(?:;[a-z*][a-z0-9_.*-]*=\d{1,15})+/;
const SF_LIST = new RegExp(`^${SF_ITEM.source}(?:, ${SF_ITEM.source})*$`);

describe('the field values', () => {
  const api = new TokenBucket('api', 1000, Rate.perMinute(1000));
  const search = new TokenBucket('search', 20, new Rate(1, 3000));

  it('gives a policy its capacity as q and the seconds an empty bucket takes to refill as w', () => {
    expect(rateLimitPolicyItem(api)).toBe('"api";q=1000;w=60');
    expect(rateLimitPolicyItem(search)).toBe('"search";q=20;w=60');
    expect(rateLimitPolicyItem(new TokenBucket('hourly', 10, Rate.perHour(10)))).toBe('"hourly";q=10;w=3600');
    // 10 tokens at 3 per 1.0005 s: 3.335 s, rounded up.
    expect(rateLimitPolicyItem(new TokenBucket('odd', 10, new Rate(3, 1000.5)))).toBe('"odd";q=10;w=4');
    // Exactly a whole number of seconds is not rounded up past it, at any size.
    expect(rateLimitPolicyItem(new TokenBucket('exact', 3_000_000_000, Rate.perSecond(1_000_000)))).toBe('"exact";q=3000000000;w=3000');
    // Faster than a token a second: a whole second at least.
    expect(rateLimitPolicyItem(new TokenBucket('fast', 5, Rate.perSecond(10_000_000)))).toBe('"fast";q=5;w=1');
  });

  it('gives a state its whole tokens as r and the seconds until the bucket is full again as t', () => {
    expect(rateLimitItem(api, 993)).toBe('"api";r=993;t=1');
    expect(rateLimitItem(api, 1000)).toBe('"api";r=1000;t=0');
    expect(rateLimitItem(api, 0)).toBe('"api";r=0;t=60');
    expect(rateLimitItem(api, 940)).toBe('"api";r=940;t=4');
    expect(rateLimitItem(search, 15)).toBe('"search";r=15;t=15');
    expect(rateLimitItem(search, 0)).toBe('"search";r=0;t=60');
  });

  it('sends a bucket of capacity 0 without a window (w must not be 0)', () => {
    const zero = new TokenBucket('zero', 0, Rate.perSecond(1));
    expect(rateLimitPolicyItem(zero)).toBe('"zero";q=0');
    expect(rateLimitItem(zero, 0)).toBe('"zero";r=0;t=0');
  });

  it('keeps every number an sf-integer (15 digits) at the largest capacity and the slowest rate', () => {
    const largest = new TokenBucket('largest', Number.MAX_SAFE_INTEGER, Rate.perSecond(10_000_000));
    expect(rateLimitPolicyItem(largest)).toBe('"largest";q=999999999999999;w=900719926');
    expect(rateLimitItem(largest, Number.MAX_SAFE_INTEGER)).toBe('"largest";r=999999999999999;t=0');
    expect(rateLimitItem(largest, 0)).toBe('"largest";r=0;t=900719926');
    // Just under a hundred years for a full refill, the longest a bucket may take.
    const slow = new TokenBucket('slow', 3_000, Rate.perHour(1));
    expect(rateLimitPolicyItem(slow)).toBe('"slow";q=3000;w=10800000');
    expect(rateLimitItem(slow, 2_999)).toBe('"slow";r=2999;t=3600');
  });

  it('never reports more than the capacity, nor less than nothing', () => {
    expect(rateLimitItem(api, 1001)).toBe('"api";r=1000;t=0');
    expect(rateLimitItem(api, -3)).toBe('"api";r=0;t=60');
    expect(rateLimitItem(api, 992.7)).toBe('"api";r=992;t=1');
  });

  it('lists each bucket once, keeping its lowest r, as a Structured Field List', () => {
    const fields = new RateLimitFields();
    fields.add(api, 993);
    fields.add(search, 15);
    fields.add(api, 990);
    fields.add(api, 995);
    fields.add(search, undefined);
    expect(fields.policy()).toBe('"api";q=1000;w=60, "search";q=20;w=60');
    expect(fields.rateLimit()).toBe('"api";r=990;t=1, "search";r=15;t=15');
    expect(fields.policy()).toMatch(SF_LIST);
    expect(fields.rateLimit()).toMatch(SF_LIST);
  });

  it('sends only the policy of a bucket whose tokens were not read', () => {
    const fields = new RateLimitFields();
    fields.add(search, undefined);
    expect(fields.policy()).toBe('"search";q=20;w=60');
    expect(fields.rateLimit()).toBeUndefined();
    const headers = new Map<string, string>();
    fields.writeTo(headers);
    expect([...headers]).toEqual([['ratelimit-policy', '"search";q=20;w=60']]);
  });
});

const typeDefs = `${tokenBucketDirectiveTypeDefs}
type Query {
  ping: Int @tokenBucket(name: "ping", cost: 2)
  pong: Int @tokenBucket(name: "pong", cost: 3)
  many(first: Int!): [Thing!]!
  free: Int
}
type Thing { id: ID! @tokenBucket(name: "ping", cost: 1) }
`;
// Slow enough that nothing visible refills during a test.
const ping = new TokenBucket('ping', 10, Rate.perHour(10));
const pong = new TokenBucket('pong', 5, Rate.perHour(5));
const resolvers = { Query: { ping: () => 1, pong: () => 2, many: () => [], free: () => 0 } };

const running: RunningHttpServer[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.stop()));
});

let users = 0;
const freshUser = (): string => `ratelimit-headers-${++users}`;

describe.each(SERVERS)('RateLimit-Policy and RateLimit on %s', (kind: ServerKind) => {
  async function serve(limits: Partial<Omit<LimiterOptions<unknown>, 'identify'>> = {}) {
    const store: BucketStore = limits.store ?? new MemoryStore();
    const server = await startHttpServer(kind, { typeDefs, resolvers, limits: { store, buckets: [ping, pong], rateLimitHeaders: true, ...limits } });
    running.push(server);
    const post = <TBody = ResponseBody>(payload: unknown, user: string, headers: Record<string, string> = {}) =>
      server.post<TBody>(payload, { 'x-user': user, ...headers });
    return { store, post };
  }

  it('on an admitted operation: one item per charged bucket, what each holds after it', async () => {
    const { post } = await serve();
    const user = freshUser();
    const first = await post({ query: '{ ping pong }' }, user);
    expect(first.status).toBe(200);
    expect(first.headers.get('ratelimit-policy')).toBe('"ping";q=10;w=3600, "pong";q=5;w=3600');
    expect(first.headers.get('ratelimit')).toBe('"ping";r=8;t=720, "pong";r=2;t=2160');

    const second = await post({ query: '{ ping }' }, user);
    expect(second.headers.get('ratelimit-policy')).toBe('"ping";q=10;w=3600');
    expect(second.headers.get('ratelimit')).toBe('"ping";r=6;t=1440');
  });

  it('on a denied operation, with Retry-After beside it', async () => {
    const { post } = await serve();
    const user = freshUser();
    for (let i = 0; i < 5; i++) expect((await post({ query: '{ ping }' }, user)).status).toBe(200);
    const denied = await post({ query: '{ ping pong }' }, user);
    expect(denied.status).toBe(429);
    expect(denied.headers.get('retry-after')).toBe('720');
    expect(denied.headers.get('ratelimit-policy')).toBe('"ping";q=10;w=3600, "pong";q=5;w=3600');
    // What the store says each bucket holds, nothing taken.
    expect(denied.headers.get('ratelimit')).toBe('"ping";r=0;t=3600, "pong";r=5;t=0');
  });

  it("on a denial the deny cache answers, as on the store's: every bucket's policy, and what the short one holds", async () => {
    const { post } = await serve();
    const user = freshUser();
    for (let i = 0; i < 5; i++) expect((await post({ query: '{ ping }' }, user)).status).toBe(200);
    const fromStore = await post({ query: '{ ping pong }' }, user);
    expect(fromStore.headers.get('ratelimit')).toBe('"ping";r=0;t=3600, "pong";r=5;t=0');
    // Remembered: answered without asking the store, so pong's tokens are not known, only its policy.
    for (let i = 0; i < 3; i++) {
      const fromCache = await post({ query: '{ ping pong }' }, user);
      expect(fromCache.status).toBe(429);
      expect(fromCache.headers.get('retry-after')).toBe('720');
      expect(fromCache.headers.get('ratelimit-policy')).toBe('"ping";q=10;w=3600, "pong";q=5;w=3600');
      expect(fromCache.headers.get('ratelimit')).toBe('"ping";r=0;t=3600');
    }
  });

  it('on an operation that can never fit: the policy that says why, no RateLimit and no Retry-After', async () => {
    const { post } = await serve();
    const never = await post({ query: '{ many(first: 11) { id } }' }, freshUser());
    expect(never.status).toBe(429);
    expect(never.headers.get('ratelimit-policy')).toBe('"ping";q=10;w=3600');
    expect(never.headers.get('ratelimit')).toBeNull();
    expect(never.headers.get('retry-after')).toBeNull();
  });

  it('on a validate answer: what each bucket holds now, nothing taken', async () => {
    const { store, post } = await serve();
    const user = freshUser();
    expect((await post({ query: '{ ping }' }, user)).status).toBe(200);
    const checked = await post({ query: '{ ping pong }' }, user, { 'GraphQL-Cost': 'validate' });
    expect(checked.status).toBe(200);
    expect(checked.headers.get('ratelimit-policy')).toBe('"ping";q=10;w=3600, "pong";q=5;w=3600');
    expect(checked.headers.get('ratelimit')).toBe('"ping";r=8;t=720, "pong";r=5;t=0');
    expect(await tokensLeft(store, ping, user)).toBe(8);
  });

  it('in a batch: one head, each bucket once with the lowest r of its operations', async () => {
    const { post } = await serve();
    const user = freshUser();
    const answer = await post<ResponseBody[]>([{ query: '{ ping }' }, { query: '{ ping pong }' }, { query: '{ free }' }], user);
    expect(answer.status).toBe(200);
    expect(answer.body.map((r) => r.errors)).toEqual([undefined, undefined, undefined]);
    expect(answer.headers.get('ratelimit-policy')).toMatch(/^("ping";q=10;w=3600, "pong";q=5;w=3600|"pong";q=5;w=3600, "ping";q=10;w=3600)$/);
    const items = answer.headers.get('ratelimit')!.split(', ').sort();
    expect(items).toEqual(['"ping";r=6;t=1440', '"pong";r=2;t=2160']);
  });

  it('in a batch with a denied operation: the lowest r, admitted or denied', async () => {
    const { post } = await serve();
    const user = freshUser();
    for (let i = 0; i < 4; i++) expect((await post({ query: '{ ping }' }, user)).status).toBe(200);
    // Two tokens left: one of the two is served, the other denied.
    const answer = await post<ResponseBody[]>([{ query: '{ ping }' }, { query: '{ ping }' }], user);
    expect(answer.body.map((r) => r.errors?.[0]?.extensions?.['code'] ?? 'served').sort()).toEqual(['RATE_LIMITED', 'served']);
    expect(answer.headers.get('ratelimit-policy')).toBe('"ping";q=10;w=3600');
    expect(answer.headers.get('ratelimit')).toBe('"ping";r=0;t=3600');
  });

  it('sends neither field on an operation that touches no bucket, nor by default', async () => {
    const { post } = await serve();
    const free = await post({ query: '{ free }' }, freshUser());
    expect(free.status).toBe(200);
    expect(free.headers.get('ratelimit-policy')).toBeNull();
    expect(free.headers.get('ratelimit')).toBeNull();

    const quiet = await serve({ rateLimitHeaders: false });
    const plain = await quiet.post({ query: '{ ping }' }, freshUser());
    expect(plain.status).toBe(200);
    expect(plain.headers.get('ratelimit-policy')).toBeNull();
    expect(plain.headers.get('ratelimit')).toBeNull();
  });

  it('sends neither field when the store failed and the operation was let through', async () => {
    const failing: BucketStore = {
      acquire: () => Promise.reject(new Error('connection refused')),
      reset: () => Promise.resolve(false),
    };
    const { post } = await serve({ store: failing });
    const served = await post({ query: '{ ping }' }, freshUser());
    expect(served.status).toBe(200);
    expect(served.headers.get('ratelimit-policy')).toBeNull();
    expect(served.headers.get('ratelimit')).toBeNull();
  });
});
