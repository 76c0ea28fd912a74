// SPEC §4: `getRetryAfter` reads what a client holds after a request, and
// `graphql-token-bucket/client` pulls in no server code.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import * as client from '../src/client.js';
import { RATE_LIMITED, RATE_LIMITER_UNAVAILABLE, getRetryAfter } from '../src/client.js';
import * as root from '../src/index.js';

const limited = (retryAfter: number | null, bucket = 'search') => ({
  message: 'Rate limit exceeded',
  extensions: { code: 'RATE_LIMITED', retryAfter, bucket, cost: 5 },
});
const otherError = { message: 'Not found', extensions: { code: 'NOT_FOUND' } };

describe('getRetryAfter', () => {
  it('reads seconds from a response body', () => {
    expect(getRetryAfter({ errors: [limited(2.995)] })).toBe(2.995);
    expect(getRetryAfter({ data: null, errors: [otherError, limited(14.001)] })).toBe(14.001);
  });

  it('returns null when the operation can never succeed as it is', () => {
    expect(getRetryAfter({ errors: [limited(null)] })).toBeNull();
  });

  it('returns undefined when the response is not rate-limited', () => {
    expect(getRetryAfter({ data: { a: 1 } })).toBeUndefined();
    expect(getRetryAfter({ errors: [otherError] })).toBeUndefined();
    expect(getRetryAfter({ errors: [{ message: 'no extensions' }] })).toBeUndefined();
    expect(getRetryAfter({ errors: [{ message: 'unavailable', extensions: { code: RATE_LIMITER_UNAVAILABLE } }] })).toBeUndefined();
    expect(getRetryAfter({ errors: [] })).toBeUndefined();
  });

  it('reads the first rate-limited operation of a batch', () => {
    expect(getRetryAfter([{ data: { a: 1 } }, { errors: [limited(3)] }, { errors: [limited(9)] }])).toBe(3);
    expect(getRetryAfter([{ data: { a: 1 } }, { errors: [otherError] }])).toBeUndefined();
    expect(getRetryAfter([{ errors: [limited(null)] }])).toBeNull();
  });

  it('reads a single GraphQL error, or a list of them', () => {
    expect(getRetryAfter(limited(0.5))).toBe(0.5);
    expect(getRetryAfter(limited(null))).toBeNull();
    expect(getRetryAfter(otherError)).toBeUndefined();
    expect(getRetryAfter([otherError, limited(1.25)])).toBe(1.25);
  });

  it('reads the error objects of client libraries', () => {
    // Apollo Client 3 ApolloError.
    expect(getRetryAfter(Object.assign(new Error('Rate limit exceeded'), { graphQLErrors: [limited(7)], networkError: null }))).toBe(7);
    // urql CombinedError and graphql-request ClientError.
    expect(getRetryAfter({ name: 'CombinedError', graphQLErrors: [otherError, limited(null)] })).toBeNull();
    expect(getRetryAfter(Object.assign(new Error('GraphQL Error'), { response: { errors: [limited(4)], status: 429 } }))).toBe(4);
    // Apollo Client's ServerError for a non-2xx answer: the parsed body in `result`.
    expect(getRetryAfter(Object.assign(new Error('Response not successful: Received status code 429'), { statusCode: 429, result: { errors: [limited(2)] } }))).toBe(2);
    // Apollo Client 4's ServerError for a non-2xx answer sent as application/json: the body's text only.
    const serverError = (bodyText: string) =>
      Object.assign(new Error('Response not successful: Received status code 429'), { name: 'ServerError', statusCode: 429, bodyText });
    expect(getRetryAfter(serverError(JSON.stringify({ errors: [limited(2.5)] })))).toBe(2.5);
    expect(getRetryAfter(serverError(JSON.stringify({ errors: [limited(null)] })))).toBeNull();
    expect(getRetryAfter(serverError(JSON.stringify([{ data: { a: 1 } }, { errors: [limited(3)] }])))).toBe(3);
    expect(getRetryAfter(serverError(JSON.stringify({ errors: [otherError] })))).toBeUndefined();
    for (const bodyText of ['<html>Too Many Requests</html>', '', '{"errors": [', 'null', '"RATE_LIMITED"']) {
      expect(getRetryAfter(serverError(bodyText))).toBeUndefined();
    }
    // Apollo Client 4's CombinedGraphQLErrors: the response's errors in `errors`.
    expect(getRetryAfter(Object.assign(new Error('Rate limit exceeded'), { errors: [limited(8)], data: undefined }))).toBe(8);
    // A network error whose cause carries the body.
    expect(getRetryAfter(new Error('request failed', { cause: { errors: [limited(6)] } }))).toBe(6);
    expect(getRetryAfter(Object.assign(new Error('boom'), { graphQLErrors: [otherError] }))).toBeUndefined();
  });

  it('returns undefined for anything else', () => {
    for (const value of [undefined, null, 0, 'RATE_LIMITED', true, {}, [], new Error('plain')]) {
      expect(getRetryAfter(value)).toBeUndefined();
    }
  });

  it('ignores a RATE_LIMITED error whose retryAfter is not a usable number of seconds', () => {
    for (const retryAfter of ['3', -1, Number.NaN, Number.POSITIVE_INFINITY, undefined]) {
      expect(getRetryAfter({ errors: [{ message: 'x', extensions: { code: 'RATE_LIMITED', retryAfter } }] })).toBeUndefined();
    }
  });

  it('does not loop on a cyclic error object', () => {
    const error: Record<string, unknown> = { message: 'cyclic' };
    error['cause'] = error;
    error['result'] = { errors: [error] };
    expect(getRetryAfter(error)).toBeUndefined();
  });
});

describe('graphql-token-bucket/client', () => {
  it('exports the error codes as the plugin sends them', () => {
    expect(RATE_LIMITED).toBe('RATE_LIMITED');
    expect(RATE_LIMITER_UNAVAILABLE).toBe('RATE_LIMITER_UNAVAILABLE');
  });

  it('is the same code as the package root exports', () => {
    expect(root.getRetryAfter).toBe(client.getRetryAfter);
    expect(root.RATE_LIMITED).toBe(client.RATE_LIMITED);
    expect(root.RATE_LIMITER_UNAVAILABLE).toBe(client.RATE_LIMITER_UNAVAILABLE);
  });

  it('imports nothing, so a browser bundle gets no server code', () => {
    const source = readFileSync(new URL('../src/client.ts', import.meta.url), 'utf8');
    const code = source.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '');
    expect(code).not.toMatch(/^\s*import\b/m);
    expect(code).not.toMatch(/\bimport\s*\(/);
    expect(code).not.toMatch(/\brequire\s*\(/);
    expect(code).not.toMatch(/^\s*export\s+(\*|\{[^}]*\})\s+from\b/m);
  });
});
