// SPEC §2, "Since 0.4: the price of pricing, bounded": a field each
// implementation of an interface narrows to its own type (`child: Node` on
// `Node`, `child: T7` on `T7`) has its sub-selections collected again per
// type, which grows with the schema and not the document. Each such level
// spends the pricing budget in proportion to what it keeps, and a document
// keeps no more levels between pricings than it has selection sets. Aliases
// of one field that run alike are priced once and counted, on each type.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryStore, Rate, TokenBucket } from '../src/index.js';
import { postJson } from './support/adapters.js';
import { RecordingStore, errorCodes } from './support/graphql.js';
import type { ResponseBody } from './support/graphql.js';
import { startHostileChild } from './support/hostile-child.js';
import type { HostileChild } from './support/hostile-child.js';
import { TRANSPORTS, serveLimited } from './support/limited-servers.js';
import type { LimitedServer } from './support/limited-servers.js';
import { NARROWED_SCHEMA, narrowedAliases, narrowedChildren, narrowedResolvers } from './support/narrowed-documents.js';

describe.each(TRANSPORTS)('a fragment on an interface selecting a narrowed field, on %s', (transport) => {
  let server: LimitedServer;
  const store = new RecordingStore(new MemoryStore());
  beforeAll(async () => {
    server = await serveLimited(transport, NARROWED_SCHEMA, narrowedResolvers, {
      store,
      buckets: [new TokenBucket('api', 1_000_000_000, Rate.perSecond(1))],
      reportCost: true,
    });
  });
  afterAll(() => server.stop());

  it('prices a few keys as the most expensive type: 5 × (T999 1,000 + 3 children 1,000 each)', async () => {
    const { status, body } = await server.post({ query: narrowedChildren(3) }, `${transport}-few`);
    expect(status, JSON.stringify(body).slice(0, 300)).toBe(200);
    expect((body.extensions?.['rateLimit'] as Record<string, { cost: number }>)['api']?.cost).toBe(20_000);
  });

  it('prices 20,000 aliases of one field once per type each weighs differently: 1 × (T999 1,000 + 20,000 × 1,000)', async () => {
    const query = narrowedAliases(20_000);
    expect(query.length).toBeGreaterThan(200_000);
    const { status, body } = await server.post({ query }, `${transport}-aliases`);
    expect(status, JSON.stringify(body).slice(0, 300)).toBe(200);
    expect((body.extensions?.['rateLimit'] as Record<string, { cost: number }>)['api']?.cost).toBe(20_001_000);
  });

  it('refuses a 9 KB document whose 300 keys would be collected on 1,000 types: 400 COST_ANALYSIS_ABORTED, no store call', async () => {
    const calls = store.calls.length;
    const { status, body } = await server.post({ query: narrowedChildren(300, 1) }, `${transport}-many`);
    expect(status, JSON.stringify(body).slice(0, 300)).toBe(400);
    expect(errorCodes(body)).toEqual(['COST_ANALYSIS_ABORTED']);
    expect(body.data).toBeUndefined();
    expect(store.calls.length).toBe(calls);
  });
});

describe('Apollo Server with a 512 MB heap', () => {
  let child: HostileChild;
  beforeAll(async () => {
    child = await startHostileChild('narrowed');
  }, 150_000);
  afterAll(() => child.stop());

  it('refuses five concurrent such documents, prices twelve smaller distinct ones in turn, and keeps serving', async () => {
    const refused = await Promise.all([1, 2, 3, 4, 5].map((salt) => postJson<ResponseBody>(child.url, { query: narrowedChildren(300, salt) })));
    for (const { status, body } of refused) {
      expect(status, JSON.stringify(body).slice(0, 300)).toBe(400);
      expect(errorCodes(body)).toEqual(['COST_ANALYSIS_ABORTED']);
    }
    // Each collects 25,000 levels and is priced; none is kept with its document (Apollo Server keeps the documents).
    for (let salt = 10; salt < 22; salt++) {
      const { status, body } = await postJson<ResponseBody>(child.url, { query: narrowedChildren(25, salt) });
      expect(status, `document ${salt}: ${JSON.stringify(body).slice(0, 300)}`).toBe(200);
      expect((body.extensions?.['rateLimit'] as Record<string, { cost: number }>)['api']?.cost).toBe(130_000);
    }
    const after = await postJson<ResponseBody>(child.url, { query: '{ nodes(first: 1) { id } }' });
    expect(after.body.data).toEqual({ nodes: [{ id: '0' }] });
    expect(child.process.exitCode, child.output()).toBeNull();
  }, 300_000);
});
