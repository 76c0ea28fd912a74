import { GraphQLError } from 'graphql';
import { describeError, internalError, rateLimitedError, unavailableError } from './errors.js';
import type { BucketReport, Limiter, OperationInput } from './limiter.js';
import { withRateLimitReport } from './result-extensions.js';
import type { ResultWithExtensions } from './result-extensions.js';

/** Default of `chargeEachEvent`: a subscription is charged once, when it starts. */
export const DEFAULT_CHARGE_EACH_EVENT = false;

/** The options of the adapters that serve subscriptions (graphql-ws, envelop). */
export interface SubscriptionLimitOptions {
  /**
   * Charge every event a subscription pushes, as well as its start: each event
   * costs the operation's cost again, taken from the same buckets and
   * identities just before it is sent, so a subscription that pushes n events
   * costs (n + 1) × its cost. An event a bucket denies is not sent: the
   * subscription ends with the `RATE_LIMITED` error (its `retryAfter` says when
   * to subscribe again). A store failure follows `onStoreError`. Default
   * `DEFAULT_CHARGE_EACH_EVENT` (`false`).
   */
  chargeEachEvent?: boolean;
}

/** The options of `SubscriptionLimitOptions`, by name (see `LIMITER_OPTIONS`). */
export const SUBSCRIPTION_LIMIT_OPTIONS: Readonly<Record<keyof SubscriptionLimitOptions, true>> = { chargeEachEvent: true };

/** Checks `chargeEachEvent` at construction, like every other option. */
export function chargeEachEventOption(options: SubscriptionLimitOptions, owner: string): boolean {
  const value = options.chargeEachEvent ?? DEFAULT_CHARGE_EACH_EVENT;
  if (typeof value !== 'boolean') throw new TypeError(`${owner} option "chargeEachEvent" must be a boolean, got ${String(value)}`);
  return value;
}

/**
 * A subscription's event stream whose every event is charged before it is
 * passed on. A denied event ends the stream with the limiter's error; the
 * source stream is closed then, and whenever the consumer closes this one.
 * With `report`, each event carries `extensions.rateLimit` of its own charge;
 * a function is handed that report instead, for a server that adds it to the
 * event's result itself (the stream is then of source events, not results).
 *
 * Written as a plain iterator, not an async generator: an async generator's
 * `return()` waits for a pending `next()`, so a client leaving a quiet
 * subscription would never reach the source (and its listeners would leak).
 */
export function chargeEachEvent<TContext, TResult extends ResultWithExtensions>(
  limiter: Limiter<TContext>,
  input: OperationInput<TContext>,
  events: AsyncIterable<TResult>,
  report: boolean | ((charged: Record<string, BucketReport>) => void) = limiter.settings.reportCost,
): AsyncGenerator<TResult, undefined> {
  const source = events[Symbol.asyncIterator]();
  let closed = false;
  const done = (): IteratorReturnResult<undefined> => ({ done: true, value: undefined });
  const close = async (): Promise<IteratorReturnResult<undefined>> => {
    if (!closed) {
      closed = true;
      await source.return?.();
    }
    return done();
  };

  const wrapper: AsyncGenerator<TResult, undefined> = {
    async next(): Promise<IteratorResult<TResult, undefined>> {
      if (closed) return done();
      const next = await source.next();
      if (next.done) {
        closed = true;
        return done();
      }
      let decision;
      try {
        decision = await limiter.decide(input);
      } catch (error) {
        await close();
        // The application's own GraphQLError (UNAUTHENTICATED from `identify`)
        // is for the client; anything else is a server fault, whose message
        // (a database's, say) is logged and not sent.
        if (error instanceof GraphQLError) throw error;
        input.logger.error(`graphql-token-bucket: could not charge a subscription event, the subscription ends: ${describeError(error)}`);
        throw internalError();
      }
      // The consumer left while the store answered: the event goes nowhere.
      if (closed) return done();
      switch (decision.kind) {
        case 'denied':
          await close();
          throw rateLimitedError(decision.bucket, decision.cost, decision.retryAfterMs);
        case 'store_error':
          if (!decision.allowed) {
            await close();
            throw unavailableError();
          }
          return { done: false, value: next.value };
        case 'allowed': {
          const charged = report !== false ? limiter.report(decision) : undefined;
          if (typeof report === 'function') {
            if (charged !== undefined) report(charged);
            return { done: false, value: next.value };
          }
          return { done: false, value: charged ? withRateLimitReport(next.value, charged) : next.value };
        }
        case 'free':
          return { done: false, value: next.value };
      }
    },
    return: close,
    async throw(error: unknown): Promise<IteratorResult<TResult, undefined>> {
      await close();
      throw error;
    },
    [Symbol.asyncIterator]() {
      return wrapper;
    },
  };
  return wrapper;
}

/** A subscription's stream (or an incremental delivery), as opposed to a single result. */
export function isAsyncIterable<T>(value: T): value is Extract<T, AsyncIterable<unknown>> {
  return typeof value === 'object' && value !== null && typeof (value as Partial<AsyncIterable<unknown>>)[Symbol.asyncIterator] === 'function';
}

/**
 * A subscription's event stream whose first event carries `report` (what
 * starting it cost) in `extensions.rateLimit`. A plain iterator, like
 * `chargeEachEvent`'s, so a client leaving reaches the source at once.
 */
export function reportOnFirst<TResult extends ResultWithExtensions>(
  events: AsyncIterable<TResult>,
  report: Record<string, BucketReport>,
): AsyncGenerator<TResult, undefined> {
  const source = events[Symbol.asyncIterator]();
  let sent = false;
  const wrapper: AsyncGenerator<TResult, undefined> = {
    async next(): Promise<IteratorResult<TResult, undefined>> {
      const next = await source.next();
      if (next.done) return { done: true, value: undefined };
      if (sent) return next;
      sent = true;
      return { done: false, value: withRateLimitReport(next.value, report) };
    },
    async return(): Promise<IteratorReturnResult<undefined>> {
      await source.return?.();
      return { done: true, value: undefined };
    },
    async throw(error: unknown): Promise<IteratorResult<TResult, undefined>> {
      await source.return?.();
      throw error;
    },
    [Symbol.asyncIterator]() {
      return wrapper;
    },
  };
  return wrapper;
}
