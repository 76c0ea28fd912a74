import type {
  ApolloServerPlugin,
  BaseContext,
  GraphQLRequestContext,
  GraphQLRequestContextDidResolveOperation,
  GraphQLRequestListener,
  GraphQLServerContext,
  HeaderMap,
} from '@apollo/server';
import { GraphQLError } from 'graphql';
import type { DocumentNode, GraphQLSchema } from 'graphql';
import { internalError, operationFault, rateLimitedError, unavailableError, withHttpStatus } from '../core/errors.js';
import { changedAfterPricing, freezeDocument, frozenVariables, holdProperties } from '../core/held-operation.js';
import type { HttpExtension } from '../core/errors.js';
import { BatchRefusals } from '../core/batch-refusals.js';
import { COST_HEADER, costHeaderMode, invalidCostHeaderError } from '../core/cost-header.js';
import type { CostHeaderMode } from '../core/cost-header.js';
import { dryRun, dryRunReport } from '../core/dry-run.js';
import type { BucketCheck, DryRun } from '../core/dry-run.js';
import { executedOperation, unidentifiedOperationError } from '../core/executed-operation.js';
import { Limiter } from '../core/limiter.js';
import { supergraphPricing } from '../cost/federation.js';
import type { PricingSource } from '../cost/federation.js';
import type { Decision, OperationInput } from '../core/limiter.js';
import { RateLimitFieldsByResponse } from '../core/ratelimit-headers.js';
import { carriesData, refundUnused, returnUnexecuted } from '../core/refunds.js';
import { subscriptionAnnotations, subscriptionsLimited } from '../core/subscriptions.js';
import type { TokenBucketPluginOptions } from './options.js';
import type { TokenBucketApolloPlugin } from './plugin-type.js';

/**
 * Apollo Server reads an error's `extensions.http` as `{ status, headers }`
 * with `headers` a `Map` (its `HeaderMap` is one). `Retry-After` is set in
 * `willSendResponse` instead, where a batch's longest wait can be kept.
 */
const apolloHttp: HttpExtension = (status) => ({ status, headers: new Map<string, string>() });

/**
 * The Apollo Server plugin: after validation it computes what the operation
 * costs per bucket, takes all of it in one store call, and answers with
 * `RATE_LIMITED` (HTTP 429) before any resolver runs when a bucket is short.
 */
export function tokenBucketPlugin<TContext extends BaseContext = BaseContext>(
  options: TokenBucketPluginOptions<TContext>,
): TokenBucketApolloPlugin<TContext> {
  const limiter = new Limiter<GraphQLRequestContext<TContext>>(options, 'tokenBucketPlugin');
  const { reportCost, refundUnusedCost, costHeader, rateLimitHeaders } = limiter.settings;
  // Keyed by the response head, which the operations of an HTTP batch share.
  const fieldsByResponse = new RateLimitFieldsByResponse();
  // The status of a batch the limiter refused an operation of, by response head too.
  const refusals = new BatchRefusals<object>();

  const plugin: ApolloServerPlugin<TContext> = {
    async serverWillStart({ schema, logger }) {
      limiter.load(schema, undefined, logger);
      reportSubscriptions(schema, logger);
      let started = false;
      let warnedWithoutPlans = false;
      return {
        schemaDidLoadOrUpdate({ apiSchema, coreSupergraphSdl }) {
          // The first call is the schema the server starts with (its error fails the start); later ones are a gateway's updates.
          const first = !started;
          started = true;
          let source: PricingSource | undefined;
          try {
            // A gateway's API schema has every directive stripped: its supergraph is what is priced.
            // (A gateway of the application's own may hand over no SDL: its API schema is priced then.)
            source = coreSupergraphSdl === undefined || coreSupergraphSdl.trim() === '' ? undefined : supergraphPricing(coreSupergraphSdl);
          } catch (error) {
            if (first) throw error;
            limiter.refuse(apiSchema, error, logger);
            return;
          }
          if (first) limiter.load(apiSchema, source, logger);
          else limiter.modelFor(apiSchema, logger, source);
          if (source !== undefined) limiter.warnIfUnlimited(apiSchema, logger);
          if (source?.withoutPlans !== undefined && !warnedWithoutPlans) {
            warnedWithoutPlans = true;
            logger.warn(
              `graphql-token-bucket: Apollo's query planner cannot be loaded (${source.withoutPlans}): each operation's entity fetches are priced by a bound on every plan rather than by the gateway's own plan`,
            );
          }
        },
      };
    },

    async requestDidStart(): Promise<GraphQLRequestListener<TContext>> {
      let input: OperationInput<GraphQLRequestContext<TContext>> | undefined;
      let decision: Decision | undefined;
      let mode: CostHeaderMode | undefined;
      /** The answer to `GraphQL-Cost: validate`, sent instead of running the operation. */
      let validated: Record<string, BucketCheck> | undefined;
      let retryAfterSeconds: number | undefined;
      /**
       * The decision while its store call is out: plugins' didResolveOperation
       * hooks run at once, and one after this plugin that refuses the
       * operation sends its response before the call returns.
       */
      let deciding: Promise<Decision | undefined> | undefined;
      /** Whether Apollo Server went on to execute the operation. */
      let executed = false;

      return {
        async didResolveOperation(requestContext) {
          const { schema, logger } = requestContext;
          // Held before anything is awaited: plugins after this one run their didResolveOperation meanwhile.
          const { document, variables } = holdOperation(requestContext, logger);
          if (costHeader) {
            const value = requestContext.request.http?.headers.get(COST_HEADER);
            const asked = costHeaderMode(value);
            if (asked === null) throw invalidCostHeaderError(value ?? '', apolloHttp);
            mode = asked;
          }
          // The operation graphql-js runs: with validation off, the last of
          // several of one name, where `requestContext.operation` is the first.
          const { operationName } = requestContext.request;
          const operation = executedOperation(document, operationName);
          // Nothing to price: refused here, as an executor other than graphql-js's (a gateway's) may run something.
          if (!operation) throw withHttpStatus(unidentifiedOperationError(document, operationName), 400, apolloHttp);
          input = {
            schema,
            document,
            operation,
            variables,
            context: requestContext,
            logger,
          };
          let dry: DryRun | undefined;
          try {
            if (mode === 'validate') dry = await dryRun(limiter, input);
            else {
              const decided = limiter.decide(input);
              deciding = decided.catch(() => undefined);
              decision = await decided;
            }
          } catch (error) {
            // An operation the cost analysis refuses is the client's to fix.
            if (error instanceof GraphQLError) throw withHttpStatus(error, 400, apolloHttp);
            refusals.refused(requestContext.response.http, 500);
            throw operationFault(error, logger, apolloHttp);
          }
          if (dry !== undefined) {
            if (dry.kind === 'store_error') {
              refusals.refused(requestContext.response.http, 503);
              throw unavailableError(apolloHttp);
            }
            validated = dry.kind === 'checked' ? dryRunReport(dry) : {};
            if (rateLimitHeaders && dry.kind === 'checked') fieldsByResponse.for(requestContext.response.http).addCharges(dry.charges, dry.remaining);
            return;
          }
          if (decision === undefined) return;
          if (rateLimitHeaders && decision.kind === 'denied') fieldsByResponse.for(requestContext.response.http).addDecision(decision);
          switch (decision.kind) {
            case 'denied':
              if (decision.retryAfterMs !== null) retryAfterSeconds = Math.ceil(decision.retryAfterMs / 1000);
              refusals.refused(requestContext.response.http, 429);
              throw rateLimitedError(decision.bucket, decision.cost, decision.retryAfterMs, apolloHttp);
            case 'store_error':
              if (decision.allowed) return;
              refusals.refused(requestContext.response.http, 503);
              throw unavailableError(apolloHttp);
            case 'allowed':
            case 'free':
              return;
          }
        },

        async executionDidStart() {
          executed = true;
        },

        async responseForOperation() {
          if (validated === undefined) return null;
          // Priced and checked, not run: no `data`, HTTP 200.
          return { http: { headers: new Map() as HeaderMap }, body: { kind: 'single', singleResult: { extensions: { rateLimit: validated } } } };
        },

        async willSendResponse(requestContext) {
          const http = requestContext.response.http;
          // A batch shares one HTTP head, whose status is the last its operations
          // set: one the limiter refused decides it, whichever finished last
          // (one that failed on its own, with a 400, included).
          const refused = refusals.status(http);
          if (refused !== undefined) http.status = refused;
          if (retryAfterSeconds !== undefined) {
            // A batch shares one HTTP head: keep the longest wait of its operations.
            const existing = Number(http.headers.get('retry-after'));
            const seconds = Number.isFinite(existing) ? Math.max(existing, retryAfterSeconds) : retryAfterSeconds;
            http.headers.set('retry-after', String(seconds));
          }
          // Admitted, then refused by a plugin after this one: its store call may still be out.
          const admitted = decision ?? (executed ? undefined : await deciding);
          if (admitted?.kind === 'allowed' && input !== undefined) {
            const body = requestContext.response.body;
            const unexecuted = !executed && !(body?.kind === 'single' ? carriesData(body.singleResult) : body?.kind === 'incremental');
            // An incremental delivery or a subscription keeps its estimate.
            const refunded = unexecuted
              ? await returnUnexecuted(limiter, requestContext.logger, admitted)
              : refundUnusedCost && body?.kind === 'single' && input.operation.operation !== 'subscription'
                ? // The errors as execution raised them: `formatError` may have dropped their paths from the body.
                  await refundUnused(limiter, input, admitted, { data: body.singleResult.data, errors: requestContext.errors })
                : undefined;
            if (rateLimitHeaders) fieldsByResponse.for(http).addDecision(admitted, refunded);
            const report = reportCost || mode === 'report' ? limiter.report(admitted, refunded) : undefined;
            if (report) {
              if (body?.kind === 'single') {
                body.singleResult.extensions = { ...body.singleResult.extensions, rateLimit: report };
              } else if (body?.kind === 'incremental') {
                body.initialResult.extensions = { ...body.initialResult.extensions, rateLimit: report };
              }
            }
          }
          if (rateLimitHeaders) fieldsByResponse.get(http)?.writeTo(http.headers);
        },
      };
    },
  };
  // Its declared type names no type of @apollo/server (see TokenBucketApolloPlugin); it is the same object.
  return plugin as TokenBucketApolloPlugin<TContext>;
}

/**
 * Holds what Apollo Server's executor will read — `requestContext.request`
 * and `requestContext.document` (and the `queryHash` and `source` Apollo
 * Gateway plans by), `request.query`,
 * `request.operationName` and `request.variables` (now a frozen copy) — to
 * what this plugin prices (see core/held-operation.ts). A later plugin that
 * assigns another value fails the operation with a generic 500, the reason
 * logged.
 */
function holdOperation(
  requestContext: GraphQLRequestContextDidResolveOperation<BaseContext>,
  logger: GraphQLServerContext['logger'],
): { document: DocumentNode; variables: Readonly<Record<string, unknown>> | undefined } {
  const refuse = (what: string): never => {
    logger.error(changedAfterPricing(what, 'tokenBucketPlugin'));
    throw internalError(apolloHttp);
  };
  const { request } = requestContext;
  const document = freezeDocument(requestContext.document);
  const variables = frozenVariables(request.variables);
  holdProperties(request, { query: request.query, operationName: request.operationName, variables }, (name) => refuse(`request.${name}`));
  // The request object itself too: Apollo Server's executor (and a gateway's) reads `requestContext.request` when it runs.
  holdProperties(requestContext, { request, document, queryHash: requestContext.queryHash, source: requestContext.source }, (name) => refuse(`requestContext.${name}`));
  return { document, variables };
}

/**
 * Apollo Server serves subscriptions over WebSockets outside its request
 * pipeline (graphql-ws's `useServer`), where this plugin never sees them. A
 * schema that prices subscriptions says at start-up how they are limited, so
 * none goes unpriced silently. (A subscription POSTed over HTTP runs through
 * the pipeline and is charged like any operation.)
 */
function reportSubscriptions(schema: GraphQLSchema, logger: GraphQLServerContext['logger']): void {
  const annotations = subscriptionAnnotations(schema);
  if (annotations.length === 0) return;
  const where = annotations.length > 3 ? `${annotations.slice(0, 3).join(', ')} and ${annotations.length - 3} more` : annotations.join(', ');
  if (subscriptionsLimited(schema)) {
    logger.info(`graphql-token-bucket: subscriptions (@tokenBucket on ${where}) are limited over graphql-ws by tokenBucketSubscriptions; this plugin charges operations sent over HTTP`);
  } else {
    logger.warn(
      `graphql-token-bucket: @tokenBucket on ${where} prices subscriptions, but subscriptions served over WebSockets do not pass through Apollo Server's plugins: ` +
        "limit them with tokenBucketSubscriptions from 'graphql-token-bucket/graphql-ws' in graphql-ws's useServer options (a subscription sent over HTTP is charged by this plugin)",
    );
  }
}
