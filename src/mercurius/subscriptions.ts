import { GraphQLError, defaultFieldResolver, validate } from 'graphql';
import type { DocumentNode, ExecutionResult, GraphQLField, GraphQLFieldResolver, GraphQLSchema } from 'graphql';
import mercurius from 'mercurius';
import type { MercuriusContext } from 'mercurius';
import { operationFault, rateLimitedError, unavailableError } from '../core/errors.js';
import { chargeEachEvent, isAsyncIterable } from '../core/events.js';
import type { BucketReport, Decision, Limiter, OperationInput } from '../core/limiter.js';
import type { Logger } from '../core/options.js';

// Mercurius hands its subscription hooks the document but not the variables
// (nor the operation name): graphql-js hands them over first to the
// subscription field's `subscribe`, once it has coerced them. The limiter
// prices a subscription there, as graphql-js is about to start it, so what
// starts is what was priced: the preSubscriptionExecution hook validates the
// document (Mercurius does not) and marks the subscription's context; the
// root subscription fields' `subscribe` price a marked context once.

/** The mark a subscription's context carries, from the hook to `subscribe` (graphql-js gets a copy of the context). */
const PENDING: unique symbol = Symbol('graphql-token-bucket subscription');

interface Pending {
  readonly document: DocumentNode;
  priced: boolean;
  /** What the next event carries in `extensions.rateLimit`. */
  report: Record<string, BucketReport> | undefined;
}

type Marked = Record<typeof PENDING, Pending | undefined>;

/** Resolvers this module made: a field whose `subscribe` is one of them prices its subscriptions. */
const limitedResolvers = new WeakSet<object>();

/** The subscription side of `mercuriusTokenBucket`: Mercurius' hooks and each root subscription field's `subscribe`. */
export class SubscriptionLimiter {
  constructor(
    private readonly limiter: Limiter<MercuriusContext>,
    private readonly logger: Logger,
    private readonly eachEvent: boolean,
  ) {}

  /** Refuses a document graphql-js would refuse to validate; marks the context of one it may start. */
  readonly preSubscriptionExecution = async (schema: GraphQLSchema, document: DocumentNode, context: Partial<Marked>): Promise<void> => {
    let errors: readonly GraphQLError[];
    try {
      errors = validate(schema, document);
    } catch (error) {
      // A document nesting too deep for the stack, or a JSON one that is not a document at all.
      throw error instanceof GraphQLError ? error : new GraphQLError('The subscription could not be read as a GraphQL document.', { extensions: { code: 'GRAPHQL_VALIDATION_FAILED' } });
    }
    if (errors.length > 0) throw errors[0];
    this.wrapRoot(schema);
    context[PENDING] = { document, priced: false, report: undefined };
  };

  /** Adds what starting the subscription cost to its first event (`reportCost`), or each event's cost (`chargeEachEvent`). */
  readonly onSubscriptionResolution = async (execution: ExecutionResult, context: Partial<Marked>): Promise<void> => {
    const pending = context[PENDING];
    if (pending !== undefined && !pending.priced) {
      // Only a resolver swapped in after the hook checked them can start a subscription unpriced.
      pending.priced = true;
      this.logger.error("graphql-token-bucket: a subscription started unpriced: its field's subscribe was replaced after the limiter's preSubscriptionExecution hook ran");
    }
    if (pending?.report === undefined) return;
    execution.extensions = { ...execution.extensions, rateLimit: pending.report };
    pending.report = undefined;
  };

  /**
   * Every root subscription field's `subscribe` prices, checked as each
   * subscription is about to start: Mercurius' `defineResolvers` replaces a
   * field's definition, and an application may replace its `subscribe` (a
   * resolver that wraps one of ours keeps it, which then finds the
   * subscription priced).
   */
  private wrapRoot(schema: GraphQLSchema): void {
    const root = schema.getSubscriptionType();
    if (!root) return;
    for (const field of Object.values(root.getFields())) {
      if (field.subscribe !== undefined && limitedResolvers.has(field.subscribe)) continue;
      field.subscribe = this.limited(field);
    }
  }

  private limited(field: GraphQLField<unknown, unknown>): GraphQLFieldResolver<unknown, unknown> {
    const original = field.subscribe ?? defaultFieldResolver;
    const resolver: GraphQLFieldResolver<unknown, unknown> = async (source, args, contextValue, info) => {
      const pending = (contextValue as Partial<Marked> | null | undefined)?.[PENDING];
      // Not a subscription Mercurius started over its WebSocket (or already priced): not this limiter's.
      if (pending === undefined || pending.priced) return original(source, args, contextValue, info);
      pending.priced = true;
      const input: OperationInput<MercuriusContext> = {
        schema: info.schema,
        document: pending.document,
        operation: info.operation,
        variables: info.variableValues,
        context: contextValue as MercuriusContext,
        logger: this.logger,
      };
      const decision = await this.decide(input);
      const events: unknown = await original(source, args, contextValue, info);
      if (decision.kind === 'free' || !isAsyncIterable(events)) return events;
      if (this.eachEvent) {
        const report = this.limiter.settings.reportCost ? (charged: Record<string, BucketReport>) => void (pending.report = charged) : false;
        return chargeEachEvent(this.limiter, input, events as AsyncIterable<ExecutionResult>, report);
      }
      if (this.limiter.settings.reportCost) pending.report = this.limiter.report(decision);
      return events;
    };
    limitedResolvers.add(resolver);
    return resolver;
  }

  /** The decision on a subscription that may start; throws the error it ends with otherwise. */
  private async decide(input: OperationInput<MercuriusContext>): Promise<Decision> {
    let decision: Decision;
    try {
      decision = await this.limiter.decide(input);
    } catch (error) {
      // The cost analysis' refusal, or the application's own error from identify, is the client's.
      if (error instanceof GraphQLError || error instanceof mercurius.ErrorWithProps) throw error;
      // identify's or the store's fault ends this subscription alone: the socket and its others live on.
      throw operationFault(error, this.logger);
    }
    if (decision.kind === 'denied') throw rateLimitedError(decision.bucket, decision.cost, decision.retryAfterMs);
    if (decision.kind === 'store_error' && !decision.allowed) throw unavailableError();
    return decision;
  }
}
