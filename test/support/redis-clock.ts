// Redis's own clock, the one the stores' scripts read.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Cluster, Redis } from 'ioredis';

/** Redis TIME in ms, with µs fractions. */
export async function redisNow(client: Redis | Cluster): Promise<number> {
  const [seconds, micros] = (await client.time()).map(Number);
  return seconds! * 1000 + micros! / 1000;
}

/**
 * Waits until Redis's clock has moved `ms` past now. A Node timer may fire
 * before a whole millisecond has passed since a reply was computed (the
 * event loop's cached time can predate it), so "waiting retryAfterMs" is
 * measured where it is decided.
 */
export async function waitOnRedis(client: Redis | Cluster, ms: number): Promise<void> {
  const until = (await redisNow(client)) + ms;
  for (let left = ms; left > 0; left = until - (await redisNow(client))) await sleep(Math.ceil(left));
}
