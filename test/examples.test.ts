// Every example in examples/ run as a user runs it (`npx tsx examples/x.ts`,
// PORT a free port) and sent real requests: what it prints and answers is
// what its page says. Examples a page runs with `<!-- run: … -->` blocks are
// also run by test/docs-output.test.ts.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { disposeClients, run, socketClient, start } from './support/adapters.js';
import { waitFor } from './support/graphql.js';
import { ROOT, startExample } from './support/example-process.js';
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
  });
});

describe('examples/yoga.ts', () => {
  it('serves GraphQL Yoga and refuses the 21st search with 429 and Retry-After', async () => {
    example = await startExample('examples/yoga.ts');
    await example.waitFor(/ready at http:\/\/localhost:\d+\/graphql/);
    const url = `http://localhost:${example.port}/graphql`;
    for (let i = 0; i < 20; i++) expect((await post(url, '{ search(term: "a") }', { 'x-user-id': 'yoga' })).status).toBe(200);
    const refused = await post(url, '{ search(term: "a") }', { 'x-user-id': 'yoga' });
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBe(3);
    expect(refused.body).toEqual(refusal('search', 1));
  });
});

describe('examples/subscriptions.ts', () => {
  it('streams the clock over graphql-ws and refuses the 11th subscription of a user with no event', async () => {
    example = await startExample('examples/subscriptions.ts');
    await example.waitFor(/ready at http:\/\/localhost:\d+\/graphql and ws:\/\/localhost:\d+\/graphql/);
    const socket = socketClient(`ws://localhost:${example.port}/graphql`, { userId: 'watcher' });
    for (let i = 0; i < 10; i++) {
      const clock = start(socket, { query: 'subscription { clock }' });
      await waitFor('a clock event', 10_000, () => clock.results.length > 0);
      clock.cancel();
      expect(clock.results[0]).toEqual({ data: { clock: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) as unknown } });
    }
    const refused = await run(socket, { query: 'subscription { clock }' });
    expect(refused.results).toEqual([]);
    expect(refused.errors).toEqual([expect.objectContaining({ extensions: expect.objectContaining({ code: 'RATE_LIMITED', bucket: 'live', cost: 1 }) as unknown })]);
  });
});

describe('examples/README.md', () => {
  it('lists every example, and each is run by a test', () => {
    const index = readFileSync(join(ROOT, 'examples/README.md'), 'utf8');
    const tests = ['test/examples.test.ts', 'test/docs-output.test.ts', ...readdirSync(join(ROOT, 'docs')).map((p) => `docs/${p}`), 'README.md']
      .map((file) => readFileSync(join(ROOT, file), 'utf8'))
      .join('\n');
    const files = readdirSync(join(ROOT, 'examples')).filter((f) => f.endsWith('.ts'));
    const supporting = new Set(['app.ts', 'metrics.ts']); // parts of server.ts, run with it (and by example-metrics.test.ts)
    for (const file of files) {
      expect(index, `examples/README.md lists ${file}`).toContain(`(${file})`);
      if (!supporting.has(file)) expect(tests, `a test runs examples/${file}`).toContain(`examples/${file}`);
    }
  });
});
