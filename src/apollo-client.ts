/**
 * An Apollo Client 4 link that waits out a token bucket's `retryAfter` and
 * sends a rate-limited operation again:
 * `import { retryAfterLink } from 'graphql-token-bucket/apollo-client'`.
 * Like `graphql-token-bucket/client`, it pulls in no server code; it needs
 * only `@apollo/client` (an optional peer dependency of the package).
 */
import { ServerError } from '@apollo/client/errors';
import { ApolloLink } from '@apollo/client/link';
import { Observable } from '@apollo/client/utilities';
import { getRetryAfter } from './client.js';

/** Default of `maxRetries`: how many times one operation is sent again. */
export const DEFAULT_MAX_RETRIES = 3;
/** Default of `maxWaitSeconds`: the longest `retryAfter` the link waits out. */
export const DEFAULT_MAX_WAIT_SECONDS = 60;
/** The largest `maxWaitSeconds`: timers fire at once past 2^31 - 1 ms. */
export const MAX_WAIT_SECONDS_LIMIT = 2_147_483.647;

export interface RetryAfterLinkOptions {
  /**
   * How many times one operation is sent again after being rate-limited; the
   * rate-limited answer to the last try is passed on. `0` sends nothing
   * again. Default `DEFAULT_MAX_RETRIES` (3).
   */
  maxRetries?: number;
  /**
   * The longest `retryAfter`, in seconds, the link waits out; a longer one is
   * passed on at once, for the application to tell its user. At most
   * `MAX_WAIT_SECONDS_LIMIT`. Default `DEFAULT_MAX_WAIT_SECONDS` (60).
   */
  maxWaitSeconds?: number;
}

const OPTION_NAMES = new Set(['maxRetries', 'maxWaitSeconds']);

function settingsOf(options: RetryAfterLinkOptions): Required<RetryAfterLinkOptions> {
  if (options === null || typeof options !== 'object') throw new TypeError('retryAfterLink takes an options object or nothing');
  for (const name of Object.keys(options)) {
    if (!OPTION_NAMES.has(name)) throw new TypeError(`retryAfterLink has no option "${name}"; its options are maxRetries and maxWaitSeconds`);
  }
  const { maxRetries = DEFAULT_MAX_RETRIES, maxWaitSeconds = DEFAULT_MAX_WAIT_SECONDS } = options;
  if (typeof maxRetries !== 'number') throw new TypeError(`retryAfterLink option "maxRetries" must be a number, got ${typeof maxRetries}`);
  if (!Number.isSafeInteger(maxRetries) || maxRetries < 0) {
    throw new RangeError(`retryAfterLink option "maxRetries" must be an integer from 0 to 2^53 - 1, got ${String(maxRetries)}`);
  }
  if (typeof maxWaitSeconds !== 'number') throw new TypeError(`retryAfterLink option "maxWaitSeconds" must be a number, got ${typeof maxWaitSeconds}`);
  if (!(maxWaitSeconds >= 0 && maxWaitSeconds <= MAX_WAIT_SECONDS_LIMIT)) {
    throw new RangeError(`retryAfterLink option "maxWaitSeconds" must be a number of seconds from 0 to ${MAX_WAIT_SECONDS_LIMIT}, got ${String(maxWaitSeconds)}`);
  }
  return { maxRetries, maxWaitSeconds };
}

/**
 * The `retryAfter` of an operation the server refused before running it, or
 * `undefined`. A refused operation has no `data` entry (the GraphQL spec's
 * mark of an error raised before execution); a `RATE_LIMITED` error beside
 * data came from a resolver, after the operation ran, and sending it again
 * would run it twice.
 */
function refusal(answer: unknown): number | null | undefined {
  if (answer === null || typeof answer !== 'object' || (answer as { data?: unknown }).data !== undefined) return undefined;
  return getRetryAfter(answer);
}

function parseBody(text: string): unknown {
  if (!/^\s*[[{]/.test(text)) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * One `ServerError` that failed every operation of an HTTP batch at once
 * (Apollo Client fails the whole batch on a non-2xx `application/json`
 * answer). The batch hands the error to its operations synchronously, in
 * batch order; whoever receives it joins, and a microtask later each joined
 * operation gets its own result from the body by its place in the line.
 */
interface BatchFailure {
  readonly results: readonly unknown[];
  readonly members: ((own: ApolloLink.Result | undefined) => void)[];
  settled: boolean;
}

/**
 * An Apollo Client 4 link that sends an operation refused with
 * `RATE_LIMITED` again once its `retryAfter` seconds have passed, at most
 * `maxRetries` times, and passes the refusal on at once when `retryAfter`
 * is `null` (the operation can never succeed as it is) or longer than
 * `maxWaitSeconds`. Put it before the terminating `HttpLink` or
 * `BatchHttpLink`:
 *
 * ```ts
 * new ApolloClient({ cache: new InMemoryCache(), link: ApolloLink.from([retryAfterLink(), new HttpLink({ uri })]) });
 * ```
 *
 * It reads the refusal however Apollo Client delivers it: as a GraphQL result
 * (a server answering `application/graphql-response+json`, as Apollo Server
 * does for Apollo Client 4's default `Accept`) or as a `ServerError` carrying
 * the body (`application/json`). In an HTTP batch each operation is judged
 * and retried on its own. Unsubscribing (an unmounted component,
 * `client.stop()`) cancels a pending wait; nothing is sent after it.
 */
export function retryAfterLink(options: RetryAfterLinkOptions = {}): ApolloLink {
  const { maxRetries, maxWaitSeconds } = settingsOf(options);
  const batchFailures = new WeakMap<object, BatchFailure>();

  /** Calls `join` with this operation's own result from a batch's `ServerError` body, or `undefined` when it cannot tell which is its own. */
  function joinBatchFailure(error: object, results: readonly unknown[], join: (own: ApolloLink.Result | undefined) => void): void {
    let failure = batchFailures.get(error);
    if (failure === undefined) {
      const created: BatchFailure = { results, members: [], settled: false };
      failure = created;
      batchFailures.set(error, created);
      queueMicrotask(() => {
        created.settled = true;
        // An operation of the batch that did not come through this link would
        // shift every place after it: then no operation can be sure of its own.
        const sure = created.members.length === created.results.length;
        created.members.forEach((member, index) => member(sure ? (created.results[index] as ApolloLink.Result) : undefined));
      });
    }
    if (failure.settled) join(undefined);
    else failure.members.push(join);
  }

  return new ApolloLink(
    (operation, forward) =>
      new Observable<ApolloLink.Result>((observer) => {
        let retries = 0;
        // Every try gets a number; answers to an abandoned try are ignored.
        let attempt = 0;
        let subscription: { unsubscribe(): void } | undefined;
        let timer: ReturnType<typeof setTimeout> | undefined;

        /** Schedules the next try when `retryAfter` allows one; false when the answer is to be passed on. */
        const retryLater = (retryAfter: number | null | undefined): boolean => {
          if (typeof retryAfter !== 'number' || retryAfter > maxWaitSeconds || retries >= maxRetries) return false;
          retries += 1;
          attempt += 1;
          subscription?.unsubscribe();
          subscription = undefined;
          // Whole milliseconds, rounded up: some timers drop a fraction, and early is too soon.
          timer = setTimeout(() => {
            timer = undefined;
            send();
          }, Math.ceil(retryAfter * 1000));
          return true;
        };

        const send = (): void => {
          const current = ++attempt;
          let first = true;
          const passResult = (result: ApolloLink.Result): void => {
            if (first) {
              first = false;
              if (retryLater(refusal(result))) return;
            }
            observer.next(result);
          };
          const sent = forward(operation).subscribe({
            next: (result) => {
              if (current === attempt) passResult(result);
            },
            error: (error: unknown) => {
              if (current !== attempt) return;
              if (!first || !ServerError.is(error)) {
                if (!(first && retryLater(refusal(error)))) observer.error(error);
                return;
              }
              const body = parseBody(error.bodyText);
              if (!Array.isArray(body)) {
                if (!retryLater(refusal(body))) observer.error(error);
                return;
              }
              if (!body.some((result) => refusal(result) !== undefined)) {
                observer.error(error);
                return;
              }
              joinBatchFailure(error, body, (own) => {
                if (current !== attempt) return;
                if (own === undefined) {
                  observer.error(error);
                  return;
                }
                // As if the batch had been answered `application/graphql-response+json`.
                passResult(own);
                if (current === attempt) observer.complete();
              });
            },
            complete: () => {
              if (current === attempt) observer.complete();
            },
          });
          if (current === attempt) subscription = sent;
          else sent.unsubscribe();
        };

        send();
        return () => {
          attempt += 1;
          clearTimeout(timer);
          subscription?.unsubscribe();
        };
      }),
  );
}
