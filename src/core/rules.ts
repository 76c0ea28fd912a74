import type { CoordinateRule } from '../cost/cost-model.js';

/** One bucket rule of the `rules` option: what `@tokenBucket(name: bucket, cost: cost)` would say. */
export interface TokenBucketRule {
  /** The bucket's name: one of `buckets`. */
  readonly bucket: string;
  /** A fixed cost per selection of the field; omitted, the field's complexity is charged. */
  readonly cost?: number | null;
}

/**
 * Bucket rules by schema coordinate, for schemas that carry no directive (a
 * gateway's, a code-first one, a subgraph you do not own):
 * `{ Query: { bucket: 'api' }, 'Query.search': [{ bucket: 'search', cost: 1 }, …] }`.
 */
export type TokenBucketRules = Readonly<Record<string, TokenBucketRule | readonly TokenBucketRule[]>>;

const COORDINATE = /^[_A-Za-z][_0-9A-Za-z]*(\.[_A-Za-z][_0-9A-Za-z]*)?$/;

/** Checks `rules` at construction (its buckets and coordinates are checked against the schema when it loads). */
export function validateRules(rules: unknown, owner: string): ReadonlyMap<string, readonly CoordinateRule[]> | undefined {
  if (rules === undefined) return undefined;
  if (rules === null || typeof rules !== 'object' || Array.isArray(rules)) {
    throw new TypeError(`${owner} option "rules" must be an object of schema coordinates ('Query', 'Query.search') to { bucket, cost? }`);
  }
  const checked = new Map<string, readonly CoordinateRule[]>();
  for (const [coordinate, value] of Object.entries(rules as Record<string, unknown>)) {
    if (!COORDINATE.test(coordinate)) {
      throw new TypeError(`${owner} option "rules": ${JSON.stringify(coordinate)} is not a schema coordinate ('Type' or 'Type.field')`);
    }
    const list = Array.isArray(value) ? (value as unknown[]) : [value];
    checked.set(
      coordinate,
      Object.freeze(
        list.map((rule) => {
          const { bucket, cost } = (rule ?? {}) as { bucket?: unknown; cost?: unknown };
          if (typeof bucket !== 'string' || bucket === '') {
            throw new TypeError(`${owner} option "rules": ${coordinate} needs { bucket: string, cost?: number }, got ${JSON.stringify(rule) ?? String(rule)}`);
          }
          if (cost != null && !(typeof cost === 'number' && Number.isSafeInteger(cost) && cost >= 0)) {
            throw new RangeError(`${owner} option "rules": the cost of bucket "${bucket}" on ${coordinate} must be a non-negative integer or omitted, got ${String(cost)}`);
          }
          return Object.freeze({ bucket, cost: (cost as number | null | undefined) ?? null });
        }),
      ),
    );
  }
  return checked;
}
