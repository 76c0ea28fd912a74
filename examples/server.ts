// `npm start`: the example server on http://localhost:4000 (or PORT), with
// subscriptions over WebSocket (graphql-ws) on ws://localhost:4000.
// Uses an in-memory store, or Redis when REDIS_URL is set. With METRICS_PORT
// set, the limiter's metrics are served for Prometheus on
// http://localhost:<METRICS_PORT>/metrics.
import { Redis } from 'ioredis';
import { startExampleServer, storeFromEnvironment } from './app.js';

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

const metricsPort = process.env.METRICS_PORT ? Number(process.env.METRICS_PORT) : undefined;
// Loaded only when asked for: the example runs without OpenTelemetry's SDK.
const prometheus = metricsPort === undefined ? undefined : await (await import('./metrics.js')).servePrometheusMetrics(metricsPort);

// Apollo Server's log lines (the limiter's among them), each with its level, so that a note does not read as a warning.
const logger = {
  debug: () => {},
  info: (message: string) => console.log(`info: ${message}`),
  warn: (message: string) => console.warn(`warning: ${message}`),
  error: (message: string) => console.error(`error: ${message}`),
};

const example = await startExampleServer({ store: storeFromEnvironment(redis), port, logger });
console.log(`graphql-token-bucket example ready at ${example.url}, subscriptions at ${example.wsUrl} (store: ${redis ? 'Redis' : 'memory'})`);
if (prometheus) console.log(`metrics for Prometheus at ${prometheus.url}`);

const shutdown = (): void => {
  void Promise.all([example.stop(), prometheus?.stop()]).finally(() => {
    redis?.disconnect();
    process.exit(0);
  });
};
process.once('SIGINT', shutdown);
process.once('SIGTERM', shutdown);
