import { GraphQLError } from 'graphql';
import type { GraphQLErrorExtensions } from 'graphql';
import type { HttpExtension } from './errors.js';

/**
 * The `GraphQL-Cost` request header, as Hot Chocolate names it: `report` adds
 * the cost report to this response, `validate` prices the operation and checks
 * it against its buckets without running it or taking a token.
 */

/** Default of `costHeader`: the `GraphQL-Cost` request header is honoured. */
export const DEFAULT_COST_HEADER = true;

/** The request header, lowercase as Node.js and `Headers` hand it over (its name is case-insensitive). */
export const COST_HEADER = 'graphql-cost';

/** What a client may ask for with the header. */
export type CostHeaderMode = 'report' | 'validate';

const MODES: readonly CostHeaderMode[] = ['report', 'validate'];

/** The longest part of a bad value echoed in the error: a header may be kilobytes long. */
const ECHOED_CHARACTERS = 64;

/**
 * The mode a header value asks for: `undefined` without the header, `null`
 * for any other value. Matched as Hot Chocolate matches it, whole and in any
 * case (`Validate` is `validate`), around the optional whitespace HTTP allows;
 * a header sent twice arrives joined by a comma and matches neither.
 */
export function costHeaderMode(value: string | null | undefined): CostHeaderMode | null | undefined {
  if (value === undefined || value === null) return undefined;
  const mode = value.trim().toLowerCase();
  return (MODES as readonly string[]).includes(mode) ? (mode as CostHeaderMode) : null;
}

/** The answer to a `GraphQL-Cost` value that is neither `report` nor `validate`: HTTP 400, nothing run or charged. */
export function invalidCostHeaderError(value: string, http?: HttpExtension): GraphQLError {
  const shown = value.length > ECHOED_CHARACTERS ? `${value.slice(0, ECHOED_CHARACTERS)}…` : value;
  return new GraphQLError(`The GraphQL-Cost request header must be "report" or "validate", got ${JSON.stringify(shown)}.`, {
    extensions: {
      code: 'BAD_REQUEST',
      ...(http ? { http: http(400, {}) } : {}),
    } as GraphQLErrorExtensions,
  });
}
