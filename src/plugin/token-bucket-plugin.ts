import { HeaderMap } from '@apollo/server';
import type { ApolloServerPlugin, BaseContext, GraphQLRequestContext, GraphQLRequestListener } from '@apollo/server';
import { GraphQLError } from 'graphql';
import type { GraphQLSchema } from 'graphql';
import { RATE_LIMITED, RATE_LIMITER_UNAVAILABLE } from '../client.js';
import { CostModel, DEFAULT_LIST_SIZE } from '../cost/cost-model.js';
import type { AcquireRequest, BatchAdmission } from '../stores/bucket-store.js';
import { acquireAllFrom, validateRequests } from '../stores/validate.js';
import { TokenBucket } from '../token-bucket.js';
import { DEFAULT_ON_STORE_ERROR, DEFAULT_STORE_TIMEOUT_MS } from './options.js';
import type { TokenBucketPluginOptions } from './options.js';

/** What one operation spent, per bucket, for `reportCost`. */
export interface BucketReport {
  cost: number;
  remaining: number;
  capacity: number;
}

interface Charge {
  bucket: TokenBucket;
  cost: number;
}

class StoreTimeoutError extends Error {
  constructor(ms: number) {
    super(`the token bucket store did not answer within ${ms} ms`);
    this.name = 'StoreTimeoutError';
  }
}

/**
 * The Apollo Server plugin: after validation it computes what the operation
 * costs per bucket, takes all of it in one store call, and answers with
 * `RATE_LIMITED` (HTTP 429) before any resolver runs when a bucket is short.
 */
export function tokenBucketPlugin<TContext extends BaseContext = BaseContext>(
  options: TokenBucketPluginOptions<TContext>,
): ApolloServerPlugin<TContext> {
  const settings = validateOptions(options);
  const { store, identify, onStoreError, storeTimeoutMs, reportCost, defaultListSize, chargeIntrospection } = settings;
  // Per schema: one plugin instance may serve several servers, or a gateway's updates.
  const models = new WeakMap<GraphQLSchema, CostModel>();

  const load = (schema: GraphQLSchema): CostModel => {
    let model = models.get(schema);
    if (!model) {
      model = new CostModel(schema, { defaultListSize, chargeIntrospection });
      checkAnnotations(model, settings.buckets);
      models.set(schema, model);
    }
    return model;
  };

  return {
    async serverWillStart({ schema }) {
      load(schema);
      return {
        schemaDidLoadOrUpdate({ apiSchema }) {
          load(apiSchema);
        },
      };
    },

    async requestDidStart(): Promise<GraphQLRequestListener<TContext>> {
      let report: Record<string, BucketReport> | undefined;
      let retryAfterSeconds: number | undefined;

      return {
        async didResolveOperation(requestContext) {
          const { document, operation } = requestContext;
          if (!operation) return;
          const costs = load(requestContext.schema).costOf(document, operation, requestContext.request.variables);
          if (costs.size === 0) return;

          const charges: Charge[] = [];
          for (const [name, cost] of costs) {
            const bucket = settings.buckets.get(name);
            if (!bucket) continue; // checked at start-up; a schema swapped under us keeps running
            if (!(cost <= bucket.capacity)) throw rateLimited(bucket, cost, null);
            charges.push({ bucket, cost });
          }
          if (charges.length === 0) return;

          const requests: AcquireRequest[] = [];
          for (const { bucket, cost } of charges) {
            requests.push({ bucket, key: await identify(requestContext, bucket), cost });
          }
          // A key identify should not have returned is the user's bug: fail here, not as a store failure.
          validateRequests(requests);

          let result: BatchAdmission;
          try {
            result = await withTimeout(Promise.resolve().then(() => acquireAllFrom(store, requests)), storeTimeoutMs);
          } catch (error) {
            // Any failure of the store, whatever its class (`fetch` rejects with a TypeError), is a store failure.
            if (onStoreError === 'deny') {
              requestContext.logger.warn(`graphql-token-bucket: store failed, denying the operation: ${describe(error)}`);
              throw unavailable();
            }
            requestContext.logger.warn(`graphql-token-bucket: store failed, allowing the operation: ${describe(error)}`);
            return;
          }

          if (!result.allowed) {
            const worst = result.denied.find((d) => d.retryAfterMs === null) ??
              result.denied.reduce((a, b) => ((b.retryAfterMs ?? 0) > (a.retryAfterMs ?? 0) ? b : a));
            const charge = charges[worst.index]!;
            if (result.retryAfterMs !== null) retryAfterSeconds = Math.ceil(result.retryAfterMs / 1000);
            throw rateLimited(charge.bucket, charge.cost, result.retryAfterMs);
          }

          if (reportCost) {
            report = {};
            charges.forEach(({ bucket, cost }, i) => {
              report![bucket.name] = { cost, remaining: result.remaining[i] ?? 0, capacity: bucket.capacity };
            });
          }
        },

        async willSendResponse(requestContext: GraphQLRequestContext<TContext>) {
          const http = requestContext.response.http;
          if (retryAfterSeconds !== undefined) {
            // A batch shares one HTTP head: keep the longest wait of its operations.
            const existing = Number(http.headers.get('retry-after'));
            const seconds = Number.isFinite(existing) ? Math.max(existing, retryAfterSeconds) : retryAfterSeconds;
            http.headers.set('retry-after', String(seconds));
          }
          if (report) {
            const body = requestContext.response.body;
            if (body?.kind === 'single') {
              body.singleResult.extensions = { ...body.singleResult.extensions, rateLimit: report };
            } else if (body?.kind === 'incremental') {
              body.initialResult.extensions = { ...body.initialResult.extensions, rateLimit: report };
            }
          }
        },
      };
    },
  };
}

function rateLimited(bucket: TokenBucket, cost: number, retryAfterMs: number | null): GraphQLError {
  const tokens = cost === 1 ? '1 token' : `${cost} tokens`;
  const message =
    retryAfterMs === null
      ? `This operation costs ${tokens} of "${bucket.name}", more than its capacity of ${bucket.capacity}: it can never succeed. Split it into smaller operations.`
      : `Rate limit of "${bucket.name}" exceeded: this operation costs ${tokens}. Retry after ${retryAfterMs / 1000} s.`;
  return new GraphQLError(message, {
    extensions: {
      code: RATE_LIMITED,
      retryAfter: retryAfterMs === null ? null : retryAfterMs / 1000,
      bucket: bucket.name,
      cost,
      http: { status: 429, headers: new HeaderMap() },
    },
  });
}

function unavailable(): GraphQLError {
  return new GraphQLError('The rate limiter is unavailable; try again shortly.', {
    extensions: { code: RATE_LIMITER_UNAVAILABLE, http: { status: 503, headers: new HeaderMap() } },
  });
}

/** Waits for the store at most `ms`; a late answer or failure is swallowed, never left unhandled. */
function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
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

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

interface Settings<TContext extends BaseContext> {
  store: TokenBucketPluginOptions<TContext>['store'];
  buckets: Map<string, TokenBucket>;
  identify: TokenBucketPluginOptions<TContext>['identify'];
  defaultListSize: number;
  chargeIntrospection: boolean;
  onStoreError: 'allow' | 'deny';
  storeTimeoutMs: number;
  reportCost: boolean;
}

function validateOptions<TContext extends BaseContext>(options: TokenBucketPluginOptions<TContext>): Settings<TContext> {
  if (options === null || typeof options !== 'object') throw new TypeError('tokenBucketPlugin needs an options object');
  const { store, identify } = options;
  if (!store || (typeof store.acquireAll !== 'function' && typeof store.acquire !== 'function')) {
    throw new TypeError('tokenBucketPlugin option "store" must be a BucketStore, e.g. new RedisStore(redis) or new MemoryStore()');
  }
  if (typeof identify !== 'function') {
    throw new TypeError('tokenBucketPlugin option "identify" must be a function (requestContext, bucket) => key');
  }
  if (!Array.isArray(options.buckets)) throw new TypeError('tokenBucketPlugin option "buckets" must be an array of TokenBucket');
  const buckets = new Map<string, TokenBucket>();
  for (const bucket of options.buckets as readonly unknown[]) {
    if (!(bucket instanceof TokenBucket)) throw new TypeError('tokenBucketPlugin option "buckets" must hold only TokenBucket instances');
    if (buckets.has(bucket.name)) throw new RangeError(`tokenBucketPlugin option "buckets" names "${bucket.name}" twice`);
    buckets.set(bucket.name, bucket);
  }
  const defaultListSize = options.defaultListSize ?? DEFAULT_LIST_SIZE;
  if (!Number.isSafeInteger(defaultListSize) || defaultListSize < 0) {
    throw new RangeError(`tokenBucketPlugin option "defaultListSize" must be a non-negative integer, got ${String(defaultListSize)}`);
  }
  const onStoreError = options.onStoreError ?? DEFAULT_ON_STORE_ERROR;
  if (onStoreError !== 'allow' && onStoreError !== 'deny') {
    throw new RangeError(`tokenBucketPlugin option "onStoreError" must be 'allow' or 'deny', got ${JSON.stringify(onStoreError)}`);
  }
  const storeTimeoutMs = options.storeTimeoutMs ?? DEFAULT_STORE_TIMEOUT_MS;
  if (typeof storeTimeoutMs !== 'number' || !(storeTimeoutMs > 0) || storeTimeoutMs > 2_147_483_647) {
    throw new RangeError(`tokenBucketPlugin option "storeTimeoutMs" must be a positive number of milliseconds, got ${String(storeTimeoutMs)}`);
  }
  return {
    store,
    buckets,
    identify,
    defaultListSize,
    chargeIntrospection: options.chargeIntrospection !== false,
    onStoreError,
    storeTimeoutMs,
    reportCost: options.reportCost === true,
  };
}

/** Start-up check: every annotation names a known bucket and can ever succeed. */
function checkAnnotations(model: CostModel, buckets: Map<string, TokenBucket>): void {
  const problems: string[] = [];
  for (const { coordinate, bucket: name, cost } of model.annotations) {
    const bucket = buckets.get(name);
    if (!bucket) {
      const known = [...buckets.keys()].map((n) => `"${n}"`).join(', ') || 'none';
      problems.push(`@tokenBucket on ${coordinate} names bucket "${name}", which is not in the plugin's buckets (${known})`);
    } else if (cost !== null && cost > bucket.capacity) {
      problems.push(`@tokenBucket(name: "${name}", cost: ${cost}) on ${coordinate} costs more than the bucket's capacity of ${bucket.capacity}, so it could never succeed`);
    }
  }
  if (problems.length > 0) throw new Error(`graphql-token-bucket: ${problems.join('; ')}`);
}
