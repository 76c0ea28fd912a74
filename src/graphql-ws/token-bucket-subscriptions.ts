import { GraphQLError, isSchema, parse, validate } from 'graphql';
import type { DocumentNode, ExecutionArgs, GraphQLSchema } from 'graphql';
import type { ConnectionInitMessage, Context, OperationResult, SubscribePayload } from 'graphql-ws';
import { operationFault, rateLimitedError, unavailableError } from '../core/errors.js';
import { changedAfterPricing, frozenVariables, holdProperties } from '../core/held-operation.js';
import { chargeEachEvent, chargeEachEventOption, isAsyncIterable, reportOnFirst } from '../core/events.js';
import { executedOperation, unidentifiedOperationError } from '../core/executed-operation.js';
import { Limiter } from '../core/limiter.js';
import type { Decision, OperationInput } from '../core/limiter.js';
import type { Logger } from '../core/options.js';
import { withRateLimitReport } from '../core/result-extensions.js';
import { refundUnused } from '../core/refunds.js';
import { markSubscriptionsLimited, markSubscriptionsLimitedLazily, warnOfUnchargedEvents } from '../core/subscriptions.js';
import { TOKEN_BUCKET_SUBSCRIPTIONS_OPTIONS } from './options.js';
import type { SchemaFunction, TokenBucketSubscriptionsOptions } from './options.js';

/** The graphql-ws server hooks, spread into `useServer`'s (or `makeServer`'s) options. */
export interface TokenBucketSubscriptionsHooks<
  P extends ConnectionInitMessage['payload'] = ConnectionInitMessage['payload'],
  E = unknown,
> {
  /** Prices the operation and takes its tokens; a denied one is answered with an `error` message and never runs. */
  onSubscribe(ctx: Context<P, E>, id: string, payload: SubscribePayload): Promise<readonly GraphQLError[] | void>;
  /** Adds `extensions.rateLimit` to a result (`reportCost`) and charges each event (`chargeEachEvent`). */
  onOperation(ctx: Context<P, E>, id: string, payload: SubscribePayload, args: ExecutionArgs, result: OperationResult): Promise<OperationResult | void>;
}

/** What `onSubscribe` leaves for `onOperation` about one admitted operation. */
interface Admitted<P extends ConnectionInitMessage['payload'], E> {
  input: OperationInput<Context<P, E>>;
  decision: Decision;
}

/**
 * Rate limits every operation served over graphql-ws (subscriptions, and
 * queries and mutations sent over the socket) with the same buckets, cost
 * model and store as the HTTP server beside it:
 *
 * ```ts
 * useServer({ schema, ...tokenBucketSubscriptions({ schema, store, buckets, identify }) }, wsServer);
 * ```
 *
 * A subscription is priced when it starts; a denied operation gets the
 * `RATE_LIMITED` error in graphql-ws's `error` message, so it never runs and
 * no event is sent. The returned `onSubscribe` parses and validates the
 * operation to price it, then lets graphql-ws run it as usual (its own
 * `parse`, `validate`, `context` and `roots` apply). Throws at once when an
 * option is wrong or a `@tokenBucket` of the schema names an unknown bucket or
 * costs more than its capacity.
 */
export function tokenBucketSubscriptions<P extends ConnectionInitMessage['payload'] = ConnectionInitMessage['payload'], E = unknown>(
  options: TokenBucketSubscriptionsOptions<P, E>,
): TokenBucketSubscriptionsHooks<P, E> {
  const owner = 'tokenBucketSubscriptions';
  const limiter = new Limiter<Context<P, E>>(options, owner, TOKEN_BUCKET_SUBSCRIPTIONS_OPTIONS);
  const eachEvent = chargeEachEventOption(options, owner);
  const given: unknown = options.schema;
  if (!isSchema(given) && typeof given !== 'function') {
    throw new TypeError(`${owner} option "schema" must be the GraphQLSchema given to useServer, or a function that returns it`);
  }
  const logger: Logger = options.logger ?? console;
  if (typeof logger?.warn !== 'function' || typeof logger.error !== 'function') {
    throw new TypeError(`${owner} option "logger" must have warn and error methods`);
  }
  let schemaOf: (ctx: Context<P, E>, id: string, payload: SubscribePayload) => Promise<GraphQLSchema>;
  if (isSchema(given)) {
    limiter.load(given, undefined, logger);
    if (!eachEvent) warnOfUnchargedEvents(given, limiter.ruleCoordinates(given), logger, owner);
    markSubscriptionsLimited(given);
    schemaOf = () => Promise.resolve(given);
  } else {
    const lazy = options.schema as SchemaFunction<P, E>;
    markSubscriptionsLimitedLazily();
    // A schema built after the options (NestJS builds its own) is checked when it is first met:
    // a faulty annotation is logged, and what it prices is answered RATE_LIMITER_UNAVAILABLE.
    const met = new WeakSet<GraphQLSchema>();
    schemaOf = async (ctx, id, payload) => {
      const schema: unknown = await lazy(ctx, id, payload);
      if (!isSchema(schema)) throw new TypeError(`${owner} option "schema" returned ${schema === null ? 'null' : typeof schema}, not a GraphQLSchema`);
      if (!met.has(schema)) {
        met.add(schema);
        try {
          limiter.modelFor(schema, logger);
          if (!eachEvent) warnOfUnchargedEvents(schema, limiter.ruleCoordinates(schema), logger, owner);
        } catch (error) {
          limiter.refuse(schema, error, logger);
        }
      }
      return schema;
    };
  }
  const { reportCost, refundUnusedCost } = limiter.settings;
  /**
   * Code after this hook assigned another value to what was priced: logged, and the assignment
   * does nothing (graphql-ws closes the whole socket on any error a hook throws).
   */
  const refuse = (name: string): void => {
    logger.error(
      changedAfterPricing(`payload.${name}`, owner, 'and the value priced is kept', `Code that changes the operation must do so before calling ${owner}'s onSubscribe.`),
    );
  };

  // Keyed by the subscribe message's payload, which graphql-ws hands to both
  // hooks: an entry lives exactly as long as the operation it describes.
  const admitted = new WeakMap<SubscribePayload, Admitted<P, E>>();

  return {
    async onSubscribe(ctx, id, payload) {
      // What graphql-ws runs once this returns: held to what is priced (see core/held-operation.ts).
      const variables = frozenVariables(payload.variables);
      holdProperties(payload, { query: payload.query, operationName: payload.operationName, variables }, refuse);
      let schema: GraphQLSchema;
      try {
        schema = await schemaOf(ctx, id, payload);
      } catch (error) {
        return [operationFault(error, logger)];
      }
      // The cost analysis reads only valid operations; graphql-ws validates
      // again with its own `validate`. Whatever parsing or validating one
      // operation throws is that operation's error, never the socket's end:
      // a document nesting too deep overflows the stack, and graphql-js's
      // rules throw for a subscription's root field under @include of a
      // non-null variable.
      let document: DocumentNode;
      let invalid: readonly GraphQLError[];
      try {
        document = parse(payload.query);
        invalid = validate(schema, document);
      } catch (error) {
        if (error instanceof GraphQLError) return [error];
        if (error instanceof RangeError) return [new GraphQLError('The operation nests too deeply to be parsed.', { extensions: { code: 'GRAPHQL_PARSE_FAILED' } })];
        return [operationFault(error, logger)];
      }
      if (invalid.length > 0) return invalid;
      const operation = executedOperation(document, payload.operationName);
      // Nothing to price: refused here, as over HTTP.
      if (!operation) return [unidentifiedOperationError(document, payload.operationName)];

      const input: OperationInput<Context<P, E>> = { schema, document, operation, variables, context: ctx, logger };
      let decision;
      try {
        decision = await limiter.decide(input);
      } catch (error) {
        // An operation the cost analysis refuses is the client's to fix.
        if (error instanceof GraphQLError) return [error];
        // identify's or the store's fault ends this operation alone: the socket and its other operations live on.
        return [operationFault(error, logger)];
      }
      switch (decision.kind) {
        case 'denied':
          return [rateLimitedError(decision.bucket, decision.cost, decision.retryAfterMs)];
        case 'store_error':
          if (!decision.allowed) return [unavailableError()];
          break;
        case 'free':
          // Nothing in it is ever charged, its events included.
          return;
        case 'allowed':
          break;
      }
      const subscription = operation.operation === 'subscription';
      const refunds = refundUnusedCost && !subscription && decision.kind === 'allowed';
      if ((reportCost && decision.kind === 'allowed') || refunds || (eachEvent && subscription)) admitted.set(payload, { input, decision });
      return;
    },

    async onOperation(_ctx, _id, payload, _args, result) {
      const entry = admitted.get(payload);
      if (entry === undefined) return;
      admitted.delete(payload);
      const resolved = await result;
      const { input, decision } = entry;
      if (isAsyncIterable(resolved)) {
        // A subscription (or an incremental delivery) keeps its estimate.
        if (eachEvent) return chargeEachEvent(limiter, input, resolved);
        // Its first event carries what starting it cost, as a result over HTTP does.
        const report = reportCost ? limiter.report(decision) : undefined;
        return report ? reportOnFirst(resolved, report) : undefined;
      }
      const refunded =
        refundUnusedCost && decision.kind === 'allowed' && input.operation.operation !== 'subscription'
          ? await refundUnused(limiter, input, decision, resolved)
          : undefined;
      const report = reportCost ? limiter.report(decision, refunded) : undefined;
      return report ? withRateLimitReport(resolved, report) : undefined;
    },
  };
}
