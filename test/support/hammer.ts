// One of several OS processes spending from the same Redis buckets at once
// (test/store-processes.test.ts starts them).
//
//   node --import tsx test/support/hammer.ts <redisUrl> <prefix> <attempts> <request>...
//   node --import tsx test/support/hammer.ts --cluster <host:port,...> <prefix> <attempts> <request>...
//
// Each <request> is `bucket/capacity/key/cost`; every bucket refills at
// Rate.perHour(1), so refill is negligible while it runs. With one request it
// calls `acquire`, with several `acquireAll` (all or nothing).
//
// Protocol: connects and loads the script, prints `ready`, waits for a line
// on stdin (so every process starts together), fires all attempts at once,
// then prints `{"admitted":n,"denied":m}` and exits.
import { createInterface } from 'node:readline';
import type { Cluster, Redis } from 'ioredis';
import { Rate } from '../../src/rate.js';
import type { AcquireRequest } from '../../src/stores/bucket-store.js';
import { RedisStore } from '../../src/stores/redis-store.js';
import { TokenBucket } from '../../src/token-bucket.js';
import { clusterClient, redisClient } from './clients.js';

export interface HammerResult {
  admitted: number;
  denied: number;
}

function usage(message: string): never {
  process.stderr.write(
    `hammer: ${message}\nusage: hammer.ts [--cluster host:port,...|<redisUrl>] <prefix> <attempts> <bucket/capacity/key/cost>...\n`,
  );
  process.exit(2);
}

function parseRequest(text: string): AcquireRequest {
  const [name, capacity, key, cost] = text.split('/');
  if (name === undefined || capacity === undefined || key === undefined || cost === undefined) {
    usage(`bad request ${JSON.stringify(text)}`);
  }
  return { bucket: new TokenBucket(name, Number(capacity), Rate.perHour(1)), key, cost: Number(cost) };
}

function connect(args: string[]): Redis | Cluster {
  if (args[0] === '--cluster') {
    args.shift();
    const nodes = (args.shift() ?? '').split(',').map((address) => {
      const match = /^(.+):(\d+)$/.exec(address);
      if (match === null) usage(`bad cluster node ${JSON.stringify(address)}`);
      return { host: match[1]!, port: Number(match[2]) };
    });
    return clusterClient(nodes);
  }
  const url = args.shift();
  if (url === undefined) usage('missing redisUrl');
  return redisClient(url);
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const client = connect(args);
  const [prefix, attemptsText, ...requestTexts] = args;
  const attempts = Number(attemptsText);
  if (prefix === undefined || !Number.isSafeInteger(attempts) || attempts < 1 || requestTexts.length === 0) usage('bad arguments');
  const requests = requestTexts.map(parseRequest);
  const store = new RedisStore(client, { prefix });

  // Cost 0 takes nothing, but connects (to every master of a Cluster it needs) and loads the script.
  await store.acquireAll(requests.map((r) => ({ ...r, cost: 0 })));
  process.stdout.write('ready\n');
  const input = createInterface({ input: process.stdin });
  await new Promise<void>((resolve) => input.once('line', () => resolve()));
  input.close();

  const [only] = requests;
  const answers = await Promise.all(
    Array.from({ length: attempts }, () =>
      requests.length === 1 ? store.acquire(only!.bucket, only!.key, only!.cost) : store.acquireAll(requests),
    ),
  );
  const admitted = answers.filter((a) => a.allowed).length;
  const result: HammerResult = { admitted, denied: answers.length - admitted };
  process.stdout.write(`${JSON.stringify(result)}\n`);
  await client.quit();
}

main().catch((error: unknown) => {
  process.stderr.write(`hammer: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
