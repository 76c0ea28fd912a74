// ioredis clients for tests. Options favour failing fast over waiting: a test
// against a dead server should fail in seconds, not at the test timeout.
import { randomBytes } from 'node:crypto';
import { Cluster, Redis } from 'ioredis';
import type { ClusterOptions, RedisOptions } from 'ioredis';

// replyMapping is left out: ioredis types it as a generic parameter, which
// `exactOptionalPropertyTypes` will not let a pass-through object carry.
export type TestRedisOptions = Omit<RedisOptions, 'replyMapping'>;
export type TestClusterOptions = Omit<ClusterOptions, 'redisOptions'> & {
  redisOptions?: Omit<NonNullable<ClusterOptions['redisOptions']>, 'replyMapping'>;
};

export interface ClusterNodeAddress {
  host: string;
  port: number;
}

/** A standalone client; reconnects quickly after a restart. Close it with `quit()` in `afterAll`. */
export function redisClient(url: string, options: TestRedisOptions = {}): Redis {
  return new Redis(url, {
    connectTimeout: 2_000,
    maxRetriesPerRequest: 2,
    retryStrategy: (times) => Math.min(times * 50, 500),
    ...options,
  });
}

/**
 * A cluster client. Pass `inject('redisClusterNodes')` as is: when no cluster
 * could be provided it throws with instructions, so cluster tests fail rather
 * than skip.
 */
export function clusterClient(nodes: readonly ClusterNodeAddress[] | null, options: TestClusterOptions = {}): Cluster {
  if (nodes === null || nodes.length === 0) {
    throw new Error(
      'No Redis Cluster is available to the tests. Install redis-server (`apt-get install -y redis-server`) ' +
        'so the global setup can start one, or set REDIS_CLUSTER_NODES=host:port,host:port,... ' +
        '(see the "[redis]" line and warnings printed by test/support/global-setup.ts).',
    );
  }
  return new Cluster(
    nodes.map(({ host, port }) => ({ host, port })),
    {
      slotsRefreshTimeout: 2_000,
      clusterRetryStrategy: (times) => Math.min(times * 100, 1_000),
      ...options,
      redisOptions: {
        connectTimeout: 2_000,
        maxRetriesPerRequest: 2,
        ...options.redisOptions,
      },
    },
  );
}

let counter = 0;

/**
 * A key prefix no other test, file or run shares, e.g. `test:redisstore:1a2b:3:9f8e7d6c:`.
 * Only letters, digits and `:` (no `{}`: a prefix never pins a hash slot).
 */
export function uniquePrefix(label: string): string {
  const name = label.replace(/[^A-Za-z0-9]+/g, '').slice(0, 40) || 'x';
  counter += 1;
  return `test:${name}:${process.pid.toString(36)}:${counter.toString(36)}:${randomBytes(4).toString('hex')}:`;
}
