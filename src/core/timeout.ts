/** The store did not answer within `storeTimeoutMs`. */
export class StoreTimeoutError extends Error {
  constructor(ms: number) {
    super(`the token bucket store did not answer within ${ms} ms`);
    this.name = 'StoreTimeoutError';
  }
}

/** Waits for the store at most `ms`; a late answer or failure is swallowed, never left unhandled. */
export function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    // Timers run before the poll phase reads sockets: after an event-loop stall
    // longer than `ms`, a store reply already waiting would lose to the timer.
    // setImmediate runs after the poll phase, so that reply wins.
    const timer = setTimeout(() => setImmediate(() => reject(new StoreTimeoutError(ms))), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}
