// SPEC §2, "Since 0.4: the price of pricing, bounded": a server given five
// concurrent hostile documents (about 200 KB each, of the shapes that made
// pricing take a gigabyte) with a 512 MB heap answers them all and keeps
// serving. Apollo Server with the limiter runs in a child process of its
// own with --max-old-space-size=512.
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { ResponseBody } from './support/graphql.js';
import { postJson } from './support/adapters.js';
import { HOSTILE_SHAPES } from './support/hostile-documents.js';
import { startHostileChild } from './support/hostile-child.js';
import type { HostileChild } from './support/hostile-child.js';

let child: HostileChild;

beforeAll(async () => {
  child = await startHostileChild();
}, 150_000);

afterAll(() => child.stop());

it('answers five concurrent distinct hostile documents with a 512 MB heap, and keeps serving', async () => {
  // One of each shape, and a second of the first with another salt: five distinct documents.
  const documents = [...HOSTILE_SHAPES.map((shape, i) => shape(i)), HOSTILE_SHAPES[0]!(99)];
  for (const document of documents) expect(document.source.length).toBeGreaterThan(200_000);
  const answers = await Promise.all(documents.map((document) => postJson<ResponseBody>(child.url, { query: document.source })));
  answers.forEach(({ status, body }, i) => {
    expect(status, `${documents[i]!.name}: ${JSON.stringify(body).slice(0, 300)}`).toBe(200);
    expect(body.errors, documents[i]!.name).toBeUndefined();
    expect(body.extensions?.['rateLimit'], documents[i]!.name).toBeDefined();
  });
  // The same process answers the next request.
  const after = await postJson<ResponseBody>(child.url, { query: '{ node(id: "after") { id } }' });
  expect(after.body.data).toEqual({ node: { id: 'after' } });
  expect(child.process.exitCode, child.output()).toBeNull();
}, 300_000);
