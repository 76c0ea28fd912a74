// What `identify` throws reaches the client as the server would send it:
// a GraphQLError of the application's own (UNAUTHENTICATED with HTTP 401) is
// not turned into the 400 of an operation the cost analysis refuses. Nothing
// runs and nothing is charged.
import { GraphQLError } from 'graphql';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryStore, Rate, TokenBucket, tokenBucketDirectiveTypeDefs } from '../src/index.js';
import { SERVERS, startHttpServer, tokensLeft } from './support/http-servers.js';
import type { RunningHttpServer } from './support/http-servers.js';

const typeDefs = `${tokenBucketDirectiveTypeDefs}
type Query { books: [String!]! @tokenBucket(name: "api", cost: 1) }
`;
const api = new TokenBucket('api', 10, Rate.perHour(10));
let ran = 0;
const resolvers = { Query: { books: () => (ran++, ['Dune']) } };

const running: RunningHttpServer[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.stop()));
});

describe.each(SERVERS)('identify throwing on %s', (kind) => {
  it("answers a GraphQLError of the application's own with its own status", async () => {
    const store = new MemoryStore();
    const server = await startHttpServer(kind, {
      typeDefs,
      resolvers,
      limits: { store, buckets: [api] },
      identify: (user) => {
        if (user === 'nobody') throw new GraphQLError('Log in first.', { extensions: { code: 'UNAUTHENTICATED', http: { status: 401 } } });
        return user;
      },
    });
    running.push(server);
    const before = ran;
    const answer = await server.post({ query: '{ books }' });
    expect(answer.status).toBe(401);
    expect(answer.body.errors?.map((e) => [e.message, e.extensions?.['code']])).toEqual([['Log in first.', 'UNAUTHENTICATED']]);
    expect(answer.body.data).toBeUndefined();
    expect(ran).toBe(before);
    expect(await tokensLeft(store, api, 'nobody')).toBe(10);

    const signedIn = await server.post({ query: '{ books }' }, { 'x-user': 'ann' });
    expect(signedIn.status).toBe(200);
  });
});
