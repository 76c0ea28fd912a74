import type { TokenBucket } from '../token-bucket.js';
import type { BucketKey } from './bucket-store.js';

/** What keeps answers of a store that tokens coming back make stale: a limiter's deny cache. */
export interface ReturnsWatcher {
  /**
   * Tokens came back to the pair (a refund or a reset): what was remembered of
   * it no longer holds. `left`: the whole tokens it holds after, when known.
   */
  forget(bucket: TokenBucket, key: BucketKey, left?: number): void;
}

/**
 * Per store object, what watches it. Held weakly: a limiter dropped with its
 * server is not kept alive by the store it used.
 */
const watchers = new WeakMap<object, Set<WeakRef<ReturnsWatcher>>>();

/**
 * Tells `watcher` of every refund and reset made through `store`, by
 * whichever caller: every limiter of a process sharing a store (an Apollo
 * Server plugin and graphql-ws hooks, say) and the application's own
 * `store.reset` are seen by all of them.
 */
export function watchReturns(store: object, watcher: ReturnsWatcher): void {
  let watching = watchers.get(store);
  if (watching === undefined) {
    watching = new Set();
    watchers.set(store, watching);
  }
  for (const ref of watching) if (ref.deref() === undefined) watching.delete(ref);
  watching.add(new WeakRef(watcher));
}

/** Tokens came back to these pairs through `store` (called once the store has applied them). */
export function tokensReturned(store: object, pairs: Iterable<{ readonly bucket: TokenBucket; readonly key: BucketKey; readonly left?: number | undefined }>): void {
  const watching = watchers.get(store);
  if (watching === undefined) return;
  for (const ref of watching) {
    const watcher = ref.deref();
    if (watcher === undefined) {
      watching.delete(ref);
      continue;
    }
    for (const { bucket, key, left } of pairs) watcher.forget(bucket, key, left);
  }
}
