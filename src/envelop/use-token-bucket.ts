import type { Plugin } from '@envelop/core';
import { getOperationAST, GraphQLError, isSchema } from 'graphql';
import type { DocumentNode, GraphQLSchema } from 'graphql';
import { rateLimitedError, unavailableError, withHttpStatus } from '../core/errors.js';
import type { HttpExtension } from '../core/errors.js';
import { chargeEachEvent, chargeEachEventOption, isAsyncIterable } from '../core/events.js';
import { Limiter } from '../core/limiter.js';
import type { BucketReport, Decision, OperationInput } from '../core/limiter.js';
import type { Logger } from '../core/options.js';
import { withRateLimitReport } from '../core/result-extensions.js';
import type { UseTokenBucketOptions } from './options.js';

/**
 * GraphQL Yoga reads an error's `extensions.http` as a plain
 * `{ status, headers }`, takes the highest status of a result's errors, and
 * strips `http` from the response body.
 */
const yogaHttp: HttpExtension = (status, headers) => ({ status, headers: { ...headers } });

/** The envelop plugin, with the GraphQL Yoga hook that hands it Yoga's logger. */
export type TokenBucketEnvelopPlugin<TContext extends object> = Plugin<TContext> & {
  onYogaInit(payload: { yoga: { logger: Logger } }): void;
};

/** An operation the plugin answers itself, or one it lets run (`null`: one execution will refuse). */
type Admission<TContext> =
  | { readonly refused: GraphQLError }
  | { readonly refused?: undefined; readonly input: OperationInput<TContext>; readonly decision: Decision };

/**
 * The envelop plugin (GraphQL Yoga, and every server built on envelop): each
 * operation executed or subscribed to is priced and its tokens taken in one
 * store call before any resolver runs. A denied operation is answered with
 * `RATE_LIMITED`, HTTP 429 and `Retry-After`; each operation of a batch is
 * charged on its own. Throws at once when an option is wrong; a `@tokenBucket`
 * naming an unknown bucket or costing more than its capacity fails the
 * server's creation.
 */
export function useTokenBucket<TContext extends object = Record<string, unknown>>(
  options: UseTokenBucketOptions<TContext>,
): TokenBucketEnvelopPlugin<TContext> {
  const owner = 'useTokenBucket';
  const limiter = new Limiter<TContext>(options, owner);
  const eachEvent = chargeEachEventOption(options, owner);
  if (options.logger !== undefined && (typeof options.logger?.warn !== 'function' || typeof options.logger.error !== 'function')) {
    throw new TypeError(`${owner} option "logger" must have warn and error methods`);
  }
  let logger: Logger = options.logger ?? console;
  const { reportCost } = limiter.settings;
  let loaded = false;

  async function admit(args: { schema: unknown; document: unknown; operationName?: unknown; variableValues?: unknown; contextValue: TContext }): Promise<Admission<TContext> | null> {
    const document = args.document as DocumentNode;
    const operation = getOperationAST(document, typeof args.operationName === 'string' ? args.operationName : undefined);
    // Execution itself answers "must provide operation name" and runs nothing.
    if (!operation) return null;
    const input: OperationInput<TContext> = {
      schema: args.schema as GraphQLSchema,
      document,
      operation,
      variables: args.variableValues as OperationInput<TContext>['variables'],
      context: args.contextValue,
      logger,
    };
    let decision: Decision;
    try {
      decision = await limiter.decide(input);
    } catch (error) {
      // An operation the cost analysis refuses is the client's to fix.
      if (error instanceof GraphQLError) return { refused: withHttpStatus(error, 400, yogaHttp) };
      throw error;
    }
    switch (decision.kind) {
      case 'denied':
        return { refused: rateLimitedError(decision.bucket, decision.cost, decision.retryAfterMs, yogaHttp) };
      case 'store_error':
        return decision.allowed ? { input, decision } : { refused: unavailableError(yogaHttp) };
      default:
        return { input, decision };
    }
  }

  return {
    onYogaInit({ yoga }) {
      if (options.logger === undefined) logger = yoga.logger;
    },

    onSchemaChange({ schema }) {
      if (!isSchema(schema)) return;
      if (!loaded) {
        // The first schema is checked strictly: a faulty annotation fails the server's creation.
        limiter.load(schema);
        loaded = true;
      } else {
        limiter.modelFor(schema, logger);
      }
    },

    async onExecute({ args, setResultAndStopExecution }) {
      const admission = await admit(args);
      if (admission === null) return;
      if (admission.refused) {
        setResultAndStopExecution({ errors: [admission.refused] });
        return;
      }
      const report = reportCost ? limiter.report(admission.decision) : undefined;
      if (report === undefined) return;
      return {
        onExecuteDone({ result, setResult }) {
          if (!isAsyncIterable(result)) {
            setResult(withRateLimitReport(result, report));
            return;
          }
          // Incremental delivery: the first payload carries the report.
          let reported = false;
          return {
            onNext({ result: payload, setResult: setPayload }) {
              if (reported) return;
              reported = true;
              setPayload(withRateLimitReport(payload, report as Record<string, BucketReport>));
            },
          };
        },
      };
    },

    async onSubscribe({ args, setResultAndStopExecution }) {
      const admission = await admit(args);
      if (admission === null) return;
      if (admission.refused) {
        setResultAndStopExecution({ errors: [admission.refused] });
        return;
      }
      const { input, decision } = admission;
      // An operation nothing charges costs nothing per event either.
      if (!eachEvent || decision.kind === 'free') return;
      return {
        onSubscribeResult({ result, setResult }) {
          if (isAsyncIterable(result)) setResult(chargeEachEvent(limiter, input, result));
        },
      };
    },
  };
}
