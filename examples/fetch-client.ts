// A client without a GraphQL library: `fetch` and getRetryAfter, against the
// example server (`npm start` in another terminal):
// `npx tsx examples/fetch-client.ts`. GRAPHQL_URL points it at another server.
import { getRetryAfter } from '../src/client.js';

const url = process.env.GRAPHQL_URL ?? 'http://localhost:4000/';

/** Sends `body`; when it is refused, waits `retryAfter` and sends it again, `attempts` times in all. */
async function query(body: object, attempts = 3): Promise<unknown> {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-user-id': 'fetcher' }, body: JSON.stringify(body) });
  const result: unknown = await response.json();
  const retryAfter = getRetryAfter(result);
  if (retryAfter === undefined || attempts === 1) return result;
  if (retryAfter === null) throw new Error('This request is too expensive: ask for fewer items.');
  await new Promise((resolve) => setTimeout(resolve, retryAfter * 1000));
  return query(body, attempts - 1);
}

// The fifth search waits until `search` holds its 5 tokens again.
for (let i = 1; i <= 5; i++) {
  const started = Date.now();
  await query({ query: '{ search(term: "Book 1", first: 1) { title } }' });
  console.log(`search ${i}: answered after ${((Date.now() - started) / 1000).toFixed(1)} s`);
}
// An export that can never fit is not retried.
try {
  await query({ query: '{ export(rows: 100000) { id } }' });
} catch (error) {
  console.log(String(error));
}
