// SPEC §8: every answer is the payload the Router sent, with only what the
// coprocessor changes replaced. The payloads carry what JSON.parse and
// JSON.stringify would not give back as sent (9007199254740993, 1e400, -0,
// in the client's variables, the response's data and other context
// entries), and each answer is compared with the payload's text changed by
// hand where the coprocessor changes it: byte for byte everywhere else.
import { afterAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { Rate, RedisStore, TokenBucket } from '../src/index.js';
import { routerCoprocessor } from '../src/router/index.js';
import type { RouterCoprocessorOptions, RouterRequest } from '../src/router/index.js';
import { redisClient, uniquePrefix } from './support/clients.js';
import { compose, subgraphTypeDefs } from './support/federation.js';
import { captureLogger } from './support/graphql.js';
import { requestId, serveCoprocessor, supergraphRequestPayload, supergraphResponsePayload, without } from './support/router.js';
import type { Answered, CoprocessorServer, Entries } from './support/router.js';

const redis = redisClient(inject('redisUrl'));
const SDL = compose(subgraphTypeDefs(), { products: 'http://products:4001', reviews: 'http://reviews:4002', inventory: 'http://inventory:4003' });
const QUERY = 'query($id: ID) { product(id: $id) { id } }';
const CHARGE = 'graphql-token-bucket::charge';
const servers: CoprocessorServer[] = [];

afterAll(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop()));
  redis.disconnect();
});

let users = 0;
let user: string;
beforeEach(() => {
  users += 1;
  user = `answers-user-${users}`;
});

async function start(options: Partial<RouterCoprocessorOptions> = {}): Promise<CoprocessorServer> {
  const coprocessor = await serveCoprocessor(
    routerCoprocessor({
      store: new RedisStore(redis, { prefix: uniquePrefix('router-answers') }),
      buckets: [new TokenBucket('api', 1, Rate.perHour(1))],
      identify: (request: RouterRequest) => request.headers['x-user-id']?.[0] ?? 'anonymous',
      reportCost: true,
      refundUnusedCost: true,
      rateLimitHeaders: true,
      logger: captureLogger(),
      ...options,
    }),
  );
  servers.push(coprocessor);
  return coprocessor;
}

/** JSON text holding what a JavaScript value cannot: each marker string is written as the number it names. */
function raw(value: unknown, space?: number): string {
  return JSON.stringify(value, null, space).replaceAll('"@big"', '9007199254740993').replaceAll('"@huge"', '1e400').replaceAll('"@negzero"', '-0');
}

const NUMBERS = { big: '@big', huge: '@huge', negativeZero: '@negzero' };
/** A context entry of the Router's own, which an answer must send back as it came. */
const OTHER_ENTRIES = { 'apollo::telemetry::numbers': NUMBERS };

function requestPayload(options: { id?: string } = {}): Record<string, unknown> {
  const payload = supergraphRequestPayload({ query: QUERY, headers: { 'x-user-id': user } }, SDL, { entries: OTHER_ENTRIES, ...options });
  return { ...payload, body: { ...(payload['body'] as object), variables: { id: '@big', ...NUMBERS } } };
}

/** `text` with each `[from, to]` made, each `from` found exactly once. */
function edited(text: string, ...edits: [string, string][]): string {
  let out = text;
  for (const [from, to] of edits) {
    expect(out.split(from).length - 1, `${from} occurs once`).toBe(1);
    out = out.replace(from, () => to);
  }
  return out;
}

/** The context entry the coprocessor wrote, as its answer holds it. */
function charge(answered: Answered): unknown {
  return (answered.body['context'] as { entries: Entries }).entries[CHARGE];
}

const STAGES = ['RouterRequest', 'RouterResponse', 'ExecutionRequest', 'ExecutionResponse', 'SubgraphRequest', 'SubgraphResponse'];

describe('answers that change nothing are the payload, byte for byte', () => {
  it.each(STAGES)('%s', async (stage) => {
    const coprocessor = await start();
    const payload = { ...requestPayload(), stage, uri: '/', path: '/graphql', statusCode: 200 };
    for (const text of [raw(payload), raw(payload, 2), `\n ${raw(payload, 1)}\t\r\n`]) {
      const answered = await coprocessor.send(text);
      expect(answered.status).toBe(200);
      expect(answered.text).toBe(text);
    }
  });

  it('another protocol version, a response that holds no charge, and a charge already spent', async () => {
    const coprocessor = await start();
    const id = requestId();
    for (const payload of [
      { ...requestPayload(), version: 2 },
      supergraphResponsePayload(id, { data: { product: { id: 'x', ...NUMBERS } } }, OTHER_ENTRIES),
      supergraphResponsePayload(id, { data: { product: { id: 'x', ...NUMBERS } } }, { ...OTHER_ENTRIES, [CHARGE]: 'spent' }),
    ]) {
      const text = raw(payload);
      expect((await coprocessor.send(text)).text).toBe(text);
    }
  });

  it('a SupergraphRequest it cannot use goes on as sent; one sent without control gets control "continue" alone', async () => {
    const coprocessor = await start();
    const payload = requestPayload();
    for (const unusable of [without(payload, 'sdl'), without(payload, 'body'), { ...payload, body: { query: null } }, { ...payload, body: { query: QUERY, variables: [1] } }]) {
      const text = raw(unusable);
      expect((await coprocessor.send(text)).text).toBe(text);
    }
    const text = raw(without(payload, 'sdl', 'control'));
    const answered = await coprocessor.send(text);
    expect(answered.text).toBe(`${text.slice(0, -1)},"control":"continue"}`);
    expect(answered.body).toEqual({ ...JSON.parse(text), control: 'continue' });
  });

  it('an admitted operation with nothing for the response stage (no report, no refund, no RateLimit fields)', async () => {
    const coprocessor = await start({ reportCost: false, refundUnusedCost: false, rateLimitHeaders: false });
    const text = raw(requestPayload());
    const answered = await coprocessor.send(text);
    expect(answered.body['control']).toBe('continue');
    expect(answered.text).toBe(text);
  });
});

describe('answers that change something change only that', () => {
  it('continue: the charge is added to context.entries, everything else as sent', async () => {
    const coprocessor = await start();
    const payload = requestPayload();
    const text = raw(payload);
    const answered = await coprocessor.send(text);
    expect(answered.body['control']).toBe('continue');
    const entries = raw((payload['context'] as { entries: Entries }).entries);
    expect(answered.text).toBe(edited(text, [entries, `${entries.slice(0, -1)},"${CHARGE}":${JSON.stringify(charge(answered))}}`]));
    const sent = JSON.parse(text) as { context: { entries: Entries } };
    expect(answered.body).toEqual({ ...sent, context: { entries: { ...sent.context.entries, [CHARGE]: charge(answered) } } });
  });

  it('continue: makes context and context.entries when the payload has none', async () => {
    const coprocessor = await start({ buckets: [new TokenBucket('api', 2, Rate.perHour(1))] });
    const noContext = raw(without(requestPayload(), 'context'));
    const first = await coprocessor.send(noContext);
    expect(first.text).toBe(`${noContext.slice(0, -1)},"context":{"entries":{"${CHARGE}":${JSON.stringify(charge(first))}}}}`);
    const noEntries = raw({ ...requestPayload(), context: {} });
    const second = await coprocessor.send(noEntries);
    expect(second.text).toBe(edited(noEntries, ['"context":{}', `"context":{"entries":{"${CHARGE}":${JSON.stringify(charge(second))}}}`]));
  });

  it('break: control, body and headers replaced, the context, sdl and the rest as sent', async () => {
    const coprocessor = await start();
    await coprocessor.send(raw(requestPayload()));
    const payload = requestPayload();
    const text = raw(payload);
    const answered = await coprocessor.send(text);
    expect(answered.body['control']).toEqual({ break: 429 });
    expect((answered.body['headers'] as Record<string, string[]>)['retry-after']).toEqual(['3600']);
    expect(answered.text).toBe(
      edited(
        text,
        ['"control":"continue"', '"control":{"break":429}'],
        [`"headers":${raw(payload['headers'])}`, `"headers":${JSON.stringify(answered.body['headers'])}`],
        [`"body":${raw(payload['body'])}`, `"body":${JSON.stringify(answered.body['body'])}`],
      ),
    );
  });

  it('response: the report, the RateLimit fields and the spent entry spliced in, the data as sent', async () => {
    const coprocessor = await start();
    const id = requestId();
    const admitted = await coprocessor.send(raw(requestPayload({ id })));
    const sealed = charge(admitted);
    for (const body of [{ data: { product: { id: 'x', ...NUMBERS } } }, { data: { product: { id: 'x', ...NUMBERS } }, extensions: { trace: NUMBERS } }]) {
      // The same charge twice: the second is not refunded again, and is reported alike.
      const payload = supergraphResponsePayload(id, body, { ...OTHER_ENTRIES, [CHARGE]: sealed }, { headers: { 'content-type': ['application/json'] } });
      const text = raw(payload);
      const answered = await coprocessor.send(text);
      const report = (answered.body['body'] as { extensions: { rateLimit: unknown } }).extensions.rateLimit;
      expect(report).toEqual({ api: expect.objectContaining({ cost: 1, capacity: 1 }) as unknown });
      const headers = answered.body['headers'] as Record<string, string[]>;
      expect(Object.keys(headers)).toEqual(['content-type', 'ratelimit-policy', 'ratelimit']);
      const rateLimitFields = `"ratelimit-policy":${JSON.stringify(headers['ratelimit-policy'])},"ratelimit":${JSON.stringify(headers['ratelimit'])}`;
      const withReport = body.extensions
        ? `{"data":${raw(body.data)},"extensions":{"trace":${raw(NUMBERS)},"rateLimit":${JSON.stringify(report)}}}`
        : `{"data":${raw(body.data)},"extensions":{"rateLimit":${JSON.stringify(report)}}}`;
      expect(answered.text).toBe(
        edited(
          text,
          [`"body":${raw(body)}`, `"body":${withReport}`],
          [`"${CHARGE}":${JSON.stringify(sealed)}`, `"${CHARGE}":"spent"`],
          ['"headers":{"content-type":["application/json"]}', `"headers":{"content-type":["application/json"],${rateLimitFields}}`],
        ),
      );
    }
  });

  it('response without a report: only the entry is marked spent, the body comes back as sent', async () => {
    const coprocessor = await start({ reportCost: false, rateLimitHeaders: false });
    const id = requestId();
    const sealed = charge(await coprocessor.send(raw(requestPayload({ id }))));
    const text = raw(supergraphResponsePayload(id, { data: { product: null }, extensions: NUMBERS }, { ...OTHER_ENTRIES, [CHARGE]: sealed }));
    const answered = await coprocessor.send(text);
    expect(answered.text).toBe(edited(text, [`"${CHARGE}":${JSON.stringify(sealed)}`, `"${CHARGE}":"spent"`]));
  });
});

describe('payload text the Router does not write', () => {
  it('white space anywhere JSON allows it is kept, and the answer is the payload with the charge added', async () => {
    const coprocessor = await start();
    const text = raw(requestPayload(), 3).replaceAll('": ', '"\t :\r\n ').replaceAll(',\n', '\n ,');
    const answered = await coprocessor.send(text);
    const sent = JSON.parse(text) as { context: { entries: Entries } };
    expect(answered.body).toEqual({ ...sent, context: { entries: { ...sent.context.entries, [CHARGE]: charge(answered) } } });
    const end = text.lastIndexOf('"accepts-multipart-defer"');
    expect(answered.text.slice(0, end)).toBe(text.slice(0, end));
  });

  it('a repeated key has every occurrence set, so a reader taking the first and one taking the last read the same; none is added twice', async () => {
    const coprocessor = await start();
    const text = raw(requestPayload()).replace(/^\{/, `{"context":{"entries":{"first":${raw(NUMBERS)}}},"control":"continue",`);
    const answered = await coprocessor.send(text);
    const sealed = JSON.stringify(charge(answered));
    expect(answered.text.split(`"${CHARGE}":${sealed}`)).toHaveLength(3);
    expect(answered.text.split('"control":')).toHaveLength(3);
    const first = JSON.parse(answered.text.replace('"context":{"entries":{"accepts-json"', '"ignored":{"entries":{"accepts-json"')) as { context: { entries: Entries } };
    expect(first.context.entries).toEqual({ first: { big: 9007199254740992, huge: Infinity, negativeZero: -0 }, [CHARGE]: charge(answered) });
    expect(answered.text).toContain(`"first":${raw(NUMBERS)}`);
  });

  it('a key spelled with escapes is that key: every spelling is set; strings holding braces, quotes and backslashes are skipped whole', async () => {
    const coprocessor = await start();
    const odd = ['{', '\\', '}],"control":{"', '}"', '\\"', '\\\\', '\\u0022', '"control":"continue"}', '\ud800', 'é'];
    const text = edited(raw(requestPayload()), ['"control":"continue"', `"control":"continue","odd":${JSON.stringify(odd)},"\\u0063ontrol":"continue"`]);
    expect((await coprocessor.send(text)).body['control']).toBe('continue');
    const denied = await coprocessor.send(text);
    const sent = JSON.parse(text) as Record<string, unknown>;
    expect(denied.body).toEqual({ ...sent, control: { break: 429 }, body: denied.body['body'], headers: denied.body['headers'] });
    expect((denied.body['body'] as { errors: { extensions: { code: string } }[] }).errors[0]?.extensions.code).toBe('RATE_LIMITED');
    expect(denied.text.split('ontrol":{"break":429}')).toHaveLength(3);
    expect(denied.text).toContain(`"odd":${JSON.stringify(odd)}`);
  });
});
