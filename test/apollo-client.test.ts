// SPEC §5: `retryAfterLink` from `graphql-token-bucket/apollo-client`, with a
// real Apollo Client 4 talking over real HTTP to Apollo Server and the
// plugin. The server records when each operation arrived and what it was
// answered, so waits are measured against the `retryAfter` it sent.
import { ApolloClient, ApolloLink, CombinedGraphQLErrors, HttpLink, InMemoryCache, ServerError, gql } from '@apollo/client';
import { BatchHttpLink } from '@apollo/client/link/batch-http';
import { RetryLink } from '@apollo/client/link/retry';
import { Observable } from '@apollo/client/utilities';
import { ApolloServer } from '@apollo/server';
import type { ApolloServerPlugin, BaseContext } from '@apollo/server';
import type { IncomingMessage } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DEFAULT_MAX_RETRIES,
  DEFAULT_MAX_WAIT_SECONDS,
  MAX_WAIT_SECONDS_LIMIT,
  retryAfterLink,
} from '../src/apollo-client.js';
import type { RetryAfterLinkOptions } from '../src/apollo-client.js';
import { getRetryAfter } from '../src/client.js';
import { MemoryStore, Rate, TokenBucket, tokenBucketDirectiveTypeDefs, tokenBucketPlugin } from '../src/index.js';
import { serveHttp, waitFor } from './support/graphql.js';

interface UserContext extends BaseContext {
  user: string;
}

// Each bucket holds one token; `ping` takes it, so a second `ping` waits about one period.
const buckets = {
  fast: new TokenBucket('fast', 1, new Rate(1, 300)),
  contended: new TokenBucket('contended', 1, new Rate(1, 500)),
  medium: new TokenBucket('medium', 1, new Rate(1, 1200)),
  slow: new TokenBucket('slow', 1, new Rate(1, 5000)),
};

const typeDefs = `${tokenBucketDirectiveTypeDefs}
type Query {
  ping(n: Int!): Int! @tokenBucket(name: "fast", cost: 1)
  contended(n: Int!): Int! @tokenBucket(name: "contended", cost: 1)
  medium(n: Int!): Int! @tokenBucket(name: "medium", cost: 1)
  slow(n: Int!): Int! @tokenBucket(name: "slow", cost: 1)
  free(n: Int!): Int!
}
type Mutation {
  bump(n: Int!): Int! @tokenBucket(name: "fast", cost: 1)
}`;

const echo = (_: unknown, { n }: { n: number }): number => n;
const resolvers = { Query: { ping: echo, contended: echo, medium: echo, slow: echo, free: echo }, Mutation: { bump: echo } };

/** One operation as the server saw it. */
interface Seen {
  user: string;
  /** The operation's root field and `n`, e.g. `ping 1`. */
  what: string;
  /** `performance.now()` when the request for it started. */
  receivedAt: number;
  /** `performance.now()` when its response was about to leave. */
  sentAt: number | undefined;
  /** The `retryAfter` it was refused with; `undefined` when served. */
  retryAfter: number | null | undefined;
}

const seen: Seen[] = [];
const recorder: ApolloServerPlugin<UserContext> = {
  requestDidStart: ({ request, contextValue }) => {
    const field = /\{\s*(\w+)/.exec(request.query ?? '')?.[1] ?? '?';
    const entry: Seen = {
      user: contextValue.user,
      what: `${field} ${String(request.variables?.['n'])}`,
      receivedAt: performance.now(),
      sentAt: undefined,
      retryAfter: undefined,
    };
    seen.push(entry);
    return Promise.resolve({
      willSendResponse: ({ response }) => {
        entry.sentAt = performance.now();
        if (response.body.kind === 'single') entry.retryAfter = getRetryAfter(response.body.singleResult);
        return Promise.resolve();
      },
    });
  },
};

let server: ApolloServer<UserContext>;
let url: string;

beforeAll(async () => {
  server = new ApolloServer<UserContext>({
    typeDefs,
    resolvers,
    allowBatchedHttpRequests: true,
    plugins: [
      recorder,
      tokenBucketPlugin<UserContext>({
        store: new MemoryStore(),
        buckets: Object.values(buckets),
        identify: ({ contextValue }) => contextValue.user,
      }),
    ],
  });
  ({ url } = await serveHttp(server, ({ req }: { req: IncomingMessage }) => Promise.resolve({ user: String(req.headers['x-user-id']) })));
});

afterAll(async () => {
  await server.stop();
});

let users = 0;
/** A user whose buckets no other test touches. */
function freshUser(): string {
  users += 1;
  return `link-user-${users}`;
}

function seenBy(user: string): Seen[] {
  return seen.filter((s) => s.user === user);
}

/** An HTTP response as the client received it. */
interface Received {
  status: number;
  contentType: string | null;
}

type Accept = 'default' | 'application/json';
type Transport = 'http' | 'batch';

interface TestClient {
  client: ApolloClient;
  /** Every HTTP response the client received, in order. */
  received: Received[];
}

function createClient(user: string, { accept = 'default', transport = 'http', link = {} }: { accept?: Accept; transport?: Transport; link?: RetryAfterLinkOptions } = {}): TestClient {
  const received: Received[] = [];
  const recordingFetch: typeof fetch = async (input, init) => {
    const response = await fetch(input, init);
    received.push({ status: response.status, contentType: response.headers.get('content-type') });
    return response;
  };
  const headers: Record<string, string> = { 'x-user-id': user };
  if (accept !== 'default') headers['accept'] = accept;
  const terminating = transport === 'http' ? new HttpLink({ uri: url, headers, fetch: recordingFetch }) : new BatchHttpLink({ uri: url, headers, fetch: recordingFetch, batchInterval: 20 });
  const client = new ApolloClient({
    cache: new InMemoryCache(),
    link: ApolloLink.from([retryAfterLink(link), terminating]),
    defaultOptions: { query: { fetchPolicy: 'no-cache' }, watchQuery: { fetchPolicy: 'no-cache' } },
  });
  return { client, received };
}

const PING = gql`
  query Ping($n: Int!) {
    ping(n: $n)
  }
`;
const CONTENDED = gql`
  query Contended($n: Int!) {
    contended(n: $n)
  }
`;
const MEDIUM = gql`
  query Medium($n: Int!) {
    medium(n: $n)
  }
`;
const SLOW = gql`
  query Slow($n: Int!) {
    slow(n: $n)
  }
`;
const FREE = gql`
  query Free($n: Int!) {
    free(n: $n)
  }
`;
// Two `ping`s cost 2 tokens of a 1-token bucket: never possible, `retryAfter: null`.
const TWO_PINGS = gql`
  query TwoPings {
    ping(n: 1)
    again: ping(n: 2)
  }
`;

/** The error a rejected query rejected with. */
async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected the query to fail');
}

/** The operation was refused and then sent again once `retryAfter` had passed, not much later. */
function expectWaitedOut(refused: Seen, retried: Seen): void {
  expect(refused.retryAfter).toEqual(expect.any(Number));
  const waitedMs = retried.receivedAt - refused.sentAt!;
  const retryAfterMs = refused.retryAfter! * 1000;
  // Node timers may fire up to 1 ms early; the request's trip back only adds to the wait.
  expect(waitedMs).toBeGreaterThanOrEqual(retryAfterMs - 1);
  expect(waitedMs).toBeLessThan(retryAfterMs + 250);
}

/** 429 answered as the Accept header asks: a GraphQL result or a `ServerError`. */
function expectShape(received: Received[], accept: Accept): void {
  const refused = received.find((r) => r.status === 429);
  expect(refused?.contentType).toMatch(accept === 'default' ? /^application\/graphql-response\+json/ : /^application\/json/);
}

describe.each<{ accept: Accept; transport: Transport }>([
  { accept: 'default', transport: 'http' },
  { accept: 'application/json', transport: 'http' },
  { accept: 'default', transport: 'batch' },
  { accept: 'application/json', transport: 'batch' },
])('retryAfterLink over $transport, Accept: $accept', ({ accept, transport }) => {
  it('waits retryAfter and sends the refused operation again, once', async () => {
    const user = freshUser();
    const { client, received } = createClient(user, { accept, transport });
    expect((await client.query({ query: PING, variables: { n: 1 } })).data).toEqual({ ping: 1 });

    const started = performance.now();
    expect((await client.query({ query: PING, variables: { n: 2 } })).data).toEqual({ ping: 2 });
    const elapsed = performance.now() - started;

    const [served, refused, retried] = seenBy(user);
    expect(seenBy(user).map((s) => [s.what, s.retryAfter === undefined ? 'served' : 'refused'])).toEqual([
      ['ping 1', 'served'],
      ['ping 2', 'refused'],
      ['ping 2', 'served'],
    ]);
    // One token per 300 ms, less what refilled between taking it and the refusal
    // (however slowly the machine ran the two requests).
    expect(refused!.retryAfter).toBeGreaterThanOrEqual(0.3 - (refused!.sentAt! - served!.receivedAt) / 1000 - 0.001);
    expect(refused!.retryAfter).toBeLessThanOrEqual(0.3);
    expectWaitedOut(refused!, retried!);
    expect(elapsed).toBeGreaterThanOrEqual(refused!.retryAfter! * 1000 - 1);
    expectShape(received, accept);
  });

  it('sends a refused mutation again: a refused operation ran no resolver', async () => {
    const user = freshUser();
    const { client } = createClient(user, { accept, transport });
    const BUMP = gql`
      mutation Bump($n: Int!) {
        bump(n: $n)
      }
    `;
    expect((await client.mutate({ mutation: BUMP, variables: { n: 1 } })).data).toEqual({ bump: 1 });
    expect((await client.mutate({ mutation: BUMP, variables: { n: 2 } })).data).toEqual({ bump: 2 });
    const [, refused, retried] = seenBy(user);
    expect(seenBy(user).map((s) => s.what)).toEqual(['bump 1', 'bump 2', 'bump 2']);
    expectWaitedOut(refused!, retried!);
  });

  it('passes retryAfter: null on at once: the operation costs more than the bucket holds', async () => {
    const user = freshUser();
    const { client, received } = createClient(user, { accept, transport });
    const error = await rejection(client.query({ query: TWO_PINGS }));
    expect(getRetryAfter(error)).toBeNull();
    // In a batch the link hands each operation its own result from a ServerError's body.
    expect(accept === 'application/json' && transport === 'http' ? ServerError.is(error) : CombinedGraphQLErrors.is(error)).toBe(true);
    expect(seenBy(user)).toHaveLength(1);
    expect(received.map((r) => r.status)).toEqual([429]);
  });

  it('passes on a wait longer than maxWaitSeconds at once', async () => {
    const user = freshUser();
    const { client } = createClient(user, { accept, transport, link: { maxWaitSeconds: 1 } });
    await client.query({ query: SLOW, variables: { n: 1 } });
    const started = performance.now();
    const error = await rejection(client.query({ query: SLOW, variables: { n: 2 } }));
    const elapsed = performance.now() - started;
    expect(getRetryAfter(error)).toBeGreaterThan(4.5);
    expect(seenBy(user).map((s) => s.what)).toEqual(['slow 1', 'slow 2']);
    expect(elapsed).toBeLessThan(1000);
  });

  it('waits a retryAfter up to maxWaitSeconds', async () => {
    const user = freshUser();
    const { client } = createClient(user, { accept, transport, link: { maxWaitSeconds: 1.2 } });
    await client.query({ query: MEDIUM, variables: { n: 1 } });
    expect((await client.query({ query: MEDIUM, variables: { n: 2 } })).data).toEqual({ medium: 2 });
    const [served, refused, retried] = seenBy(user);
    // One token per 1.2 s, less what refilled between taking it and the refusal.
    expect(refused!.retryAfter).toBeGreaterThanOrEqual(1.2 - (refused!.sentAt! - served!.receivedAt) / 1000 - 0.001);
    expectWaitedOut(refused!, retried!);
  });

  it('sends one operation at most maxRetries times more, then passes the refusal on', async () => {
    // maxRetries + 2 operations share a one-token bucket: each round of
    // retries serves one of them, so the last is refused maxRetries + 1 times.
    const maxRetries = 2;
    const user = freshUser();
    const { client } = createClient(user, { accept, transport, link: { maxRetries } });
    const outcomes = await Promise.allSettled([1, 2, 3, 4].map((n) => client.query({ query: CONTENDED, variables: { n } })));

    const served = outcomes.filter((o) => o.status === 'fulfilled');
    const failed = outcomes.filter((o) => o.status === 'rejected');
    expect(served).toHaveLength(3);
    expect(failed).toHaveLength(1);
    expect(getRetryAfter(failed[0]!.reason)).toBeGreaterThan(0);

    const loser = `contended ${outcomes.indexOf(failed[0]!) + 1}`;
    const tries = seenBy(user).filter((s) => s.what === loser);
    expect(tries).toHaveLength(maxRetries + 1);
    expect(tries.every((s) => typeof s.retryAfter === 'number')).toBe(true);
    // 4 first tries, then the 3 refused, then the 2 refused again.
    expect(seenBy(user)).toHaveLength(4 + 3 + 2);
  });

  it('sends nothing more when the query is unsubscribed during the wait', async () => {
    const user = freshUser();
    const { client } = createClient(user, { accept, transport });
    await client.query({ query: PING, variables: { n: 1 } });
    const values: unknown[] = [];
    const subscription = client.watchQuery({ query: PING, variables: { n: 2 } }).subscribe((value) => values.push(value));
    await waitFor('the refusal', 5000, () => seenBy(user)[1]?.sentAt !== undefined);
    subscription.unsubscribe();

    // A retry would have arrived retryAfter after the refusal; look well past that.
    const refused = seenBy(user)[1]!;
    await new Promise((resolve) => setTimeout(resolve, refused.retryAfter! * 1000 + 500));
    expect(seenBy(user)).toHaveLength(2);
    expect(values.filter((v) => (v as { data?: unknown }).data !== undefined)).toEqual([]);
  });

  it('sends nothing more after client.stop() during the wait', async () => {
    const user = freshUser();
    const { client } = createClient(user, { accept, transport });
    await client.query({ query: PING, variables: { n: 1 } });
    const query = rejection(client.query({ query: PING, variables: { n: 2 } }));
    await waitFor('the refusal', 5000, () => seenBy(user)[1]?.sentAt !== undefined);
    client.stop();
    expect(await query).toBeInstanceOf(Error);

    const refused = seenBy(user)[1]!;
    await new Promise((resolve) => setTimeout(resolve, refused.retryAfter! * 1000 + 500));
    expect(seenBy(user)).toHaveLength(2);
  });
});

describe('retryAfterLink over BatchHttpLink', () => {
  it.each<Accept>(['default', 'application/json'])('retries each operation of a batch on its own (Accept: %s)', async (accept) => {
    const user = freshUser();
    const { client, received } = createClient(user, { accept, transport: 'batch' });
    await Promise.all([client.query({ query: PING, variables: { n: 0 } }), client.query({ query: MEDIUM, variables: { n: 0 } })]);

    // One batch: two refused operations with different waits and one served.
    const finished: string[] = [];
    const track = <T>(name: string, promise: Promise<T>): Promise<T> =>
      promise.then((value) => {
        finished.push(name);
        return value;
      });
    const [ping, medium, free] = await Promise.all([
      track('ping', client.query({ query: PING, variables: { n: 1 } })),
      track('medium', client.query({ query: MEDIUM, variables: { n: 1 } })),
      track('free', client.query({ query: FREE, variables: { n: 1 } })),
    ]);
    expect([ping.data, medium.data, free.data]).toEqual([{ ping: 1 }, { medium: 1 }, { free: 1 }]);
    expect(finished).toEqual(['free', 'ping', 'medium']);

    const mine = seenBy(user).slice(2);
    const at = (what: string, index: number): Seen => mine.filter((s) => s.what === what)[index]!;
    expect(mine.map((s) => s.what).sort()).toEqual(['free 1', 'medium 1', 'medium 1', 'ping 1', 'ping 1']);
    expect(at('free 1', 0).retryAfter).toBeUndefined();
    expectWaitedOut(at('ping 1', 0), at('ping 1', 1));
    expectWaitedOut(at('medium 1', 0), at('medium 1', 1));
    expect(at('medium 1', 0).retryAfter! - at('ping 1', 0).retryAfter!).toBeGreaterThan(0.5);
    // Warm-up, the batch of three, then each retry in a batch of its own.
    expect(received.map((r) => r.status)).toEqual([200, 429, 200, 200]);
    expectShape(received, accept);
  });

  it('passes the ServerError on when the batch holds operations that did not come through the link', async () => {
    const user = freshUser();
    const received: Received[] = [];
    const batch = new BatchHttpLink({
      uri: url,
      headers: { 'x-user-id': user, accept: 'application/json' },
      batchInterval: 20,
      fetch: async (input, init) => {
        const response = await fetch(input, init);
        received.push({ status: response.status, contentType: response.headers.get('content-type') });
        return response;
      },
    });
    // `free` goes straight to the batch: the link cannot tell which result of the body is whose.
    const client = new ApolloClient({
      cache: new InMemoryCache(),
      link: ApolloLink.split((operation) => operation.operationName === 'Free', batch, ApolloLink.from([retryAfterLink(), batch])),
      defaultOptions: { query: { fetchPolicy: 'no-cache' } },
    });
    await client.query({ query: PING, variables: { n: 0 } });
    const [free, ping] = await Promise.all([
      rejection(client.query({ query: FREE, variables: { n: 1 } })),
      rejection(client.query({ query: PING, variables: { n: 1 } })),
    ]);
    expect(ServerError.is(free)).toBe(true);
    expect(ping).toBe(free);
    expect(received.map((r) => r.status)).toEqual([200, 429]);
    expect(seenBy(user)).toHaveLength(3);
  });
});

describe('retryAfterLink with RetryLink', () => {
  it('keeps RetryLink off a refusal it passes on, with retryIf: getRetryAfter(error) === undefined', async () => {
    const user = freshUser();
    const client = new ApolloClient({
      cache: new InMemoryCache(),
      link: ApolloLink.from([
        new RetryLink({ delay: { initial: 10 }, attempts: { retryIf: (error) => getRetryAfter(error) === undefined } }),
        retryAfterLink({ maxWaitSeconds: 1 }),
        new HttpLink({ uri: url, headers: { 'x-user-id': user, accept: 'application/json' } }),
      ]),
      defaultOptions: { query: { fetchPolicy: 'no-cache' } },
    });
    await client.query({ query: SLOW, variables: { n: 1 } });
    const error = await rejection(client.query({ query: SLOW, variables: { n: 2 } }));
    expect(ServerError.is(error)).toBe(true);
    expect(getRetryAfter(error)).toBeGreaterThan(4.5);
    expect(seenBy(user).map((s) => s.what)).toEqual(['slow 1', 'slow 2']);
  });
});

describe('retryAfterLink, answers the plugin never sends', () => {
  const client = new ApolloClient({ cache: new InMemoryCache(), link: ApolloLink.empty() });
  const refused = (retryAfter: number | null) => ({ errors: [{ message: 'Rate limit exceeded', extensions: { code: 'RATE_LIMITED', retryAfter } }] });

  /** Runs PING through the link onto a terminating link that answers with `answers` in turn. */
  function run(answers: ((observer: { next(value: unknown): void; error(error: unknown): void; complete(): void }) => void)[], options?: RetryAfterLinkOptions) {
    let sent = 0;
    const terminating = new ApolloLink(
      () =>
        new Observable((observer) => {
          const answer = answers[Math.min(sent, answers.length - 1)]!;
          sent += 1;
          answer(observer as never);
        }),
    );
    const events: unknown[] = [];
    const done = new Promise<void>((resolve) => {
      ApolloLink.execute(ApolloLink.from([retryAfterLink(options), terminating]), { query: PING, variables: { n: 1 } }, { client }).subscribe({
        next: (value) => void events.push(value),
        error: (error: unknown) => {
          events.push(error);
          resolve();
        },
        complete: () => resolve(),
      });
    });
    return { done, events, sent: () => sent };
  }

  it('does not send again an operation that ran: a RATE_LIMITED error beside data came from a resolver', async () => {
    const partial = { data: { ping: null }, errors: refused(0.01).errors };
    const nullData = { data: null, errors: refused(0.01).errors };
    for (const answer of [partial, nullData]) {
      const { done, events, sent } = run([(o) => (o.next(answer), o.complete())]);
      await done;
      expect(events).toEqual([answer]);
      expect(sent()).toBe(1);
    }
  });

  it('passes on a ServerError whose body is not a GraphQL response', async () => {
    for (const bodyText of ['<html>429 Too Many Requests</html>', '', '{"errors": [', '{"message": "slow down"}']) {
      const error = new ServerError('Response not successful: Received status code 429', { response: new Response(bodyText, { status: 429 }), bodyText });
      const { done, events, sent } = run([(o) => o.error(error)]);
      await done;
      expect(events).toEqual([error]);
      expect(sent()).toBe(1);
    }
  });

  it('waits only on the first result: later results of an incremental response pass through', async () => {
    const first = { data: { ping: 1 }, hasNext: true };
    const later = { ...refused(0.01), hasNext: false };
    const { done, events, sent } = run([(o) => (o.next(first), o.next(later), o.complete())]);
    await done;
    expect(events).toEqual([first, later]);
    expect(sent()).toBe(1);
  });

  it('sends again on a refusal delivered synchronously, and waits 0 s when told to', async () => {
    const { done, events, sent } = run([(o) => (o.next(refused(0)), o.complete()), (o) => (o.next({ data: { ping: 1 } }), o.complete())]);
    await done;
    expect(events).toEqual([{ data: { ping: 1 } }]);
    expect(sent()).toBe(2);
  });

  it('with maxRetries: 0 passes every refusal on', async () => {
    const { done, events, sent } = run([(o) => (o.next(refused(0.01)), o.complete())], { maxRetries: 0 });
    await done;
    expect(events).toEqual([refused(0.01)]);
    expect(sent()).toBe(1);
  });
});

describe('retryAfterLink options', () => {
  it('defaults to 3 retries and waits of up to 60 s', () => {
    expect(DEFAULT_MAX_RETRIES).toBe(3);
    expect(DEFAULT_MAX_WAIT_SECONDS).toBe(60);
    expect(retryAfterLink()).toBeInstanceOf(ApolloLink);
    expect(retryAfterLink({ maxRetries: 0, maxWaitSeconds: 0 })).toBeInstanceOf(ApolloLink);
    expect(retryAfterLink({ maxRetries: 1000, maxWaitSeconds: MAX_WAIT_SECONDS_LIMIT })).toBeInstanceOf(ApolloLink);
  });

  it('refuses a maxRetries that is not a non-negative integer', () => {
    for (const maxRetries of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53]) {
      expect(() => retryAfterLink({ maxRetries })).toThrow(RangeError);
      expect(() => retryAfterLink({ maxRetries })).toThrow(/maxRetries.*integer from 0 to 2\^53 - 1/);
    }
    expect(() => retryAfterLink({ maxRetries: '3' as unknown as number })).toThrow(TypeError);
  });

  it('refuses a maxWaitSeconds a timer cannot wait', () => {
    for (const maxWaitSeconds of [-0.001, Number.NaN, Number.POSITIVE_INFINITY, MAX_WAIT_SECONDS_LIMIT + 0.001]) {
      expect(() => retryAfterLink({ maxWaitSeconds })).toThrow(RangeError);
      expect(() => retryAfterLink({ maxWaitSeconds })).toThrow(/maxWaitSeconds.*from 0 to 2147483.647/);
    }
    expect(() => retryAfterLink({ maxWaitSeconds: null as unknown as number })).toThrow(TypeError);
  });

  it('refuses an option it does not know, and options that are not an object', () => {
    expect(() => retryAfterLink({ retries: 5 } as RetryAfterLinkOptions)).toThrow(/no option "retries"/);
    expect(() => retryAfterLink(null as unknown as RetryAfterLinkOptions)).toThrow(TypeError);
    expect(() => retryAfterLink(5 as unknown as RetryAfterLinkOptions)).toThrow(TypeError);
  });
});
