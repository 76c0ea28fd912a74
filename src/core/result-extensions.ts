import type { BucketReport } from './limiter.js';

/** What the adapters add `extensions.rateLimit` to: a GraphQL execution result. */
export interface ResultWithExtensions {
  extensions?: Record<string, unknown> | undefined;
}

/** A copy of `result` whose `extensions.rateLimit` is `report`, its other extensions kept. */
export function withRateLimitReport<TResult extends ResultWithExtensions>(result: TResult, report: Record<string, BucketReport>): TResult {
  return { ...result, extensions: { ...result.extensions, rateLimit: report } };
}
