// Apollo Client 4 with retryAfterLink, against the example server (`npm start`
// in another terminal): `npx tsx examples/apollo-client.ts`. GRAPHQL_URL
// points it at another server.
import { ApolloClient, ApolloLink, HttpLink, InMemoryCache, gql } from '@apollo/client';
import { retryAfterLink } from '../src/apollo-client.js';
import { getRetryAfter } from '../src/client.js';

const client = new ApolloClient({
  cache: new InMemoryCache(),
  link: ApolloLink.from([
    retryAfterLink({ maxRetries: 3, maxWaitSeconds: 60 }),
    new HttpLink({ uri: process.env.GRAPHQL_URL ?? 'http://localhost:4000/', headers: { 'x-user-id': 'reader' } }),
  ]),
});

// `search` costs 5 of the example server's 20 tokens, refilled 1 every 3 s.
const SEARCH = gql`
  query Search($first: Int!) {
    search(term: "Book", first: $first) {
      id
    }
  }
`;
for (let i = 1; i <= 5; i++) {
  const started = Date.now();
  try {
    await client.query({ query: SEARCH, variables: { first: 3 }, fetchPolicy: 'no-cache' });
    console.log(`search ${i}: served after ${((Date.now() - started) / 1000).toFixed(1)} s`);
  } catch (error) {
    const retryAfter = getRetryAfter(error);
    console.log(retryAfter === null ? 'too expensive: ask for less' : `refused: ${String(error)}`);
  }
}
