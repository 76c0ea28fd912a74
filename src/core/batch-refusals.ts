/** The HTTP status of an operation the limiter refused: denied, the store failing, `identify` failing. */
export type RefusalStatus = 429 | 503 | 500;

// A denial says when to come back, so it wins; then the store's failure.
const RANK: Readonly<Record<RefusalStatus, number>> = { 429: 3, 503: 2, 500: 1 };

/**
 * The status an HTTP response answers when the limiter refused one of its
 * operations, whatever the others' errors: a batch shares one status line,
 * which the server would otherwise give the last operation to finish. Keyed
 * by what the operations of one HTTP request share (Apollo Server's response
 * head, GraphQL Yoga's `Request`).
 */
export class BatchRefusals<K extends object> {
  private readonly statuses = new WeakMap<K, RefusalStatus>();
  /** Longest `Retry-After` of the response's denials, in whole seconds. */
  private readonly waits = new WeakMap<K, number>();

  refused(key: K | undefined, status: RefusalStatus, retryAfterMs: number | null = null): void {
    if (key === undefined) return;
    const earlier = this.statuses.get(key);
    if (earlier === undefined || RANK[status] > RANK[earlier]) this.statuses.set(key, status);
    if (retryAfterMs !== null) this.waits.set(key, Math.max(this.waits.get(key) ?? 0, Math.ceil(retryAfterMs / 1000)));
  }

  status(key: K): RefusalStatus | undefined {
    return this.statuses.get(key);
  }

  retryAfterSeconds(key: K): number | undefined {
    return this.waits.get(key);
  }
}
