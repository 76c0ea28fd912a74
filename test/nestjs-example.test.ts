// examples/nestjs (docs/nestjs.md) built as a NestJS application is built
// (tsc, with its own tsconfig.json: legacy decorators and their metadata) and
// run with node: the 21st search of a user is refused 429 with Retry-After,
// and the 11th subscription over graphql-ws with RATE_LIMITED.
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { disposeClients, postJson, run, socketClient, start } from './support/adapters.js';
import { waitFor } from './support/graphql.js';
import type { ResponseBody } from './support/graphql.js';
import { ROOT, startExample } from './support/example-process.js';
import type { ExampleProcess } from './support/example-process.js';

let built: string;
let example: ExampleProcess | undefined;

beforeAll(async () => {
  // Inside the repository, so that the built files find its node_modules.
  mkdirSync(join(ROOT, '.scratch'), { recursive: true });
  built = mkdtempSync(join(ROOT, '.scratch', 'nestjs-example-'));
  await promisify(execFile)(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'examples/nestjs', '--outDir', built], { cwd: ROOT });
}, 600_000);
afterEach(async () => {
  await disposeClients();
  await example?.stop();
  example = undefined;
});
afterAll(() => rmSync(built, { recursive: true, force: true }));

describe('examples/nestjs', () => {
  it('refuses the 21st search with 429 and Retry-After, and the 11th subscription of a user with no event', async () => {
    example = await startExample(join(built, 'examples', 'nestjs', 'main.js'));
    await example.waitFor(/ready at http:\/\/localhost:\d+\/graphql and ws:\/\/localhost:\d+\/graphql/);
    const url = `http://localhost:${example.port}/graphql`;
    const search = { query: '{ search(term: "1") { title } }' };
    // 20 in a burst, and one more for every 3 s the burst took on this machine.
    const started = Date.now();
    let admitted = 0;
    let refused = await postJson<ResponseBody>(url, search, { 'x-user-id': 'ann' });
    for (; refused.status === 200 && admitted < 100; admitted++) refused = await postJson<ResponseBody>(url, search, { 'x-user-id': 'ann' });
    expect(admitted).toBeGreaterThanOrEqual(20);
    expect(admitted).toBeLessThanOrEqual(20 + Math.ceil((Date.now() - started) / 3000));
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(refused.body).toEqual({ errors: [expect.objectContaining({ extensions: expect.objectContaining({ code: 'RATE_LIMITED', bucket: 'search', cost: 1 }) as unknown })] });
    expect((await postJson<ResponseBody>(url, { query: '{ books(first: 2) { title } }' }, { 'x-user-id': 'ann' })).body).toEqual({
      data: { books: [{ title: 'Book 1' }, { title: 'Book 2' }] },
      extensions: { rateLimit: { api: { cost: 2, remaining: 998, capacity: 1000 } } },
    });

    const socket = socketClient(`ws://localhost:${example.port}/graphql`, { userId: 'watcher' });
    for (let i = 0; i < 10; i++) {
      const clock = start(socket, { query: 'subscription { clock }' });
      await waitFor('a clock event', 10_000, () => clock.results.length > 0);
      clock.cancel();
      expect(clock.results[0]?.data).toEqual({ clock: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) as unknown });
    }
    const denied = await run(socket, { query: 'subscription { clock }' });
    expect(denied.results).toEqual([]);
    expect(denied.errors).toEqual([expect.objectContaining({ extensions: expect.objectContaining({ code: 'RATE_LIMITED', bucket: 'live', cost: 1 }) as unknown })]);
  }, 240_000);
});
