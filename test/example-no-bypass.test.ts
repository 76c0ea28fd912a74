// SPEC §6 "no operation type over any transport goes unpriced": the example
// server (`npm start`) as it runs, Apollo Server on express with graphql-ws on
// the same port. Every operation type over every transport it offers is
// charged before it runs, or refused without running.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buckets, startExampleServer } from '../examples/app.js';
import type { RunningExample } from '../examples/app.js';
import { MemoryStore } from '../src/index.js';
import type { AcquireRequest } from '../src/index.js';
import { disposeClients, postJson, run, socketClient } from './support/adapters.js';
import { RecordingStore, captureLogger } from './support/graphql.js';
import type { ResponseBody } from './support/graphql.js';

const OPERATIONS = {
  query: { query: '{ book(id: "1") { title } }', bucket: buckets.api, data: { book: { title: 'Book 1' } } },
  mutation: { query: 'mutation { login(email: "ann@example.com", password: "hunter2") { ok } }', bucket: buckets.login, data: { login: { ok: true } } },
  subscription: { query: 'subscription { countdown(from: 0, everyMs: 10) }', bucket: buckets.live, data: { countdown: 0 } },
} as const;
type OperationType = keyof typeof OPERATIONS;
const TYPES = Object.keys(OPERATIONS) as OperationType[];

let example: RunningExample;
let store: RecordingStore;

beforeAll(async () => {
  store = new RecordingStore(new MemoryStore());
  example = await startExampleServer({ store, host: '127.0.0.1', logger: captureLogger() });
});

afterAll(async () => {
  await disposeClients();
  await example?.stop();
});

let users = 0;
const freshUser = (): string => `no-bypass-${++users}`;

/** The store calls made while `send` ran. */
async function callsDuring(send: () => Promise<void>): Promise<AcquireRequest[][]> {
  const before = store.calls.length;
  await send();
  return store.calls.slice(before);
}

/** One store call, taking `cost` tokens of the operation type's bucket. */
function expectCharged(calls: AcquireRequest[][], type: OperationType): void {
  expect(calls).toHaveLength(1);
  expect(calls[0]!.map((r) => ({ bucket: r.bucket.name, cost: r.cost }))).toEqual([{ bucket: OPERATIONS[type].bucket.name, cost: 1 }]);
}

describe('the example server charges every operation type over every transport', () => {
  it.each(TYPES)('%s over HTTP POST', async (type) => {
    let answer: Awaited<ReturnType<typeof postJson<ResponseBody>>> | undefined;
    const calls = await callsDuring(async () => {
      answer = await postJson<ResponseBody>(example.url, { query: OPERATIONS[type].query }, { 'x-user-id': freshUser() });
    });
    expectCharged(calls, type);
    // Apollo Server runs a subscription sent over HTTP as one result (here a null the schema refuses): after paying.
    if (type !== 'subscription') expect(answer?.body.data).toEqual(OPERATIONS[type].data);
  });

  it('each operation of an HTTP batch', async () => {
    let answer: Awaited<ReturnType<typeof postJson<ResponseBody[]>>> | undefined;
    const calls = await callsDuring(async () => {
      answer = await postJson<ResponseBody[]>(
        example.url,
        TYPES.map((type) => ({ query: OPERATIONS[type].query })),
        { 'x-user-id': freshUser() },
      );
    });
    expect(answer?.body).toHaveLength(3);
    expect(calls.map((call) => call.map((r) => r.bucket.name)).sort()).toEqual([['api'], ['live'], ['login']]);
  });

  it.each(TYPES)('%s over HTTP GET: a query is charged, anything else refused before it runs', async (type) => {
    let response: Response | undefined;
    const calls = await callsDuring(async () => {
      response = await fetch(`${example.url}?query=${encodeURIComponent(OPERATIONS[type].query)}`, {
        headers: { 'x-user-id': freshUser(), 'apollo-require-preflight': 'true' },
      });
    });
    const body = (await response!.json()) as ResponseBody;
    if (type === 'query') {
      expectCharged(calls, type);
      expect(body.data).toEqual(OPERATIONS.query.data);
    } else {
      expect(response!.status).toBe(405);
      expect(calls).toEqual([]);
      expect(body.data).toBeUndefined();
    }
  });

  it.each(TYPES)('%s over WebSocket (graphql-ws)', async (type) => {
    const client = socketClient(example.wsUrl, { 'x-user-id': freshUser() });
    let outcome: Awaited<ReturnType<typeof run>> | undefined;
    const calls = await callsDuring(async () => {
      outcome = await run(client, { query: OPERATIONS[type].query });
    });
    expectCharged(calls, type);
    expect(outcome?.results.map((r) => r.data)).toEqual([OPERATIONS[type].data]);
  });

  it('and refuses each of them over every transport once its bucket is empty', async () => {
    const user = freshUser();
    // Empty every bucket these operations use, for this user and for the client address: again before each
    // check, as api refills a token every 60 ms, less than these requests take on a busy machine.
    const drain = async (): Promise<void> => {
      for (const type of TYPES) {
        const bucket = OPERATIONS[type].bucket;
        for (const key of [user, '127.0.0.1']) {
          const left = await store.acquire(bucket, key, 0);
          if (left.allowed && left.remaining > 0) expect(await store.acquire(bucket, key, left.remaining)).toMatchObject({ allowed: true });
        }
      }
    };
    const client = socketClient(example.wsUrl, { 'x-user-id': user });
    for (const type of TYPES) {
      await drain();
      const http = await postJson<ResponseBody>(example.url, { query: OPERATIONS[type].query }, { 'x-user-id': user });
      expect(http.status).toBe(429);
      expect(http.body.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', bucket: OPERATIONS[type].bucket.name });
      await drain();
      const socket = await run(client, { query: OPERATIONS[type].query });
      expect(socket.results).toEqual([]);
      expect(socket.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', bucket: OPERATIONS[type].bucket.name });
    }
    await drain();
    const batch = await postJson<ResponseBody[]>(example.url, TYPES.map((type) => ({ query: OPERATIONS[type].query })), { 'x-user-id': user });
    expect(batch.status).toBe(429);
    expect(batch.body.map((r) => r.errors?.[0]?.extensions?.['code'])).toEqual(['RATE_LIMITED', 'RATE_LIMITED', 'RATE_LIMITED']);
    await drain();
    const get = await fetch(`${example.url}?query=${encodeURIComponent(OPERATIONS.query.query)}`, { headers: { 'x-user-id': user, 'apollo-require-preflight': 'true' } });
    expect(get.status).toBe(429);
  });
});
