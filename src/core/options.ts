import { DEFAULT_LIST_SIZE } from '../cost/cost-model.js';
import type { BucketStore } from '../stores/bucket-store.js';
import { MAX_BATCH_REQUESTS } from '../stores/validate.js';
import { TokenBucket } from '../token-bucket.js';
import { DEFAULT_COST_HEADER } from './cost-header.js';
import { DEFAULT_RATE_LIMIT_HEADERS } from './ratelimit-headers.js';
import { DEFAULT_REFUND_UNUSED_COST, assertCanRefund } from './refunds.js';
import { DEFAULT_DENY_CACHE } from './deny-cache.js';
import type { MeterProviderLike } from './metrics.js';
import type { Identity } from './tiers.js';
import { validateRules } from './rules.js';
import { rejectUnknownOptions } from './unknown-options.js';
import type { TokenBucketRules } from './rules.js';
import type { CoordinateRule } from '../cost/cost-model.js';

/** Default of `onStoreError`: a failing store lets operations through. */
export const DEFAULT_ON_STORE_ERROR = 'allow';
/** Default of `storeTimeoutMs`: how long an operation waits for the store. */
export const DEFAULT_STORE_TIMEOUT_MS = 1000;
/** Default of `measure`: every bucket denies. */
export const DEFAULT_MEASURE = false;

/** Where the limiter reports what it cannot turn into a response: Apollo Server's logger, or `console`. */
export interface Logger {
  warn(message: string): void;
  error(message: string): void;
}

/**
 * What every server adapter accepts. `TContext` is what `identify` is given:
 * Apollo Server's request context, GraphQL Yoga's context value, graphql-ws's
 * connection context.
 */
export interface LimiterOptions<TContext> {
  /** Where the tokens live: `new RedisStore(redis)` across replicas, `new MemoryStore()` in one process. */
  store: BucketStore;
  /** Every bucket the schema's `@tokenBucket` directives name. */
  buckets: readonly TokenBucket[];
  /**
   * Whose tokens an operation spends, per bucket: a user id, an API key, a
   * client address. Buckets of one operation that return the same identity
   * are acquired together in one Redis round trip, on Redis Cluster too.
   *
   * Return `{ key, bucket }` to give this identity a plan of its own: `bucket`
   * is a `TokenBucket` with the same name and its own capacity and rate, used
   * for this operation. A bucket of another name (or not a `TokenBucket`) is
   * logged as an error and the operation fails.
   */
  identify: (context: TContext, bucket: TokenBucket) => Identity | Promise<Identity>;
  /**
   * Bucket rules by schema coordinate, exactly as `@tokenBucket` on those
   * types and fields: `{ Query: { bucket: 'api' }, 'Query.search': { bucket:
   * 'search', cost: 1 } }` (a list for several buckets). For schemas you
   * cannot annotate: a gateway's, a code-first one, a subgraph you do not
   * own. The start-up checks apply to them as to directives, and a
   * coordinate the schema does not have fails the start. Default: none.
   */
  rules?: TokenBucketRules;
  /** Size assumed for a list field with no size argument and no `@listSize(assumedSize:)`. Default `DEFAULT_LIST_SIZE` (10). */
  defaultListSize?: number;
  /**
   * When the store fails or does not answer within `storeTimeoutMs`:
   * `'allow'` runs the operation and logs the error; `'deny'` answers
   * `RATE_LIMITER_UNAVAILABLE` with HTTP 503. Default `DEFAULT_ON_STORE_ERROR` (`'allow'`).
   */
  onStoreError?: 'allow' | 'deny';
  /** How long an operation waits for the store, in ms, before `onStoreError` applies. Default `DEFAULT_STORE_TIMEOUT_MS` (1000). */
  storeTimeoutMs?: number;
  /**
   * Charge introspection (`__schema`, `__type`) like the query type's own
   * fields: a type-level `@tokenBucket` on `Query` then prices it too. Default
   * `true`. Tools that introspect often in development (Apollo Sandbox, IDEs)
   * may need `false` there; Apollo Server disables introspection in production.
   */
  chargeIntrospection?: boolean;
  /** Add `extensions.rateLimit: { [bucket]: { cost, remaining, capacity } }` to responses. Default `false`. */
  reportCost?: boolean;
  /**
   * Charge what an operation used: once it has run, price the response about
   * to be sent (each list by the items it holds, nothing below a null) and give
   * the difference from the estimate back to its buckets, in one store call,
   * before the response leaves. The report then adds `actualCost`. Queries and
   * mutations only: an incremental delivery (`@defer`, `@stream`) or a
   * subscription keeps the estimate. Default `DEFAULT_REFUND_UNUSED_COST` (`false`).
   */
  refundUnusedCost?: boolean;
  /**
   * Honour the `GraphQL-Cost` request header over HTTP: `report` adds the cost
   * report to that response, `validate` prices the operation and checks its
   * buckets without running it or taking a token; any other value is a 400.
   * Default `DEFAULT_COST_HEADER` (`true`).
   */
  costHeader?: boolean;
  /**
   * Add the IETF `RateLimit-Policy` and `RateLimit` header fields to every
   * charged HTTP response, admitted or denied. Default
   * `DEFAULT_RATE_LIMIT_HEADERS` (`false`).
   */
  rateLimitHeaders?: boolean;
  /**
   * Buckets that count but never deny (`true`: every bucket): they are
   * charged as if enforced, so their state evolves exactly as it would; an
   * operation only they would deny runs, the logger warns
   * (`graphql-token-bucket: would deny …`) and the report shows
   * `wouldDeny: true`. Enforced buckets of the same operation decide as if
   * the measured ones did not exist. A name not in `buckets` is a
   * `RangeError`. Default `DEFAULT_MEASURE` (`false`).
   */
  measure?: boolean | readonly string[];
  /**
   * Remember the store's denials in this replica: for the wait the store
   * gave, a request for at least the denied cost of that (bucket, identity)
   * is denied without a store call. At most 10,000 pairs
   * (`DENY_CACHE_MAX_ENTRIES`), least recently used out. Default
   * `DEFAULT_DENY_CACHE` (`true`).
   */
  denyCache?: boolean;
  /**
   * The OpenTelemetry `MeterProvider` metrics are recorded with. Default: the
   * global one of `@opentelemetry/api` (`metrics.getMeterProvider()`), looked
   * up when something is recorded; nothing when `@opentelemetry/api` is not
   * installed.
   */
  meterProvider?: MeterProviderLike;
}

/** The options once checked, with their defaults filled in. */
export interface Settings<TContext> {
  readonly store: BucketStore;
  readonly buckets: ReadonlyMap<string, TokenBucket>;
  readonly identify: LimiterOptions<TContext>['identify'];
  readonly defaultListSize: number;
  readonly rules: ReadonlyMap<string, readonly CoordinateRule[]> | undefined;
  readonly chargeIntrospection: boolean;
  readonly onStoreError: 'allow' | 'deny';
  readonly storeTimeoutMs: number;
  readonly reportCost: boolean;
  readonly refundUnusedCost: boolean;
  readonly costHeader: boolean;
  readonly rateLimitHeaders: boolean;
  /** Names of the measured buckets. */
  readonly measured: ReadonlySet<string>;
  readonly denyCache: boolean;
  readonly meterProvider: MeterProviderLike | undefined;
}

/**
 * Every option of `LimiterOptions`, by name. A record rather than a list so
 * that the compiler holds it to the type: an option added to the type and not
 * here, or named here and not there, does not compile. An adapter with
 * options of its own spreads this into its own record.
 */
export const LIMITER_OPTIONS: Readonly<Record<keyof LimiterOptions<unknown>, true>> = {
  store: true,
  buckets: true,
  identify: true,
  rules: true,
  defaultListSize: true,
  onStoreError: true,
  storeTimeoutMs: true,
  chargeIntrospection: true,
  reportCost: true,
  refundUnusedCost: true,
  costHeader: true,
  rateLimitHeaders: true,
  measure: true,
  denyCache: true,
  meterProvider: true,
};

/**
 * Checks the options once, at construction: a bad option is a programming
 * error, thrown at once. `known` names every option the adapter takes (its
 * own besides the limiter's); any other key is a `TypeError`.
 */
export function validateOptions<TContext>(
  options: LimiterOptions<TContext>,
  owner: string,
  known: Readonly<Record<string, true>> = LIMITER_OPTIONS,
): Settings<TContext> {
  if (options === null || typeof options !== 'object') throw new TypeError(`${owner} needs an options object`);
  rejectUnknownOptions(options, known, owner);
  const { store, identify } = options;
  if (!store || (typeof store.acquireAll !== 'function' && typeof store.acquire !== 'function')) {
    throw new TypeError(`${owner} option "store" must be a BucketStore, e.g. new RedisStore(redis) or new MemoryStore()`);
  }
  if (typeof identify !== 'function') {
    throw new TypeError(`${owner} option "identify" must be a function (context, bucket) => key`);
  }
  if (!Array.isArray(options.buckets)) throw new TypeError(`${owner} option "buckets" must be an array of TokenBucket`);
  const buckets = new Map<string, TokenBucket>();
  for (const bucket of options.buckets as readonly unknown[]) {
    if (!(bucket instanceof TokenBucket)) throw new TypeError(`${owner} option "buckets" must hold only TokenBucket instances`);
    if (buckets.has(bucket.name)) throw new RangeError(`${owner} option "buckets" names "${bucket.name}" twice`);
    buckets.set(bucket.name, bucket);
  }
  // An operation takes all its buckets in one store call, which holds at most
  // MAX_BATCH_REQUESTS: more names could make an operation the store refuses.
  if (buckets.size > MAX_BATCH_REQUESTS) {
    throw new RangeError(`${owner} option "buckets" holds ${buckets.size} buckets, more than the ${MAX_BATCH_REQUESTS} one store call takes`);
  }
  const defaultListSize = options.defaultListSize ?? DEFAULT_LIST_SIZE;
  if (!Number.isSafeInteger(defaultListSize) || defaultListSize < 0) {
    throw new RangeError(`${owner} option "defaultListSize" must be a non-negative integer, got ${String(defaultListSize)}`);
  }
  const onStoreError = options.onStoreError ?? DEFAULT_ON_STORE_ERROR;
  if (onStoreError !== 'allow' && onStoreError !== 'deny') {
    throw new RangeError(`${owner} option "onStoreError" must be 'allow' or 'deny', got ${JSON.stringify(onStoreError)}`);
  }
  const storeTimeoutMs = options.storeTimeoutMs ?? DEFAULT_STORE_TIMEOUT_MS;
  if (typeof storeTimeoutMs !== 'number' || !(storeTimeoutMs > 0) || storeTimeoutMs > 2_147_483_647) {
    throw new RangeError(`${owner} option "storeTimeoutMs" must be a positive number of milliseconds, got ${String(storeTimeoutMs)}`);
  }
  const refundUnusedCost = booleanOption(options.refundUnusedCost, 'refundUnusedCost', DEFAULT_REFUND_UNUSED_COST, owner);
  if (refundUnusedCost) assertCanRefund(store, owner);
  const measure = options.measure ?? DEFAULT_MEASURE;
  let measured: ReadonlySet<string>;
  if (typeof measure === 'boolean') {
    measured = new Set(measure ? buckets.keys() : []);
  } else if (Array.isArray(measure)) {
    const unknown = (measure as readonly unknown[]).filter((name) => typeof name !== 'string' || !buckets.has(name));
    if (unknown.length > 0) {
      const known = [...buckets.keys()].map((n) => `"${n}"`).join(', ') || 'none';
      throw new RangeError(`${owner} option "measure" names ${unknown.map((n) => JSON.stringify(n) ?? String(n)).join(', ')}, not in "buckets" (${known})`);
    }
    measured = new Set(measure as readonly string[]);
  } else {
    throw new TypeError(`${owner} option "measure" must be a boolean or an array of bucket names, got ${String(measure)}`);
  }
  const denyCache = options.denyCache ?? DEFAULT_DENY_CACHE;
  if (typeof denyCache !== 'boolean') throw new TypeError(`${owner} option "denyCache" must be a boolean, got ${String(denyCache)}`);
  const { meterProvider } = options;
  if (meterProvider !== undefined && typeof meterProvider?.getMeter !== 'function') {
    throw new TypeError(`${owner} option "meterProvider" must be an OpenTelemetry MeterProvider (with getMeter)`);
  }
  return {
    store,
    buckets,
    identify,
    defaultListSize,
    rules: validateRules(options.rules, owner),
    chargeIntrospection: options.chargeIntrospection !== false,
    onStoreError,
    storeTimeoutMs,
    reportCost: options.reportCost === true,
    refundUnusedCost,
    costHeader: booleanOption(options.costHeader, 'costHeader', DEFAULT_COST_HEADER, owner),
    rateLimitHeaders: booleanOption(options.rateLimitHeaders, 'rateLimitHeaders', DEFAULT_RATE_LIMIT_HEADERS, owner),
    measured,
    denyCache,
    meterProvider,
  };
}

function booleanOption(value: unknown, name: string, fallback: boolean, owner: string): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') throw new TypeError(`${owner} option "${name}" must be a boolean, got ${String(value)}`);
  return value;
}
