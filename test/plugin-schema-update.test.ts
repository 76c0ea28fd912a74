// A gateway's schema update that names a bucket the plugin does not have
// must not turn every later request into a 500: the plugin keeps pricing
// with the last schema it accepted and says so once in the server's log.
import { ApolloServer } from '@apollo/server';
import type { GatewayInterface } from '@apollo/server-gateway-interface';
import { buildSchema, execute } from 'graphql';
import type { GraphQLSchema } from 'graphql';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryStore, Rate, TokenBucket, tokenBucketDirectiveTypeDefs, tokenBucketPlugin } from '../src/index.js';
import { captureLogger, serveHttp } from './support/graphql.js';
import type { HttpEndpoint } from './support/graphql.js';

const api = new TokenBucket('api', 10, Rate.perHour(10));

function schemaOf(sdl: string): GraphQLSchema {
  return buildSchema(`${tokenBucketDirectiveTypeDefs}\n${sdl}`);
}

/** A gateway serving one schema at a time, whose schema the test replaces. */
class SwappableGateway implements GatewayInterface {
  private listener: ((context: { apiSchema: GraphQLSchema; coreSupergraphSdl: string }) => void) | undefined;
  constructor(private schema: GraphQLSchema) {}

  onSchemaLoadOrUpdate(callback: (context: { apiSchema: GraphQLSchema; coreSupergraphSdl: string }) => void): () => void {
    this.listener = callback;
    return () => (this.listener = undefined);
  }

  async load(): ReturnType<GatewayInterface['load']> {
    this.listener?.({ apiSchema: this.schema, coreSupergraphSdl: '' });
    return {
      executor: async ({ document, request }) =>
        execute({ schema: this.schema, document, variableValues: request.variables ?? null, rootValue: { items: ['a', 'b'] } }) as never,
    };
  }

  update(schema: GraphQLSchema): void {
    this.schema = schema;
    this.listener?.({ apiSchema: schema, coreSupergraphSdl: '' });
  }

  async stop(): Promise<void> {}
}

let server: ApolloServer | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
});

describe('a schema update the plugin cannot accept', () => {
  it('keeps serving with the last accepted schema, and logs the problem once', async () => {
    const gateway = new SwappableGateway(schemaOf('type Query { items: [String] @tokenBucket(name: "api", cost: 3) }'));
    const logger = captureLogger();
    server = new ApolloServer({
      gateway,
      logger,
      plugins: [tokenBucketPlugin({ store: new MemoryStore(), buckets: [api], identify: () => 'someone' })],
    });
    const http: HttpEndpoint = await serveHttp(server, async () => ({}));

    const before = await http.post({ query: '{ items }' });
    expect(before.status).toBe(200);

    gateway.update(schemaOf('type Query { items: [String] @tokenBucket(name: "renamed", cost: 1) }'));
    const errorsAfterUpdate = logger.errors.filter((e) => e.includes('graphql-token-bucket'));
    expect(errorsAfterUpdate).toHaveLength(1);
    expect(errorsAfterUpdate[0]).toContain('"renamed"');

    // 10 tokens, 3 per operation under the accepted schema: 3 taken already, 2 more fit, the 4th is denied.
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push(await http.post({ query: '{ items }' }));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 429, 429]);
    expect(answers[0]!.body.data).toEqual({ items: ['a', 'b'] });
    expect(answers[2]!.body.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', bucket: 'api', cost: 3 });
    // Still one line in the log however many requests followed.
    expect(logger.errors.filter((e) => e.includes('graphql-token-bucket'))).toHaveLength(1);
  });

  it('charges what the refused schema added, as that schema prices it', async () => {
    const gateway = new SwappableGateway(schemaOf('type Query @tokenBucket(name: "api", cost: 3) { items: [String] }'));
    const logger = captureLogger();
    server = new ApolloServer({
      gateway,
      logger,
      plugins: [tokenBucketPlugin({ store: new MemoryStore(), buckets: [api], identify: () => 'someone', reportCost: true })],
    });
    const http: HttpEndpoint = await serveHttp(server, async () => ({}));
    expect((await http.post({ query: '{ items }' })).body.extensions).toEqual({ rateLimit: { api: { cost: 3, remaining: 7, capacity: 10 } } });

    // A new field under the type's directive, and a field naming a bucket the plugin does not have.
    gateway.update(schemaOf('type Query @tokenBucket(name: "api", cost: 3) { items: [String] more: [String] odd: String @tokenBucket(name: "renamed", cost: 1) }'));
    expect(logger.errors.filter((e) => e.includes('graphql-token-bucket'))).toHaveLength(1);
    const more = await http.post({ query: '{ more }' });
    expect(more.status).toBe(200);
    expect(more.body.extensions).toEqual({ rateLimit: { api: { cost: 3, remaining: 4, capacity: 10 } } });
    const both = await http.post({ query: '{ items more }' });
    expect(both.status).toBe(429);
    expect(both.body.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', bucket: 'api', cost: 6 });
    expect((await http.post({ query: '{ more }' })).body.extensions).toEqual({ rateLimit: { api: { cost: 3, remaining: 1, capacity: 10 } } });
  });

  it('still fails the start when the first schema is not acceptable', async () => {
    const gateway = new SwappableGateway(schemaOf('type Query { items: [String] @tokenBucket(name: "renamed", cost: 1) }'));
    server = new ApolloServer({
      gateway,
      logger: captureLogger(),
      plugins: [tokenBucketPlugin({ store: new MemoryStore(), buckets: [api], identify: () => 'someone' })],
    });
    const starting = server.start();
    server = undefined; // never started: nothing to stop
    await expect(starting).rejects.toThrow(/"renamed"/);
  });
});
