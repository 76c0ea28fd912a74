// `npm start`: the example server on http://localhost:4000 (or PORT).
// Uses an in-memory store, or Redis when REDIS_URL is set.
import { startStandaloneServer } from '@apollo/server/standalone';
import { Redis } from 'ioredis';
import { createExampleServer, exampleContext, storeFromEnvironment } from './app.js';

const port = Number(process.env.PORT ?? 4000);
const redis = process.env.REDIS_URL
  ? new Redis(process.env.REDIS_URL, {
      // Fail fast while Redis is away, so onStoreError applies at once.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      connectTimeout: 500,
      retryStrategy: (times) => Math.min(times * 50, 200),
    })
  : undefined;
redis?.on('error', (error: Error) => console.error(`redis: ${error.message}`));

const server = createExampleServer({ store: storeFromEnvironment(redis) });
const { url } = await startStandaloneServer(server, { listen: { port }, context: exampleContext });
console.log(`graphql-token-bucket example ready at ${url} (store: ${redis ? 'Redis' : 'memory'})`);

const shutdown = (): void => {
  void server.stop().finally(() => {
    redis?.disconnect();
    process.exit(0);
  });
};
process.once('SIGINT', shutdown);
process.once('SIGTERM', shutdown);
