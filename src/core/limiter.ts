import type { DocumentNode, GraphQLSchema, OperationDefinitionNode } from 'graphql';
import { CostModel } from '../cost/cost-model.js';
import type { AcquireRequest, BatchAdmission, BucketKey } from '../stores/bucket-store.js';
import { acquireAllFrom, validateRequests } from '../stores/validate.js';
import type { TokenBucket } from '../token-bucket.js';
import { describeError } from './errors.js';
import { validateOptions } from './options.js';
import type { Refunded } from './refunds.js';
import type { LimiterOptions, Logger, Settings } from './options.js';
import { withTimeout } from './timeout.js';

/** One bucket an operation is charged: whose tokens and how many. */
export interface Charge {
  readonly bucket: TokenBucket;
  readonly key: BucketKey;
  readonly cost: number;
}

/** What one operation spent of one bucket, for `reportCost`. */
export interface BucketReport {
  cost: number;
  /** With `refundUnusedCost`: what the response cost; `cost - actualCost` went back to the bucket. */
  actualCost?: number;
  remaining: number;
  capacity: number;
}

/** What the limiter decided for one operation. */
export type Decision =
  /** The operation touches no bucket: nothing asked of the store. */
  | { readonly kind: 'free' }
  /** Every bucket had enough; `remaining[i]` is what `charges[i]`'s bucket has left. */
  | { readonly kind: 'allowed'; readonly charges: readonly Charge[]; readonly remaining: readonly number[] }
  /**
   * Nothing was taken. `bucket` and `cost` name the bucket the client waits
   * longest for; `retryAfterMs` is null when the operation can never succeed.
   * `charges` are what the store was asked for (none when a cost above its
   * bucket's capacity was refused without asking).
   */
  | {
      readonly kind: 'denied';
      readonly bucket: TokenBucket;
      readonly cost: number;
      readonly retryAfterMs: number | null;
      readonly charges?: readonly Charge[];
      /** What each of `charges` holds now, when the store says. */
      readonly remaining?: readonly number[];
    }
  /** The store failed or timed out; `allowed` says what `onStoreError` made of it. */
  | { readonly kind: 'store_error'; readonly allowed: boolean; readonly error: unknown };

/** What an adapter knows of one operation once it is parsed and validated. */
export interface OperationInput<TContext> {
  readonly schema: GraphQLSchema;
  readonly document: DocumentNode;
  readonly operation: OperationDefinitionNode;
  readonly variables: Readonly<Record<string, unknown>> | null | undefined;
  /** Given to `identify`. */
  readonly context: TContext;
  readonly logger: Logger;
}

/**
 * What every server adapter shares: the cost model of each schema it serves,
 * the pricing of an operation and the one store call that decides it. An
 * adapter only translates its server's hooks, errors and headers.
 */
export class Limiter<TContext> {
  readonly settings: Settings<TContext>;
  // Per schema: one limiter may serve several servers, or a gateway's updates.
  private readonly models = new WeakMap<GraphQLSchema, CostModel>();
  /** The newest schema's model that passed the checks: served when a later schema fails them. */
  private lastGood: CostModel | undefined;

  constructor(options: LimiterOptions<TContext>, owner: string) {
    this.settings = validateOptions(options, owner);
  }

  /**
   * Builds and checks the model of a schema: throws an `Error` naming every
   * faulty annotation (an unknown bucket, a fixed cost above capacity). A
   * server's start should fail with it.
   */
  load(schema: GraphQLSchema): CostModel {
    let model = this.models.get(schema);
    if (model === undefined) {
      model = new CostModel(schema, {
        defaultListSize: this.settings.defaultListSize,
        chargeIntrospection: this.settings.chargeIntrospection,
      });
      checkAnnotations(model, this.settings.buckets);
      this.models.set(schema, model);
      this.lastGood = model;
    }
    return model;
  }

  /**
   * The model for a schema met after start-up (a gateway's update). One the
   * checks refuse is logged once and answered with the last good model, so a
   * bad reload neither stops the server nor lets operations through unpriced.
   */
  modelFor(schema: GraphQLSchema, logger: Logger): CostModel {
    const known = this.models.get(schema);
    if (known !== undefined) return known;
    try {
      return this.load(schema);
    } catch (error) {
      if (this.lastGood === undefined) throw error;
      logger.error(`graphql-token-bucket: the updated schema was not accepted; operations are priced with the last accepted schema: ${describeError(error)}`);
      this.models.set(schema, this.lastGood);
      return this.lastGood;
    }
  }

  /**
   * Prices one operation and takes its tokens in one store call. Throws the
   * cost analysis's `GraphQLError` for an operation it refuses, and a
   * `TypeError`/`RangeError` when `identify` returns what cannot be a key.
   */
  async decide(input: OperationInput<TContext>): Promise<Decision> {
    const { settings } = this;
    const costs = this.modelFor(input.schema, input.logger).costOf(input.document, input.operation, input.variables);
    if (costs.size === 0) return FREE;

    const priced: { bucket: TokenBucket; cost: number }[] = [];
    for (const [name, cost] of costs) {
      const bucket = settings.buckets.get(name);
      if (bucket === undefined) continue; // checked when the model was accepted
      if (!(cost <= bucket.capacity)) return { kind: 'denied', bucket, cost, retryAfterMs: null };
      priced.push({ bucket, cost });
    }
    if (priced.length === 0) return FREE;

    const charges: Charge[] = [];
    for (const { bucket, cost } of priced) {
      charges.push({ bucket, key: await settings.identify(input.context, bucket), cost });
    }
    // A key identify should not have returned is the user's bug: fail here, not as a store failure.
    validateRequests(charges as AcquireRequest[]);

    let result: BatchAdmission;
    try {
      result = await withTimeout(
        Promise.resolve().then(() => acquireAllFrom(settings.store, charges as AcquireRequest[])),
        settings.storeTimeoutMs,
      );
    } catch (error) {
      // Any failure of the store, whatever its class (`fetch` rejects with a TypeError), is a store failure.
      const allowed = settings.onStoreError === 'allow';
      input.logger.warn(`graphql-token-bucket: store failed, ${allowed ? 'allowing' : 'denying'} the operation: ${describeError(error)}`);
      return { kind: 'store_error', allowed, error };
    }

    if (!result.allowed) {
      const worst =
        result.denied.find((d) => d.retryAfterMs === null) ??
        result.denied.reduce((a, b) => ((b.retryAfterMs ?? 0) > (a.retryAfterMs ?? 0) ? b : a));
      const charge = charges[worst.index]!;
      // A store without `remaining` on denials (one of the user's own) leaves the RateLimit field out.
      const { remaining } = result as Partial<Pick<typeof result, 'remaining'>>;
      return { kind: 'denied', bucket: charge.bucket, cost: charge.cost, retryAfterMs: result.retryAfterMs, charges, ...(remaining ? { remaining } : {}) };
    }
    return { kind: 'allowed', charges, remaining: result.remaining };
  }

  /**
   * Whose tokens an operation would spend and how many, bucket by bucket, as
   * `decide` charges them (a cost above a capacity included), without asking
   * the store: `null` when it touches no bucket. Throws what `decide` throws.
   */
  async charges(input: OperationInput<TContext>): Promise<Charge[] | null> {
    const { settings } = this;
    const costs = this.modelFor(input.schema, input.logger).costOf(input.document, input.operation, input.variables);
    const charges: Charge[] = [];
    for (const [name, cost] of costs) {
      const bucket = settings.buckets.get(name);
      if (bucket === undefined) continue; // checked when the model was accepted
      charges.push({ bucket, key: await settings.identify(input.context, bucket), cost });
    }
    if (charges.length === 0) return null;
    validateRequests(charges as AcquireRequest[]);
    return charges;
  }

  /** `extensions.rateLimit` of an admitted operation; with `refunded`, its actual cost and what is left after the refund. */
  report(decision: Decision, refunded?: Refunded): Record<string, BucketReport> | undefined {
    if (decision.kind !== 'allowed') return undefined;
    const report: Record<string, BucketReport> = {};
    decision.charges.forEach(({ bucket, cost }, i) => {
      report[bucket.name] =
        refunded === undefined
          ? { cost, remaining: decision.remaining[i] ?? 0, capacity: bucket.capacity }
          : { cost, actualCost: refunded.actualCosts[i] ?? cost, remaining: refunded.remaining[i] ?? 0, capacity: bucket.capacity };
    });
    return report;
  }
}

const FREE: Decision = Object.freeze({ kind: 'free' });

/** Start-up check: every annotation names a known bucket and can ever succeed. */
function checkAnnotations(model: CostModel, buckets: ReadonlyMap<string, TokenBucket>): void {
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
