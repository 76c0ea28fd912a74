import { GraphQLError } from 'graphql';
import type { GraphQLErrorExtensions } from 'graphql';
import { RATE_LIMITED, RATE_LIMITER_UNAVAILABLE } from '../client.js';
import type { TokenBucket } from '../token-bucket.js';

/**
 * How a server's transport wants an error's HTTP status and headers: Apollo
 * Server and GraphQL Yoga both read `extensions.http`, each in its own shape.
 * Transports without HTTP (graphql-ws) give none. (Its result is cast where
 * it is used: GraphQL Yoga's typings declare Yoga's shape for every program
 * that imports them, Apollo Server's included.)
 */
export type HttpExtension = (status: number, headers: Readonly<Record<string, string>>) => unknown;

/** The error of an operation a bucket denies: `retryAfterMs` null when it can never succeed. */
export function rateLimitedError(
  bucket: TokenBucket,
  cost: number,
  retryAfterMs: number | null,
  http?: HttpExtension,
): GraphQLError {
  const tokens = cost === 1 ? '1 token' : `${cost} tokens`;
  const message =
    retryAfterMs === null
      ? `This operation costs ${tokens} of "${bucket.name}", more than its capacity of ${bucket.capacity}: it can never succeed. Split it into smaller operations.`
      : `Rate limit of "${bucket.name}" exceeded: this operation costs ${tokens}. Retry after ${retryAfterMs / 1000} s.`;
  const headers: Record<string, string> = retryAfterMs === null ? {} : { 'retry-after': String(Math.ceil(retryAfterMs / 1000)) };
  return new GraphQLError(message, {
    extensions: {
      code: RATE_LIMITED,
      retryAfter: retryAfterMs === null ? null : retryAfterMs / 1000,
      bucket: bucket.name,
      cost,
      ...(http ? { http: http(429, headers) } : {}),
    } as GraphQLErrorExtensions,
  });
}

/** The error of an operation denied because the store failed under `onStoreError: 'deny'`. */
export function unavailableError(http?: HttpExtension): GraphQLError {
  return new GraphQLError('The rate limiter is unavailable; try again shortly.', {
    extensions: { code: RATE_LIMITER_UNAVAILABLE, ...(http ? { http: http(503, {}) } : {}) } as GraphQLErrorExtensions,
  });
}

/**
 * The error of an operation that touches a bucket while the served schema is
 * one the limiter refused (logged when it arrived) and none was accepted
 * before it: the limiter cannot price it, so it is not run. HTTP 503.
 */
export function schemaRefusedError(): GraphQLError {
  return new GraphQLError('The rate limiter cannot price operations against the schema being served; try again shortly.', {
    extensions: { code: RATE_LIMITER_UNAVAILABLE },
  });
}

/** What a client is told of a server fault (the fault itself is logged): HTTP 500 where there is HTTP. */
export function internalError(http?: HttpExtension): GraphQLError {
  return new GraphQLError('Internal server error', {
    extensions: { code: 'INTERNAL_SERVER_ERROR', ...(http ? { http: http(500, {}) } : {}) } as GraphQLErrorExtensions,
  });
}

/**
 * A GraphQL error the cost analysis raised (an operation it refuses to price):
 * a client error. One that already says its HTTP status (the application's
 * own, thrown by `identify`: UNAUTHENTICATED with 401) keeps it.
 */
export function withHttpStatus(error: GraphQLError, status: number, http?: HttpExtension): GraphQLError {
  if (!http || error.extensions['http'] !== undefined) return error;
  // An unavailable limiter is the server's fault, whichever path found it.
  if (error.extensions['code'] === RATE_LIMITER_UNAVAILABLE) status = 503;
  return new GraphQLError(error.message, {
    nodes: error.nodes ?? null,
    source: error.source ?? null,
    positions: error.positions ?? null,
    path: error.path ?? null,
    originalError: error.originalError ?? null,
    extensions: { ...error.extensions, http: http(status, {}) } as GraphQLErrorExtensions,
  });
}

export function describeError(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const bucket = typeof error === 'object' && error !== null ? identifyFaults.get(error) : undefined;
  return bucket === undefined ? message : `identify threw for bucket "${bucket}": ${message}`;
}

/** What `identify` threw, by the bucket it was asked for: the log names it. */
const identifyFaults = new WeakMap<object, string>();

/**
 * What `identify` threw for `bucket`, to be thrown on unchanged (the
 * application's own errors keep their class and status); `describeError`
 * then names the bucket.
 */
export function identifyFault(error: unknown, bucket: string): unknown {
  if (typeof error !== 'object' || error === null) return new Error(`identify threw for bucket "${bucket}": ${String(error)}`);
  identifyFaults.set(error, bucket);
  return error;
}

/**
 * What the client gets when `identify` or the store throws for one
 * operation: a generic `INTERNAL_SERVER_ERROR` (a database's message stays
 * in the log), for that operation alone.
 */
export function operationFault(error: unknown, logger: { error(message: string): void }, http?: HttpExtension): GraphQLError {
  logger.error(`graphql-token-bucket: could not price the operation, it is refused: ${describeError(error)}`);
  return internalError(http);
}
