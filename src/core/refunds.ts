import type { BucketStore } from '../stores/bucket-store.js';

/** Default of `refundUnusedCost`: an operation pays its estimate. */
export const DEFAULT_REFUND_UNUSED_COST = false;

/** What a refund changed, parallel to the admitted decision's `charges`. */
export interface Refunded {
  /** What the response cost in each bucket: never above the estimate. */
  readonly actualCosts: readonly number[];
  /** The whole tokens each bucket holds after the refund. */
  readonly remaining: readonly number[];
}

/** `refundUnusedCost` with a store that cannot give tokens back is a programming error. */
export function assertCanRefund(store: BucketStore, owner: string): void {
  const refunds = store as Partial<Record<'refund' | 'refundAll', unknown>>;
  if (typeof refunds.refundAll !== 'function' && typeof refunds.refund !== 'function') {
    throw new TypeError(`${owner} option "refundUnusedCost" needs a store with refundAll or refund (RedisStore and MemoryStore have both)`);
  }
}
