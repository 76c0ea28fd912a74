/**
 * Helpers for GraphQL clients. This module imports nothing from the server
 * side, so browsers and mobile bundles can use it alone:
 * `import { getRetryAfter } from 'graphql-token-bucket/client'`.
 */

/** `extensions.code` of an operation denied by a token bucket. */
export const RATE_LIMITED = 'RATE_LIMITED';
/** `extensions.code` when the limiter's store failed and `onStoreError` is `'deny'`. */
export const RATE_LIMITER_UNAVAILABLE = 'RATE_LIMITER_UNAVAILABLE';

interface ErrorLike {
  extensions?: unknown;
}

/** The JSON value of a response body, or `undefined` when it is not JSON (an HTML error page, a proxy's text). */
function parseJson(text: string): unknown {
  // Only an object or an array can carry GraphQL errors; skip parsing anything else.
  if (!/^\s*[[{]/.test(text)) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

function errorsOf(value: unknown, depth = 0): unknown[] {
  if (value === null || typeof value !== 'object' || depth > 4) return [];
  const candidate = value as Record<string, unknown>;
  const found: unknown[] = [];
  // A GraphQL response body, or an error object carrying one.
  if (Array.isArray(candidate.errors)) {
    for (const error of candidate.errors as unknown[]) {
      found.push(error);
      // Apollo Gateway answers a subgraph's non-2xx response with its own
      // error, the subgraph's body in `extensions.response.body`.
      const response = (error as { extensions?: { response?: unknown } } | null)?.extensions?.response;
      if (response !== undefined) found.push(...errorsOf(response, depth + 1));
    }
  }
  if (Array.isArray(candidate.graphQLErrors)) found.push(...candidate.graphQLErrors);
  if ('extensions' in candidate) found.push(candidate);
  // Apollo Client 3 puts a non-2xx response's body in networkError.result.
  for (const nested of ['result', 'response', 'body', 'cause', 'networkError']) {
    const inner = candidate[nested];
    if (inner !== candidate) found.push(...errorsOf(inner, depth + 1));
  }
  if (typeof candidate.body === 'string') found.push(...errorsOf(parseJson(candidate.body), depth + 1));
  // Apollo Client 4's ServerError keeps only the body's text.
  if (typeof candidate.bodyText === 'string') found.push(...errorsOf(parseJson(candidate.bodyText), depth + 1));
  if (Array.isArray(value)) {
    for (const item of value) found.push(...errorsOf(item, depth + 1));
  }
  return found;
}

/**
 * The `retryAfter` seconds of the first `RATE_LIMITED` error in a GraphQL
 * response (or an array of them, for a batch), a single GraphQL error, or a
 * client library's error object: a number of seconds, `null` when the
 * operation can never succeed as it is (split it), and `undefined` when it
 * was not rate-limited.
 */
export function getRetryAfter(resultOrError: unknown): number | null | undefined {
  for (const error of errorsOf(resultOrError)) {
    const extensions = (error as ErrorLike | null)?.extensions;
    if (extensions === null || typeof extensions !== 'object') continue;
    const { code, retryAfter } = extensions as { code?: unknown; retryAfter?: unknown };
    if (code !== RATE_LIMITED) continue;
    if (retryAfter === null) return null;
    if (typeof retryAfter === 'number' && Number.isFinite(retryAfter) && retryAfter >= 0) return retryAfter;
    return undefined;
  }
  return undefined;
}
