// Every example in examples/ run as a user runs it (`npx tsx examples/x.ts`,
// PORT a free port) and sent real requests: what it prints and answers is
// what its page says. Examples a page runs with `<!-- run: … -->` blocks are
// also run by test/docs-output.test.ts.
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { disposeClients, run, socketClient, start } from './support/adapters.js';
import { codeBlocks, manualPages, outputDifference } from './support/docs-blocks.js';
import { waitFor } from './support/graphql.js';
import { ROOT, startExample } from './support/example-process.js';
import { EXAMPLE_QUERY, compose, subgraphTypeDefs } from './support/federation.js';
import { supergraphRequestPayload, supergraphResponsePayload } from './support/router.js';
import type { ExampleProcess } from './support/example-process.js';

let example: ExampleProcess | undefined;
afterEach(async () => {
  await disposeClients();
  await example?.stop();
  example = undefined;
});

async function post(url: string, query: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: Headers; body: unknown }> {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ query }) });
  return { status: response.status, headers: response.headers, body: await response.json() };
}

const refusal = (bucket: string, cost: number) => ({
  errors: [
    expect.objectContaining({
      extensions: expect.objectContaining({ code: 'RATE_LIMITED', bucket, cost, retryAfter: expect.any(Number) as unknown }),
    }),
  ],
});

/** 30 searches of one user at once: the burst of 20 is admitted (and what refilled meanwhile, a token every 3 s), the rest refused. */
async function expectSearchBurst(url: string, query: string): Promise<void> {
  const answers = await Promise.all(Array.from({ length: 30 }, () => post(url, query, { 'x-user-id': 'burst' })));
  const admitted = answers.filter((a) => a.status === 200);
  const refused = answers.filter((a) => a.status === 429);
  expect(admitted.length).toBeGreaterThanOrEqual(20);
  expect(admitted.length + refused.length).toBe(30);
  expect(refused.length).toBeGreaterThan(0);
  for (const answer of refused) {
    expect(answer.body).toMatchObject(refusal('search', 1));
    const retryAfter = (answer.body as { errors: [{ extensions: { retryAfter: number } }] }).errors[0].extensions.retryAfter;
    expect(Number(answer.headers.get('retry-after'))).toBe(Math.ceil(retryAfter));
    expect(retryAfter).toBeLessThanOrEqual(3);
  }
}

/** Ten `subscription { clock }` of one user each get an event; the 11th within the minute gets RATE_LIMITED and none. */
async function expectEleventhClockRefused(wsUrl: string): Promise<void> {
  const socket = socketClient(wsUrl, { userId: 'watcher' });
  for (let i = 0; i < 10; i++) {
    const clock = start(socket, { query: 'subscription { clock }' });
    await waitFor('a clock event', 10_000, () => clock.results.length > 0);
    clock.cancel();
    expect(clock.results[0]?.data).toEqual({ clock: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) as unknown });
  }
  const refused = await run(socket, { query: 'subscription { clock }' });
  expect(refused.results).toEqual([]);
  expect(refused.errors).toEqual([expect.objectContaining({ extensions: expect.objectContaining({ code: 'RATE_LIMITED', bucket: 'live', cost: 1 }) as unknown })]);
}

describe('npm start (examples/server.ts)', () => {
  it('says how subscriptions are limited as an info line, then where it serves, and limits both transports', async () => {
    example = await startExample('examples/server.ts', { REDIS_URL: '' });
    await example.waitFor(/ready at/);
    const lines = example.output.split('\n');
    expect(lines[0]).toBe(
      'info: graphql-token-bucket: subscriptions (@tokenBucket on Subscription.countdown) are limited over graphql-ws by tokenBucketSubscriptions; this plugin charges operations sent over HTTP',
    );
    expect(lines[1]).toBe(`graphql-token-bucket example ready at http://localhost:${example.port}/, subscriptions at ws://localhost:${example.port}/ (store: memory)`);

    const url = `http://localhost:${example.port}/`;
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await post(url, '{ search(term: "book", first: 2) { title } }', { 'x-user-id': 'npm-start' })).status);
    expect(statuses).toEqual([200, 200, 200, 200, 429]);

    const socket = socketClient(`ws://localhost:${example.port}/`, { 'x-user-id': 'npm-start' });
    const outcome = await run(socket, { query: 'subscription { countdown(from: 1, everyMs: 10) }' });
    expect(outcome.results.map((r) => r.data)).toEqual([{ countdown: 1 }, { countdown: 0 }]);
  }, 240_000);
});

describe('examples/yoga.ts', () => {
  it('serves GraphQL Yoga: a burst of 20 searches, then 429 with Retry-After', async () => {
    example = await startExample('examples/yoga.ts');
    await example.waitFor(/ready at http:\/\/localhost:\d+\/graphql/);
    await expectSearchBurst(`http://localhost:${example.port}/graphql`, '{ search(term: "a") }');
  }, 240_000);
});

describe('examples/subscriptions.ts', () => {
  it('streams the clock over graphql-ws and refuses the 11th subscription of a user with no event', async () => {
    example = await startExample('examples/subscriptions.ts');
    await example.waitFor(/ready at http:\/\/localhost:\d+\/graphql and ws:\/\/localhost:\d+\/graphql/);
    await expectEleventhClockRefused(`ws://localhost:${example.port}/graphql`);
  }, 240_000);
});

describe('examples/mercurius.ts', () => {
  it('serves Fastify and Mercurius: a burst of 20 searches, then 429 with Retry-After; the 11th subscription refused', async () => {
    example = await startExample('examples/mercurius.ts');
    await example.waitFor(/ready at http:\/\/localhost:\d+\/graphql and ws:\/\/localhost:\d+\/graphql/);
    await expectSearchBurst(`http://localhost:${example.port}/graphql`, '{ search(term: "a") }');
    await expectEleventhClockRefused(`ws://localhost:${example.port}/graphql`);
  }, 240_000);
});

describe('examples/nestjs', () => {
  // Built as Nest builds an application (tsc, with the example's tsconfig.json), inside the repository so that it finds node_modules.
  let built = '';
  beforeAll(async () => {
    mkdirSync(join(ROOT, '.scratch'), { recursive: true });
    built = mkdtempSync(join(ROOT, '.scratch', 'nestjs-example-'));
    await promisify(execFile)(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'examples/nestjs', '--outDir', built], { cwd: ROOT });
  }, 600_000);
  afterAll(() => rmSync(built, { recursive: true, force: true }));

  it('serves NestJS with the Apollo driver: a burst of 20 searches, then 429 with Retry-After; a book costs 1; the 11th subscription refused', async () => {
    example = await startExample(join(built, 'examples', 'nestjs', 'main.js'));
    await example.waitFor(/ready at http:\/\/localhost:\d+\/graphql and ws:\/\/localhost:\d+\/graphql/);
    const url = `http://localhost:${example.port}/graphql`;
    await expectSearchBurst(url, '{ search(term: "1") { title } }');
    expect((await post(url, '{ books(first: 2) { title } }', { 'x-user-id': 'reader' })).body).toEqual({
      data: { books: [{ title: 'Book 1' }, { title: 'Book 2' }] },
      extensions: { rateLimit: { api: { cost: 2, remaining: 998, capacity: 1000 } } },
    });
    await expectEleventhClockRefused(`ws://localhost:${example.port}/graphql`);
  }, 240_000);
});

describe('examples/measure-mode.ts', () => {
  it('runs the fifth search that the measured bucket would deny, and logs the warning docs/measure-mode.md shows', async () => {
    example = await startExample('examples/measure-mode.ts');
    await example.waitFor(/ready at http:\/\/localhost:\d+\//);
    const url = `http://localhost:${example.port}/`;
    const answers = [];
    for (let i = 0; i < 5; i++) answers.push(await post(url, '{ search(term: "Dune") { title } }', { 'x-user-id': 'ann' }));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200]);
    const [warning] = await example.waitFor(/^graphql-token-bucket: would deny .*$/m);
    const shown = codeBlocks(ROOT, 'docs/measure-mode.md').find((b) => b.text.startsWith('graphql-token-bucket: would deny'));
    expect(shown, 'docs/measure-mode.md shows the warning').toBeDefined();
    expect(outputDifference(shown?.text ?? '', warning)).toBeUndefined();
  }, 240_000);
});

describe('examples/router-coprocessor.ts', () => {
  it('answers the Router: admits with its charge in the context, reports and refunds the response, then refuses with 429', async () => {
    example = await startExample('examples/router-coprocessor.ts', { REDIS_URL: inject('redisUrl') });
    await example.waitFor(/coprocessor ready at http:\/\/127\.0\.0\.1:\d+\//);
    const url = `http://127.0.0.1:${example.port}/`;
    const sdl = compose(subgraphTypeDefs(), { products: 'http://products:4001', reviews: 'http://reviews:4002', inventory: 'http://inventory:4003' });
    const sub = `example-${process.pid}-${Date.now()}`;
    const answer = async (payload: unknown): Promise<Record<string, unknown>> =>
      (await (await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(payload) })).json()) as Record<string, unknown>;
    const claims = { 'apollo::authentication::jwt_claims': { sub } };
    // first: 30 costs 690 of the 1,000 (3 × 23 a product, docs/federation.md).
    const query = EXAMPLE_QUERY.replace('first: 3', 'first: 30');
    const request = supergraphRequestPayload({ query }, sdl, { entries: claims });
    const admitted = await answer(request);
    expect(admitted['control']).toBe('continue');
    const entries = (admitted['context'] as { entries: Record<string, unknown> }).entries;
    const response = await answer(supergraphResponsePayload(request['id'] as string, { data: { products: [] } }, entries));
    expect((response['body'] as Record<string, unknown>)['extensions']).toEqual({ rateLimit: { api: { cost: 690, actualCost: 0, remaining: 1000, capacity: 1000 } } });
    expect(await answer(supergraphRequestPayload({ query }, sdl, { entries: claims }))).toMatchObject({ control: 'continue' });
    const refused = await answer(supergraphRequestPayload({ query }, sdl, { entries: claims }));
    expect(refused['control']).toEqual({ break: 429 });
    expect((refused['headers'] as Record<string, string[]>)['retry-after']).toEqual([expect.stringMatching(/^\d+$/)]);
  });
});

describe('examples/README.md', () => {
  it('lists every example, and each is run by a test (a test file names it, or a page\'s run block runs it)', () => {
    const index = readFileSync(join(ROOT, 'examples/README.md'), 'utf8');
    const runBlocks = manualPages(ROOT)
      .flatMap((page) => codeBlocks(ROOT, page))
      .filter((b) => b.mark?.kind === 'run')
      .map((b) => b.text);
    const tests = readdirSync(join(ROOT, 'test')).filter((f) => f.endsWith('.test.ts'));
    const runners = [...tests.map((f) => readFileSync(join(ROOT, 'test', f), 'utf8')), ...runBlocks].join('\n');
    const files = [...readdirSync(join(ROOT, 'examples')), ...readdirSync(join(ROOT, 'examples/federation')).map((f) => `federation/${f}`)].filter((f) => f.endsWith('.ts'));
    expect(index, 'examples/README.md lists nestjs/').toContain('(nestjs/');
    expect(runners, 'a test runs examples/nestjs').toContain("'examples/nestjs'");
    // Parts of server.ts, run with it (metrics.ts also by example-metrics.test.ts), and of the federation examples.
    const parts = new Set(['app.ts', 'metrics.ts', 'federation/subgraphs.ts']);
    for (const file of files) {
      expect(index, `examples/README.md lists ${file}`).toContain(`(${file})`);
      if (!parts.has(file)) expect(runners, `a test runs examples/${file}`).toContain(`examples/${file}`);
    }
  });
});
