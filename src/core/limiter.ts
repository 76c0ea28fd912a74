import type { DocumentNode, GraphQLSchema, OperationDefinitionNode } from 'graphql';
import { CostModel } from '../cost/cost-model.js';
import type { PricingSource } from '../cost/federation.js';
import type { AcquireRequest, BatchAdmission, BucketKey } from '../stores/bucket-store.js';
import { watchReturns } from '../stores/returns.js';
import { acquireAllFrom } from '../stores/validate.js';
import type { TokenBucket } from '../token-bucket.js';
import { DenyCache } from './deny-cache.js';
import type { StoreCall } from './deny-cache.js';
import { describeError, identifyFault, schemaRefusedError } from './errors.js';
import { LimiterMetrics } from './metrics.js';
import { validateOptions } from './options.js';
import type { Refunded } from './refunds.js';
import type { LimiterOptions, Logger, Settings } from './options.js';
import { resolveIdentity } from './tiers.js';
import { withTimeout } from './timeout.js';
import { uncoercibleVariables } from './uncoercible-variables.js';
import { unrepresentableVariables } from './unrepresentable-variables.js';

/** One bucket an operation is charged: whose tokens and how many. */
export interface Charge {
  /** The configured bucket, or the plan's bucket `identify` returned for it. */
  readonly bucket: TokenBucket;
  readonly key: BucketKey;
  readonly cost: number;
  /** In `measure`: counted, never denying. */
  readonly measured: boolean;
}

/** What one operation spent of one bucket, for `reportCost`. */
export interface BucketReport {
  cost: number;
  /** With `refundUnusedCost`: what the response cost; `cost - actualCost` went back to the bucket. */
  actualCost?: number;
  remaining: number;
  capacity: number;
  /** A measured bucket that would have denied the operation. */
  wouldDeny?: true;
}

/** A measured bucket that would have denied an admitted operation. */
export interface WouldDeny {
  /** Index in the decision's `charges`. */
  readonly index: number;
  /** What the client would have been told: null for never. */
  readonly retryAfterMs: number | null;
}

/** What prices an operation before it runs and its response after: a schema's `CostModel`. */
export type Pricing = Pick<CostModel, 'costOf' | 'actualCostOf'>;

/**
 * The pricing of a schema update the checks refused: its own model (which
 * cannot charge a bucket not in `buckets`) and the last accepted schema's
 * (which does not know what the update added), the larger per bucket. The
 * schema being served decides: its model's errors (an operation it refuses)
 * are the client's; the older one's are ignored.
 */
class FallbackPricing implements Pricing {
  constructor(
    private readonly served: CostModel,
    private readonly accepted: CostModel,
  ) {}

  costOf(...args: Parameters<CostModel['costOf']>): Map<string, number> {
    return larger(this.served.costOf(...args), () => this.accepted.costOf(...args));
  }

  actualCostOf(...args: Parameters<CostModel['actualCostOf']>): Map<string, number> {
    return larger(this.served.actualCostOf(...args), () => this.accepted.actualCostOf(...args));
  }
}

/** A schema refused with no accepted one before it: whatever touches a bucket is answered, not run. */
class RefusedPricing implements Pricing {
  constructor(private readonly model: CostModel | undefined) {}

  costOf(...args: Parameters<CostModel['costOf']>): Map<string, number> {
    const costs = this.model?.costOf(...args);
    if (costs !== undefined && costs.size === 0) return costs;
    throw schemaRefusedError();
  }

  actualCostOf(...args: Parameters<CostModel['actualCostOf']>): Map<string, number> {
    return this.model?.actualCostOf(...args) ?? new Map();
  }
}

/** Per bucket, the larger of two prices. */
function larger(costs: Map<string, number>, other: () => ReadonlyMap<string, number>): Map<string, number> {
  let more: ReadonlyMap<string, number>;
  try {
    more = other();
  } catch {
    return costs;
  }
  for (const [name, cost] of more) costs.set(name, Math.max(cost, costs.get(name) ?? 0));
  return costs;
}

/** What the limiter decided for one operation. */
export type Decision =
  /** The operation touches no bucket: nothing asked of the store. */
  | { readonly kind: 'free' }
  /**
   * Every enforced bucket had enough; `remaining[i]` is what `charges[i]`'s
   * bucket has left. `wouldDeny` lists the measured buckets that were short;
   * then no measured bucket was charged, so `taken[i]`, the tokens taken from
   * `charges[i]`'s bucket, is its cost or 0 (what a refund may give back).
   */
  | {
      readonly kind: 'allowed';
      readonly charges: readonly Charge[];
      readonly remaining: readonly number[];
      readonly wouldDeny: readonly WouldDeny[];
      readonly taken: readonly number[];
    }
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
      /**
       * What each of `charges` holds now, when the store says (the deny cache
       * knows only the buckets it remembers: undefined for the others).
       */
      readonly remaining?: readonly (number | undefined)[];
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
  readonly metrics: LimiterMetrics;
  /** What the store denied lately; undefined with `denyCache: false`. */
  private readonly denials: DenyCache | undefined;
  // Per schema: one limiter may serve several servers, or a gateway's updates.
  private readonly models = new WeakMap<GraphQLSchema, Pricing>();
  /** A served schema priced from another (a gateway's supergraph): what its model was built from. */
  private readonly sources = new WeakMap<GraphQLSchema, PricingSource>();
  /** The newest schema's model that passed the checks: served when a later schema fails them. */
  private lastGood: CostModel | undefined;
  private warnedUnlimited = false;
  /** The logger of the latest operation: where a failing MeterProvider is reported. */
  private logger: Logger | undefined;

  /** `known`: every option the adapter takes, its own included (default: the limiter's alone). */
  constructor(options: LimiterOptions<TContext>, owner: string, known?: Readonly<Record<string, true>>) {
    this.settings = validateOptions(options, owner, known);
    this.metrics = new LimiterMetrics(this.settings.meterProvider, (error) =>
      (this.logger ?? console).warn(`graphql-token-bucket: recording metrics failed; operations are served without them while the MeterProvider fails: ${describeError(error)}`),
    );
    this.denials = this.settings.denyCache ? new DenyCache() : undefined;
    // Refunds and resets through the same store, by another limiter or the application, forget denials too.
    if (this.denials !== undefined) watchReturns(this.settings.store, this.denials);
  }

  /**
   * Builds and checks the model of a schema: throws an `Error` naming every
   * faulty annotation (an unknown bucket, a fixed cost above capacity). A
   * server's start should fail with it. What the model warns about (an
   * annotation it does not read) goes to `logger`, once per schema.
   */
  load(schema: GraphQLSchema, source?: PricingSource, logger?: Logger): Pricing {
    let model = this.models.get(schema);
    if (model === undefined || (source !== undefined && this.sources.get(schema) !== source)) {
      const built = this.build(source ?? { schema });
      checkAnnotations(built, this.settings.buckets);
      for (const warning of built.warnings) (logger ?? console).warn(warning);
      this.models.set(schema, built);
      if (source !== undefined) this.sources.set(schema, source);
      this.lastGood = built;
      model = built;
    }
    return model;
  }

  /**
   * The pricing of a schema met after start-up (a gateway's update). One the
   * checks refuse is logged once, and its operations are priced by the last
   * accepted schema and by their own, whichever charges a bucket more: a bad
   * reload neither stops the server nor lets through unpriced what it adds.
   * (A field that names a bucket not in `buckets` cannot be charged.)
   */
  modelFor(schema: GraphQLSchema, logger: Logger, source?: PricingSource): Pricing {
    const known = this.models.get(schema);
    if (known !== undefined && (source === undefined || this.sources.get(schema) === source)) return known;
    try {
      return this.load(schema, source, logger);
    } catch (error) {
      if (this.lastGood === undefined) throw error;
      logger.error(
        `graphql-token-bucket: the updated schema was not accepted; operations are priced with the last accepted schema and the updated one, whichever charges more: ${describeError(error)}`,
      );
      let pricing: Pricing = this.lastGood;
      try {
        pricing = new FallbackPricing(this.build(source ?? { schema }), this.lastGood);
      } catch {
        // An annotation it cannot even read: the last accepted schema alone.
      }
      this.models.set(schema, pricing);
      return pricing;
    }
  }

  /** The schema coordinates of every bucket rule (`@tokenBucket` or `rules`) of an accepted schema's model; empty for another. */
  ruleCoordinates(schema: GraphQLSchema): string[] {
    const model = this.models.get(schema);
    return model instanceof CostModel ? model.annotations.map((annotation) => annotation.coordinate) : [];
  }

  /**
   * A gateway's schema in which nothing names a bucket (no `@tokenBucket`
   * came through composition, no `rules`): every operation would run free,
   * which the adapter says once, as a warning.
   */
  warnIfUnlimited(schema: GraphQLSchema, logger: Logger): void {
    const model = this.models.get(schema);
    if (!(model instanceof CostModel) || model.annotations.length > 0 || this.warnedUnlimited) return;
    this.warnedUnlimited = true;
    logger.warn(
      'graphql-token-bucket: the gateway\'s supergraph names no bucket, so no operation is limited: compose @tokenBucket with @link and @composeDirective in a subgraph, or give the plugin rules',
    );
  }

  /**
   * A schema met after start-up that cannot be priced as it is (one whose
   * supergraph cannot be read): logged once, and priced by the last
   * accepted schema. With none accepted before it — the first schema of a
   * server that meets it only after start-up (Hive Gateway loads its
   * supergraph on the first request) failing the checks: logged once; every operation that touches a bucket is then
   * answered `RATE_LIMITER_UNAVAILABLE` (the analysis's `GraphQLError`,
   * HTTP 503), and one that touches none runs. Never a free pass for
   * what the schema prices, never a bare server error.
   */
  refuse(schema: GraphQLSchema, error: unknown, logger: Logger, source?: PricingSource): void {
    const reason = describeError(error);
    if (this.lastGood !== undefined) {
      logger.error(`graphql-token-bucket: the updated schema was not accepted; operations are priced with the last accepted schema: ${reason}`);
      this.models.set(schema, this.lastGood);
      if (source !== undefined) this.sources.set(schema, source);
      return;
    }
    logger.error(`graphql-token-bucket: the schema was not accepted; operations it prices are answered RATE_LIMITER_UNAVAILABLE until a schema that passes the checks arrives: ${reason}`);
    let model: CostModel | undefined;
    try {
      model = this.build(source ?? { schema });
    } catch {
      // An annotation it cannot even read: every operation is refused.
    }
    this.models.set(schema, new RefusedPricing(model));
    if (source !== undefined) this.sources.set(schema, source);
  }

  private build(source: PricingSource): CostModel {
    return new CostModel(source.schema, {
      defaultListSize: this.settings.defaultListSize,
      chargeIntrospection: this.settings.chargeIntrospection,
      rules: this.settings.rules,
      requires: source.requires,
      graphs: source.graphs,
      federation: source.federation,
      plans: source.plans,
    });
  }

  /**
   * Prices one operation and takes its tokens in one store call (or none,
   * when this replica's deny cache already knows the store would deny it).
   * Throws a `GraphQLError` for an operation it refuses (the cost
   * analysis's, or variables an executor cannot hold as they were priced)
   * and the one `identify` throws; any other error, naming the bucket, when
   * `identify` throws or returns what is not an identity (`undefined`, a
   * plan's bucket of another name): a fault of this operation alone.
   */
  async decide(input: OperationInput<TContext>): Promise<Decision> {
    const { settings, metrics } = this;
    const charges = await this.charges(input);
    if (charges === null) return FREE;
    for (const { bucket, cost } of charges) metrics.estimatedCost(bucket.name, cost);

    // A cost above the capacity never fits: no store call for an enforced bucket.
    let measuredNever = false;
    for (const charge of charges) {
      if (charge.cost <= charge.bucket.capacity) continue;
      if (!charge.measured) {
        metrics.decision(charge.bucket.name, 'never');
        return { kind: 'denied', bucket: charge.bucket, cost: charge.cost, retryAfterMs: null };
      }
      measuredNever = true;
    }

    const { denials } = this;
    let cached = this.cachedDenial(charges);
    // A store call under way for the same pair, asking no more tokens: if it
    // is denied, so is this one. A flood's concurrent requests wait for it
    // rather than each making a call of its own; after an admission that
    // left the bucket short of this cost, they keep queueing behind one
    // another's calls (the first denial then answers the rest), unless the
    // bucket refills a token within a round trip.
    // The waiting is bounded by `storeTimeoutMs` in all, so with its own call
    // an operation waits at most twice that. A call sent before this operation
    // came times out before then by itself (and its failure is this one's);
    // one sent later is waited for only until then.
    const arrivedAt = performance.now();
    const waitUntil = arrivedAt + settings.storeTimeoutMs;
    while (cached === undefined && denials !== undefined && performance.now() < waitUntil) {
      const call = denials.askedFor(charges);
      if (call === undefined) break;
      const earlier = (call.sentAt <= arrivedAt ? await call.answered : await settledWithin(call.answered, waitUntil - performance.now())) as
        | Decision
        | undefined
        | typeof TOO_LATE;
      if (earlier === TOO_LATE) {
        cached = this.cachedDenial(charges);
        break;
      }
      // The store just failed (or timed out) for that call: this one does not wait for it twice.
      if (earlier?.kind === 'store_error') {
        for (const { bucket } of charges) metrics.decision(bucket.name, 'store_error');
        return { ...earlier, allowed: this.allowedWithoutStore(charges) };
      }
      cached = this.cachedDenial(charges);
      if (cached === undefined && !(earlier?.kind === 'allowed' && leftShort(earlier, call, charges))) break;
    }
    if (cached !== undefined) return cached;
    const asked = this.ask(charges, measuredNever, input);
    denials?.asking(charges, asked);
    return asked;
  }

  /** The one store call of an operation, and what its answer means. */
  private async ask(charges: readonly Charge[], measuredNever: boolean, input: OperationInput<TContext>): Promise<Decision> {
    const { settings, metrics } = this;
    // Enforced, the operation would take nothing from any measured bucket when
    // one of them can never fit: they are only read (cost 0) then.
    const requests: AcquireRequest[] = charges.map(({ bucket, key, cost, measured }) =>
      measured ? { bucket, key, cost: measuredNever ? 0 : cost, measure: true } : { bucket, key, cost },
    );
    let result: BatchAdmission;
    const sentAt = performance.now();
    try {
      result = await withTimeout(
        Promise.resolve().then(() => acquireAllFrom(settings.store, requests)),
        settings.storeTimeoutMs,
      );
    } catch (error) {
      metrics.storeDuration((performance.now() - sentAt) / 1000);
      // Any failure of the store, whatever its class (`fetch` rejects with a TypeError), is a store failure.
      const allowed = this.allowedWithoutStore(charges);
      const why = allowed && settings.onStoreError === 'deny' ? ' (only measured buckets price it)' : '';
      input.logger.warn(`graphql-token-bucket: store failed, ${allowed ? 'allowing' : 'denying'} the operation${why}: ${describeError(error)}`);
      for (const { bucket } of charges) metrics.decision(bucket.name, 'store_error');
      return { kind: 'store_error', allowed, error };
    }
    const answeredAt = performance.now();
    metrics.storeDuration((answeredAt - sentAt) / 1000);

    if (!result.allowed) return this.denied(charges, result, sentAt, answeredAt, input.logger);

    const wouldDeny: WouldDeny[] = [];
    if (measuredNever) {
      charges.forEach(({ bucket, cost, measured }, index) => {
        if (measured && cost > bucket.capacity) wouldDeny.push({ index, retryAfterMs: null });
      });
    } else {
      for (const { index, retryAfterMs } of result.wouldDeny ?? []) wouldDeny.push({ index, retryAfterMs });
    }
    charges.forEach((charge, index) => {
      const short = wouldDeny.find((w) => w.index === index);
      if (short !== undefined) {
        metrics.decision(charge.bucket.name, 'would_deny');
        input.logger.warn(wouldDenyWarning(charge, short.retryAfterMs));
      } else {
        metrics.decision(charge.bucket.name, 'allowed');
        if (!charge.measured) {
          const left = result.remaining[index];
          this.denials?.admitted(charge.bucket, charge.key, charge.cost, left === undefined ? undefined : { remaining: left, sentAt, answeredAt });
        }
      }
    });
    // Measured buckets are charged only when the whole operation would have been admitted enforced.
    const measuredTaken = !measuredNever && wouldDeny.length === 0;
    const taken = charges.map(({ cost, measured }) => (!measured || measuredTaken ? cost : 0));
    return { kind: 'allowed', charges, remaining: result.remaining, wouldDeny, taken };
  }

  /**
   * Whether an operation runs when the store fails: as `onStoreError` says,
   * except that one only measured buckets price runs, since none of them may
   * deny it.
   */
  private allowedWithoutStore(charges: readonly Charge[]): boolean {
    return this.settings.onStoreError === 'allow' || charges.every(({ measured }) => measured);
  }

  /**
   * Tokens came back to a (bucket, identity) pair through this limiter (a
   * refund): a denial this replica remembers for it no longer holds.
   * `left`: the whole tokens the bucket holds after, when the store said.
   */
  tokensReturned(bucket: TokenBucket, key: BucketKey, left?: number): void {
    this.denials?.forget(bucket, key, left);
  }

  /**
   * Whose tokens an operation would spend and how many, bucket by bucket, as
   * `decide` charges them (a cost above a capacity included), without asking
   * the store: `null` when it touches no bucket. Throws what `decide` throws.
   */
  async charges(input: OperationInput<TContext>): Promise<Charge[] | null> {
    const { settings } = this;
    this.logger = input.logger;
    // Refused before the store is asked, as the executor would refuse it before running anything: no token for it.
    const refused = unrepresentableVariables(input.operation, input.variables) ?? uncoercibleVariables(input.schema, input.operation, input.variables);
    if (refused !== undefined) throw refused;
    const costs = this.modelFor(input.schema, input.logger).costOf(input.document, input.operation, input.variables);
    if (costs.size === 0) return null;
    const charges: Charge[] = [];
    for (const [name, cost] of costs) {
      const configured = settings.buckets.get(name);
      if (configured === undefined) continue; // checked when the model was accepted
      let identity: unknown;
      try {
        identity = await settings.identify(input.context, configured);
      } catch (error) {
        // Passed on as it is: the application's own refusal (a GraphQLError,
        // UNAUTHENTICATED with its status) is for the client; anything else is
        // a fault of this operation alone, which the adapter logs, naming the bucket.
        throw identifyFault(error, name);
      }
      // What is not an identity (undefined, a plan's bucket of another name) is a fault as well, naming the bucket.
      const resolved = resolveIdentity(identity, configured);
      charges.push({ bucket: resolved.bucket, key: resolved.key, cost, measured: settings.measured.has(name) });
    }
    return charges.length === 0 ? null : charges;
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
    for (const { index } of decision.wouldDeny) {
      const entry = report[decision.charges[index]?.bucket.name ?? ''];
      if (entry) entry.wouldDeny = true;
    }
    return report;
  }

  /**
   * The denial this replica remembers for an enforced bucket of the operation,
   * if any: the store would deny it too, so it is not asked. Of several, the
   * longest wait is the one reported.
   */
  private cachedDenial(charges: readonly Charge[]): Decision | undefined {
    const { denials } = this;
    if (denials === undefined) return undefined;
    let worst: { charge: Charge; retryAfterMs: number } | undefined;
    let remaining: (number | undefined)[] | undefined;
    for (const [index, charge] of charges.entries()) {
      if (charge.measured) continue;
      const denial = denials.check(charge.bucket, charge.key, charge.cost);
      if (denial === undefined) continue;
      this.metrics.decision(charge.bucket.name, 'denied');
      (remaining ??= charges.map(() => undefined))[index] = denial.remaining;
      if (worst === undefined || denial.retryAfterMs > worst.retryAfterMs) worst = { charge, retryAfterMs: denial.retryAfterMs };
    }
    if (worst === undefined || remaining === undefined) return undefined;
    // Denied whole: the store would also have waited for the buckets this process saw drained.
    for (const [index, charge] of charges.entries()) {
      if (charge.measured || remaining[index] !== undefined) continue;
      const short = denials.drainedWait(charge.bucket, charge.key, charge.cost);
      if (short === undefined) continue;
      remaining[index] = short.remaining;
      if (short.retryAfterMs > worst.retryAfterMs) worst = { charge, retryAfterMs: short.retryAfterMs };
    }
    // The operation's buckets, as a store's denial names them (for the RateLimit fields).
    return { kind: 'denied', bucket: worst.charge.bucket, cost: worst.charge.cost, retryAfterMs: worst.retryAfterMs, charges, remaining };
  }

  /** The store denied the operation: remember each short enforced bucket and name the one waited for longest. */
  private denied(charges: readonly Charge[], result: Extract<BatchAdmission, { allowed: false }>, sentAt: number, answeredAt: number, logger: Logger): Decision {
    const { denied } = result;
    let worst: { charge: Charge; retryAfterMs: number | null } | undefined;
    for (const { index, retryAfterMs } of denied) {
      const charge = charges[index];
      if (charge === undefined || charge.measured) continue;
      this.metrics.decision(charge.bucket.name, retryAfterMs === null ? 'never' : 'denied');
      if (retryAfterMs !== null) this.denials?.remember(charge.bucket, charge.key, charge.cost, retryAfterMs, sentAt, answeredAt);
      if (worst === undefined || (worst.retryAfterMs !== null && (retryAfterMs === null || retryAfterMs > worst.retryAfterMs))) {
        worst = { charge, retryAfterMs };
      }
    }
    if (worst === undefined) {
      // Only a store that ignores `AcquireRequest.measure` denies for a measured request.
      const message = 'graphql-token-bucket: the store denied an operation for a measured bucket alone: its acquireAll does not support measure (AcquireRequest.measure)';
      logger.error(message);
      throw new Error(message);
    }
    // A store without `remaining` on denials (one of the user's own) leaves the RateLimit field out.
    const { remaining } = result as Partial<Pick<typeof result, 'remaining'>>;
    return { kind: 'denied', bucket: worst.charge.bucket, cost: worst.charge.cost, retryAfterMs: worst.retryAfterMs, charges, ...(remaining ? { remaining } : {}) };
  }
}

/**
 * Whether an admitted call left one of these charges' buckets short of its
 * cost (its whole tokens left, `remaining`, below the cost) while refilling
 * less than a token in the call's round trip: then a call of this one would
 * most likely be denied.
 */
function leftShort(earlier: Extract<Decision, { kind: 'allowed' }>, call: StoreCall, charges: readonly Charge[]): boolean {
  const roundTripMs = (call.answeredAt ?? call.sentAt) - call.sentAt;
  return charges.some((charge) => {
    if (charge.measured || roundTripMs * charge.bucket.rate.tokensPerMs >= 1) return false;
    const index = earlier.charges.findIndex((c) => DenyCache.samePair(c, charge));
    return index >= 0 && (earlier.remaining[index] ?? Infinity) < charge.cost;
  });
}

const TOO_LATE: unique symbol = Symbol('too late');

/** What `promise` settles with (it never rejects), or `TOO_LATE` after `ms`. */
function settledWithin<T>(promise: Promise<T>, ms: number): Promise<T | typeof TOO_LATE> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<typeof TOO_LATE>((resolve) => {
    timer = setTimeout(() => resolve(TOO_LATE), Math.max(0, ms));
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** The logger's line for a measured bucket that would have denied an operation. */
function wouldDenyWarning({ bucket, key, cost }: Charge, retryAfterMs: number | null): string {
  const tokens = cost === 1 ? '1 token' : `${cost} tokens`;
  const when = retryAfterMs === null ? `more than its capacity of ${bucket.capacity}: never` : `retry after ${retryAfterMs / 1000} s`;
  return `graphql-token-bucket: would deny bucket "${bucket.name}" to identity ${describeKey(key)}: the operation costs ${tokens} (${when}); measured, so it runs`;
}

/** An identity as a log shows it: quoted and escaped (no line breaks from a client), and cut short. */
function describeKey(key: BucketKey): string {
  if (typeof key !== 'string') return String(key);
  const shown = JSON.stringify(key.length > 200 ? key.slice(0, 200) : key);
  return key.length > 200 ? `${shown}… (${key.length} characters)` : shown;
}

const FREE: Decision = Object.freeze({ kind: 'free' });

/** Start-up check: every annotation names a known bucket and can ever succeed. */
function checkAnnotations(model: CostModel, buckets: ReadonlyMap<string, TokenBucket>): void {
  const problems: string[] = [];
  for (const { coordinate, bucket: name, cost, fromRules } of model.annotations) {
    const bucket = buckets.get(name);
    const where = fromRules ? `rules["${coordinate}"]` : `@tokenBucket on ${coordinate}`;
    if (!bucket) {
      const known = [...buckets.keys()].map((n) => `"${n}"`).join(', ') || 'none';
      problems.push(`${where} names bucket "${name}", which is not in the plugin's buckets (${known})`);
    } else if (cost !== null && cost > bucket.capacity) {
      const rule = fromRules ? `${where} (bucket "${name}", cost ${cost})` : `@tokenBucket(name: "${name}", cost: ${cost}) on ${coordinate}`;
      problems.push(`${rule} costs more than the bucket's capacity of ${bucket.capacity}, so it could never succeed`);
    }
  }
  if (problems.length > 0) throw new Error(`graphql-token-bucket: ${problems.join('; ')}`);
}
