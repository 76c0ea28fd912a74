// examples/mercurius.ts (docs/mercurius.md) run as a user runs it, and sent
// real requests: the 21st search of a user is refused 429 with Retry-After,
// and the 11th subscription over Mercurius' WebSocket with RATE_LIMITED.
import { afterEach, describe, expect, it } from 'vitest';
import { disposeClients, postJson, run, socketClient, start } from './support/adapters.js';
import { waitFor } from './support/graphql.js';
import type { ResponseBody } from './support/graphql.js';
import { startExample } from './support/example-process.js';
import type { ExampleProcess } from './support/example-process.js';

let example: ExampleProcess | undefined;
afterEach(async () => {
  await disposeClients();
  await example?.stop();
  example = undefined;
});

describe('examples/mercurius.ts', () => {
  it('refuses the 21st search with 429 and Retry-After, and the 11th subscription of a user with no event', async () => {
    example = await startExample('examples/mercurius.ts');
    await example.waitFor(/ready at http:\/\/localhost:\d+\/graphql and ws:\/\/localhost:\d+\/graphql/);
    const url = `http://localhost:${example.port}/graphql`;
    const search = { query: '{ search(term: "a") }' };
    // 20 in a burst, and one more for every 3 s the burst took on this machine.
    const started = Date.now();
    let admitted = 0;
    let refused = await postJson<ResponseBody>(url, search, { 'x-user-id': 'ann' });
    for (; refused.status === 200 && admitted < 100; admitted++) refused = await postJson<ResponseBody>(url, search, { 'x-user-id': 'ann' });
    expect(admitted).toBeGreaterThanOrEqual(20);
    expect(admitted).toBeLessThanOrEqual(20 + Math.ceil((Date.now() - started) / 3000));
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(refused.body.errors).toEqual([expect.objectContaining({ extensions: expect.objectContaining({ code: 'RATE_LIMITED', bucket: 'search', cost: 1 }) as unknown })]);
    expect((await postJson(url, search, { 'x-user-id': 'bob' })).status).toBe(200);

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
