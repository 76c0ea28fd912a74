// What the coprocessor makes of payloads the Router would not send: bodies
// that are not JSON, missing fields, another protocol version, huge bodies,
// hostile documents, and context entries a client, a plugin or anyone who
// can reach the coprocessor could forge or replay. It answers; it never
// crashes, never answers 500, never hangs, and never gives back a token the
// operation did not take.
import { connect } from 'node:net';
import { afterAll, afterEach, beforeEach, describe, expect, inject, it, vi } from 'vitest';
import { Rate, RedisStore, TokenBucket } from '../src/index.js';
import { routerCoprocessor } from '../src/router/index.js';
import type { RouterCoprocessorOptions, RouterRequest } from '../src/router/index.js';
import { redisClient, uniquePrefix } from './support/clients.js';
import { EXAMPLE_QUERY, compose, subgraphTypeDefs } from './support/federation.js';
import { captureLogger, watchUnhandledRejections } from './support/graphql.js';
import type { CapturedLogger } from './support/graphql.js';
import { requestId, serveCoprocessor, supergraphRequestPayload, supergraphResponsePayload, unchangedAnswer, without } from './support/router.js';
import type { CoprocessorServer, Entries } from './support/router.js';

const redis = redisClient(inject('redisUrl'));
const SDL = compose(subgraphTypeDefs(), { products: 'http://products:4001', reviews: 'http://reviews:4002', inventory: 'http://inventory:4003' });
const BUCKET = new TokenBucket('api', 1000, Rate.perHour(1));
const SECRET = 'a-secret-every-replica-shares-0123456789';
const servers: CoprocessorServer[] = [];
const unhandled = watchUnhandledRejections();

afterAll(async () => {
  unhandled.stop();
  await Promise.all(servers.splice(0).map((s) => s.stop()));
  redis.disconnect();
});
afterEach(() => {
  vi.useRealTimers();
  expect(unhandled.rejections).toEqual([]);
});

let users = 0;
let user: string;
beforeEach(() => {
  users += 1;
  user = `payload-user-${users}`;
});

async function start(options: Partial<RouterCoprocessorOptions> = {}): Promise<{ coprocessor: CoprocessorServer; logger: CapturedLogger; store: RedisStore }> {
  const logger = captureLogger();
  const store = new RedisStore(redis, { prefix: uniquePrefix('router-payloads') });
  const coprocessor = await serveCoprocessor(
    routerCoprocessor({
      store,
      buckets: [BUCKET],
      identify: (request: RouterRequest) => request.headers['x-user-id']?.[0] ?? 'anonymous',
      contextSecret: SECRET,
      refundUnusedCost: true,
      reportCost: true,
      logger,
      ...options,
    }),
  );
  servers.push(coprocessor);
  return { coprocessor, logger, store };
}

async function remaining(store: RedisStore, key = user): Promise<number> {
  return (await store.checkAll([{ bucket: BUCKET, key, cost: 1 }])).remaining[0]!;
}

/** Charges EXAMPLE_QUERY (69) at the request stage; the entries the Router then holds. */
async function charged(coprocessor: CoprocessorServer, id = requestId()): Promise<{ id: string; entries: Entries }> {
  const answer = await coprocessor.post(supergraphRequestPayload({ query: EXAMPLE_QUERY, headers: { 'x-user-id': user } }, SDL, { id }));
  expect(answer.body['control']).toBe('continue');
  return { id, entries: { ...(answer.body['context'] as { entries: Entries }).entries } };
}

/** A response with no product: it costs nothing, the refund gives all 69 back. */
const EMPTY = { data: { products: [] } };

describe('bodies that are not payloads', () => {
  it('answers a body that is not JSON 400, another JSON value 400, and any method but POST 405', async () => {
    const { coprocessor } = await start();
    const notJson = await coprocessor.send('{"version": 1, "stage": ');
    expect(notJson.status).toBe(400);
    expect(notJson.body).toEqual({ error: 'the body is not JSON: POST a coprocessor payload of Apollo Router' });
    for (const value of ['[1,2]', '"text"', '42', 'null']) expect((await coprocessor.send(value)).status).toBe(400);
    const get = await fetch(coprocessor.url);
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
  });

  it('answers a body larger than maxPayloadBytes 413, declared or not, without reading it all', async () => {
    const { coprocessor } = await start({ maxPayloadBytes: 64 * 1024 });
    const big = JSON.stringify(supergraphRequestPayload({ query: `{ ${'a: __typename '.repeat(10_000)} }` }, SDL));
    expect((await coprocessor.send(big)).status).toBe(413);
    // Chunked, no content-length: cut off once past the limit.
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < 100; i++) controller.enqueue(new TextEncoder().encode(' '.repeat(4096)));
        controller.close();
      },
    });
    const chunked = await coprocessor.send(stream, { duplex: 'half' } as RequestInit);
    expect(chunked.status).toBe(413);
  });

  it('survives a client that goes away in the middle of a body, and keeps serving', async () => {
    const { coprocessor } = await start();
    const { port } = new URL(coprocessor.url);
    await new Promise<void>((resolve) => {
      const socket = connect(Number(port), '127.0.0.1', () => {
        socket.write('POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{"version":1,');
        setImmediate(() => socket.destroy());
      });
      socket.on('close', () => resolve());
      socket.on('error', () => undefined);
    });
    expect((await coprocessor.post({ version: 1, stage: 'RouterRequest', control: 'continue', id: 'x' })).status).toBe(200);
  });
});

describe('payloads the limiter cannot use pass unchanged', () => {
  it('logs once, as an error, a SupergraphRequest without sdl or body, and lets it through', async () => {
    const { coprocessor, logger } = await start();
    const payload = supergraphRequestPayload({ query: EXAMPLE_QUERY, headers: { 'x-user-id': user } }, SDL);
    const withoutSdl = without(payload, 'sdl');
    for (let i = 0; i < 2; i++) expect((await coprocessor.post(withoutSdl)).body).toEqual(unchangedAnswer(withoutSdl, 'continue'));
    const withoutBody = without(payload, 'body');
    expect((await coprocessor.post(withoutBody)).body).toEqual(unchangedAnswer(withoutBody, 'continue'));
    expect(logger.errors).toEqual([
      'graphql-token-bucket: the Router sends no supergraph at the SupergraphRequest stage, so no operation is limited: set `sdl: true` under coprocessor.supergraph.request in router.yaml',
      'graphql-token-bucket: the Router sends no body at the SupergraphRequest stage, so no operation is limited: set `body: true` under coprocessor.supergraph.request in router.yaml',
    ]);
  });

  it('passes another protocol version, an unknown stage, a null query and fields of the wrong type unchanged', async () => {
    const { coprocessor, logger, store } = await start();
    const base = supergraphRequestPayload({ query: EXAMPLE_QUERY, headers: { 'x-user-id': user } }, SDL);
    const variants: Record<string, unknown>[] = [
      { ...base, version: 2 },
      { ...base, version: '1' },
      { ...base, stage: 'SomethingNew' },
      { ...base, body: { query: null } },
      { ...base, body: { query: EXAMPLE_QUERY, operationName: 7 } },
      { ...base, body: { query: EXAMPLE_QUERY, variables: [1] } },
      { ...base, body: 'query' },
    ];
    for (const variant of variants) {
      const answer = await coprocessor.post(variant);
      expect(answer.status).toBe(200);
      expect(answer.body).toEqual(unchangedAnswer(variant));
    }
    expect(await remaining(store)).toBe(1000);
    expect(logger.errors.filter((e) => e.includes('protocol version'))).toHaveLength(2);
  });

  it('reads headers of odd shapes without failing: upper-case names, a string value, numbers dropped', async () => {
    const seen: RouterRequest[] = [];
    const { coprocessor, store } = await start({
      identify: (request) => {
        seen.push(request);
        return request.headers['x-user-id']?.[0] ?? 'anonymous';
      },
    });
    const payload = { ...supergraphRequestPayload({ query: EXAMPLE_QUERY }, SDL), headers: { 'X-User-Id': user, accept: [1, 'a'], __proto__: ['p'] } };
    expect((await coprocessor.post(JSON.parse(JSON.stringify(payload)))).body['control']).toBe('continue');
    expect(seen[0]!.headers['x-user-id']).toEqual([user]);
    expect(seen[0]!.headers['accept']).toEqual(['a']);
    expect(await remaining(store)).toBe(931);
  });

  it('answers a SupergraphRequest against an SDL that is no supergraph 503, logged once', async () => {
    const { coprocessor, logger } = await start();
    for (let i = 0; i < 2; i++) {
      const answer = await coprocessor.post(supergraphRequestPayload({ query: EXAMPLE_QUERY }, 'type Query { broken'));
      expect(answer.body['control']).toEqual({ break: 503 });
    }
    expect(logger.errors.filter((e) => e.includes('supergraph'))).toHaveLength(1);
  });

  it('answers variables nested deeper than JSON.stringify goes without failing', async () => {
    const { coprocessor } = await start();
    const deep = `${'{"a":'.repeat(200_000)}1${'}'.repeat(200_000)}`;
    const payload = JSON.stringify(supergraphRequestPayload({ query: 'query($v: String) { products(first: 1) { id } }', headers: { 'x-user-id': user } }, SDL)).replace(
      '"query":',
      `"variables":{"v":${deep}},"query":`,
    );
    const answer = await coprocessor.send(payload);
    expect(answer.status).toBe(200);
    // Not a String: refused, as the executor would refuse it.
    expect(answer.body['control']).toEqual({ break: 400 });
  });
});

describe('a forged or garbled charge never gives a token back', () => {
  it('keeps the estimate at another replica, whose store did not take the tokens, and says why', async () => {
    const a = await start();
    const b = await start({ store: a.store });
    const { id, entries } = await charged(a.coprocessor);
    const answer = await b.coprocessor.post(supergraphResponsePayload(id, EMPTY, entries, { sdl: SDL }));
    expect((answer.body['body'] as { extensions: unknown }).extensions).toEqual({ rateLimit: { api: { cost: 69, remaining: 931, capacity: 1000 } } });
    expect(await remaining(a.store)).toBe(931);
    expect(b.logger.warnings).toEqual([
      'graphql-token-bucket: a response reached this coprocessor for an operation another replica charged: it keeps its estimate, since a store gives back only tokens it took itself. Run one coprocessor per Router (a sidecar) so that both stages of a request reach the same one',
    ]);
  });

  it('prices the response against the supergraph the Router sends when it no longer keeps the one it charged with', async () => {
    const { coprocessor, logger, store } = await start();
    const { id, entries } = await charged(coprocessor);
    // Four other supergraphs since: the one priced with is out.
    for (let i = 0; i < 4; i++) {
      const other = compose(subgraphTypeDefs(), { products: `http://products-${i}:4001`, reviews: 'http://reviews:4002', inventory: 'http://inventory:4003' });
      await coprocessor.post(supergraphRequestPayload({ query: '{ __typename }' }, other));
    }
    await coprocessor.post(supergraphResponsePayload(id, EMPTY, entries));
    expect(await remaining(store)).toBe(931);
    expect(logger.warnings.join('\n')).toContain('no longer keeps (more than 4 others came since): it keeps its estimate');
    // Sent with the supergraph (`sdl: true`), the response is priced and refunded.
    await coprocessor.post(supergraphResponsePayload(id, EMPTY, entries, { sdl: SDL }));
    expect(await remaining(store)).toBe(1000);
  });

  it.each([
    ['data altered (taken and cost raised)', (e: Record<string, string>) => ({ ...e, data: e['data']!.replaceAll('"cost":69', '"cost":1000').replace('"taken":69', '"taken":1000') })],
    ['identity altered', (e: Record<string, string>) => ({ ...e, data: e['data']!.replace(/"key":"[^"]*"/, '"key":"victim"') })],
    ['signature of another secret', (e: Record<string, string>) => ({ ...e, mac: 'A'.repeat(43) })],
    ['key id of another secret', (e: Record<string, string>) => ({ ...e, kid: 'someoneelse1' })],
    ['not an object', () => 42],
    ['data not JSON', (e: Record<string, string>) => ({ ...e, data: '{' })],
  ])('gives nothing back for a charge with its %s', async (_name, tamper) => {
    const { coprocessor, logger, store } = await start();
    const { id, entries } = await charged(coprocessor);
    const sealed = entries['graphql-token-bucket::charge'] as Record<string, string>;
    const answer = await coprocessor.post(supergraphResponsePayload(id, EMPTY, { ...entries, 'graphql-token-bucket::charge': tamper(sealed) }));
    expect(answer.status).toBe(200);
    expect(answer.body['body']).toEqual(EMPTY);
    expect((answer.body['context'] as { entries: Entries }).entries['graphql-token-bucket::charge']).toBe('spent');
    expect(await remaining(store)).toBe(931);
    expect(await remaining(store, 'victim')).toBe(1000);
    expect(logger.warnings).toHaveLength(1);
  });

  it('gives nothing back for a charge sealed for another request', async () => {
    const { coprocessor, store } = await start();
    const { entries } = await charged(coprocessor);
    await coprocessor.post(supergraphResponsePayload(requestId(), EMPTY, entries));
    expect(await remaining(store)).toBe(931);
  });

  it('gives back once when the same response payload comes again', async () => {
    const { coprocessor, logger, store } = await start();
    const { id, entries } = await charged(coprocessor);
    const payload = supergraphResponsePayload(id, EMPTY, entries);
    await coprocessor.post(payload);
    expect(await remaining(store)).toBe(1000);
    await charged(coprocessor);
    expect(await remaining(store)).toBe(931);
    for (let i = 0; i < 3; i++) await coprocessor.post(payload);
    expect(await remaining(store)).toBe(931);
    expect(logger.warnings.join('\n')).toContain('came twice with the same charge');
  });

  it('gives nothing back once the refund window is over', async () => {
    const { coprocessor, store } = await start();
    const { id, entries } = await charged(coprocessor);
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + 11 * 60_000 });
    await coprocessor.post(supergraphResponsePayload(id, EMPTY, entries));
    vi.useRealTimers();
    expect(await remaining(store)).toBe(931);
  });

  it('keeps the estimate of a charge another replica sealed with another secret, and says why', async () => {
    const a = await start();
    const b = await start({ contextSecret: 'another-secret-0123456789-0123456789' });
    const { id, entries } = await charged(a.coprocessor);
    await b.coprocessor.post(supergraphResponsePayload(id, EMPTY, entries));
    expect(await remaining(a.store)).toBe(931);
    expect(b.logger.warnings).toEqual([
      'graphql-token-bucket: a response reached this coprocessor with a charge another one sealed with a different contextSecret: it keeps its estimate and has no report. Give every replica the same contextSecret',
    ]);
  });

  it('gives back no more than the response shows unused, whatever the response claims', async () => {
    const { coprocessor, store } = await start();
    const { id, entries } = await charged(coprocessor);
    // A response of more items than asked for prices above the estimate: nothing back, nothing more taken.
    const many = { data: { products: Array.from({ length: 50 }, (_, i) => ({ id: String(i), name: 'n', price: 1, reviews: [], shippingEstimate: 1 })) } };
    await coprocessor.post(supergraphResponsePayload(id, many, entries));
    expect(await remaining(store)).toBe(931);
    // A body without data (a request error, or a body sent without it) keeps the estimate.
    const second = await charged(coprocessor);
    await coprocessor.post(supergraphResponsePayload(second.id, { errors: [{ message: 'x' }] }, second.entries));
    expect(await remaining(store)).toBe(862);
  });
});

describe('what the Router sent reaches the client as it was sent', () => {
  it('leaves the client\'s variables and the response\'s data to the Router: numbers beyond 2^53 are not rounded, 1e400 is not null', async () => {
    const { coprocessor } = await start();
    const id = requestId();
    const request = JSON.stringify(supergraphRequestPayload({ query: 'query($id: ID) { product(id: $id) { id } }', headers: { 'x-user-id': user } }, SDL, { id })).replace(
      '"query":',
      '"variables":{"id":9007199254740993,"f":1e400},"query":',
    );
    const admitted = await coprocessor.send(request);
    expect(admitted.body['control']).toBe('continue');
    // The answer is the payload's own text: the body comes back byte for byte.
    expect(admitted.text).toContain('"variables":{"id":9007199254740993,"f":1e400},"query":');
    const entries = (admitted.body['context'] as { entries: Entries }).entries;
    const response = JSON.stringify(supergraphResponsePayload(id, { data: { product: { id: 'x' } } }, { ...entries, 'accepts-json': true })).replace(
      '{"product":{"id":"x"}}',
      '{"product":{"id":"x","big":18446744073709551615,"negativeZero":-0}}',
    );
    const answered = await coprocessor.send(response);
    expect(answered.status).toBe(200);
    expect(answered.text).toContain('"data":{"product":{"id":"x","big":18446744073709551615,"negativeZero":-0}}');
    expect((answered.body['body'] as { extensions: unknown }).extensions).toEqual({ rateLimit: { api: { cost: 1, actualCost: 1, remaining: 999, capacity: 1000 } } });
  });
});
