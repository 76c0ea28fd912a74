import type { FastifyInstance, FastifyPluginAsync, FastifyReply } from 'fastify';
import { GraphQLError, Kind } from 'graphql';
import type { DocumentNode, ExecutionResult, GraphQLSchema, OperationDefinitionNode } from 'graphql';
import mercurius from 'mercurius';
import type { MercuriusContext } from 'mercurius';
import { RATE_LIMITER_UNAVAILABLE } from '../client.js';
import { BatchRefusals } from '../core/batch-refusals.js';
import { COST_HEADER, costHeaderMode, invalidCostHeaderError } from '../core/cost-header.js';
import type { CostHeaderMode } from '../core/cost-header.js';
import { dryRun, dryRunReport } from '../core/dry-run.js';
import type { BucketCheck, DryRun } from '../core/dry-run.js';
import { operationFault, rateLimitedError, unavailableError } from '../core/errors.js';
import { chargeEachEventOption } from '../core/events.js';
import { executedOperation, unidentifiedOperationError } from '../core/executed-operation.js';
import { frozenVariables } from '../core/held-operation.js';
import { Limiter } from '../core/limiter.js';
import type { Decision, OperationInput } from '../core/limiter.js';
import type { Logger } from '../core/options.js';
import { RateLimitFieldsByResponse } from '../core/ratelimit-headers.js';
import { refundUnused } from '../core/refunds.js';
import { warnOfUnchargedEvents } from '../core/subscriptions.js';
import { MERCURIUS_TOKEN_BUCKET_OPTIONS } from './options.js';
import type { MercuriusTokenBucketOptions } from './options.js';
import { MercuriusRefusal } from './refusal.js';
import { SubscriptionLimiter } from './subscriptions.js';

// Invariant: Mercurius' executor runs the document the limiter priced,
// narrowed to the priced operation, with a frozen copy of the variables it
// priced. The limiter is the last preExecution hook of every operation
// (added when the server is ready, after every plugin's; one added later
// sends it to the end of that operation's hooks), so every hook's change is
// priced; the copy it hands over keeps a change made after it (a hook's
// unawaited work finishing while the store answers) from reaching the
// executor, and no operation name can run another.

/** The Fastify plugin `mercuriusTokenBucket` is, with its options. */
export type MercuriusTokenBucketPlugin = FastifyPluginAsync<MercuriusTokenBucketOptions>;

/** What the limiter reads of Mercurius' context, which is the application's too: nothing is taken for granted. */
interface OperationContext {
  /** Over HTTP: the Fastify reply. */
  reply?: unknown;
  operationId?: unknown;
  /** This operation's own copy of the preExecution hooks, which Mercurius runs in order. */
  preExecution?: unknown;
  /** Set by Mercurius' routes: the query they run. */
  __currentQuery?: unknown;
  /** Over the WebSocket: the upgrade request. */
  request?: unknown;
}

type PreExecutionHook = (
  schema: GraphQLSchema,
  document: DocumentNode,
  context: OperationContext,
  variables: Record<string, unknown> | undefined,
) => Promise<{ document?: DocumentNode; variables?: Record<string, unknown> | undefined } | void>;

/** What the preExecution hook leaves for onResolution about one operation it let run. */
type Admitted =
  | { readonly kind: 'run'; readonly input: OperationInput<MercuriusContext>; readonly decision: Decision; readonly mode: CostHeaderMode | undefined }
  /** `GraphQL-Cost: validate`: nothing ran; the answer is this report and no data. */
  | { readonly kind: 'validated'; readonly report: Record<string, BucketCheck> };

/** Not read from the request: Mercurius was called by the application, or over the WebSocket. */
const UNKNOWN_NAME: unique symbol = Symbol('unknown operation name');

/**
 * The Fastify plugin that rate limits a Mercurius server, registered after
 * `mercurius`:
 *
 * ```ts
 * await app.register(mercurius, { schema, resolvers, subscription: true });
 * await app.register(mercuriusTokenBucket, { store, buckets, identify: (context, bucket) => key });
 * ```
 *
 * Every operation (over HTTP, batches each on their own, and queries and
 * mutations over the WebSocket) is priced and its tokens taken in one store
 * call before any resolver runs; a subscription when it starts. A denied
 * operation gets `RATE_LIMITED` with HTTP 429 and `Retry-After`. Fails the
 * registration when an option is wrong or a `@tokenBucket` names an unknown
 * bucket or costs more than its capacity.
 */
export const mercuriusTokenBucket: MercuriusTokenBucketPlugin = async function mercuriusTokenBucket(app, options) {
  const owner = 'mercuriusTokenBucket';
  const limiter = new Limiter<MercuriusContext>(options, owner, MERCURIUS_TOKEN_BUCKET_OPTIONS);
  const eachEvent = chargeEachEventOption(options, owner);
  if (options.logger !== undefined && (typeof options.logger?.warn !== 'function' || typeof options.logger.error !== 'function')) {
    throw new TypeError(`${owner} option "logger" must have warn and error methods`);
  }
  const graphql = (app as Partial<Pick<FastifyInstance, 'graphql'>>).graphql;
  if (typeof graphql?.addHook !== 'function') {
    throw new Error(`${owner} must be registered after mercurius, on the same Fastify instance (await app.register(mercurius, …) first)`);
  }
  const logger: Logger = options.logger ?? app.log;
  limiter.load(graphql.schema, undefined, logger);
  const { reportCost, refundUnusedCost, costHeader, rateLimitHeaders } = limiter.settings;

  // Keyed by the Fastify reply, which the operations of an HTTP batch share.
  const fieldsByReply = new RateLimitFieldsByResponse();
  const refusals = new BatchRefusals<FastifyReply>();
  const admitted = new WeakMap<object, Admitted>();
  /** Operations whose pricing was moved behind a hook added after the limiter, until it runs. */
  const deferred = new WeakSet<object>();
  const subscriptions = new SubscriptionLimiter(limiter, logger, eachEvent);

  /** Ends the operation with `error`, which the client sees, and its HTTP response with `status`. */
  function refuse(context: OperationContext, error: GraphQLError, status: number, retryAfterMs: number | null = null): never {
    if (status === 429 || status === 503 || status === 500) refusals.refused(replyOf(context), status, retryAfterMs);
    throw new MercuriusRefusal(error, status);
  }

  const price: PreExecutionHook = async (schema, document, context, variables) => {
    const reply = replyOf(context);
    let mode: CostHeaderMode | undefined;
    if (costHeader && reply !== undefined) {
      const value = headerValue(reply.request.headers[COST_HEADER]);
      const asked = costHeaderMode(value);
      if (asked === null) refuse(context, invalidCostHeaderError(value ?? ''), 400);
      mode = asked;
    }
    const name = requestedOperationName(context);
    const operation = executedOperation(document, name === UNKNOWN_NAME ? undefined : name);
    if (!operation) {
      const error =
        name === UNKNOWN_NAME
          ? new GraphQLError('This document holds several operations and the server cannot tell which one runs: send one operation per document.', {
              extensions: { code: 'BAD_REQUEST' },
            })
          : unidentifiedOperationError(document, name);
      refuse(context, error, 400);
    }
    // What the executor gets: the variables as priced, whatever changes the object Mercurius holds afterwards.
    const held = frozenVariables(variables);
    const input: OperationInput<MercuriusContext> = { schema, document, operation, variables: held, context: context as MercuriusContext, logger };
    let decision: Decision | undefined;
    let dry: DryRun | undefined;
    try {
      if (mode === 'validate') dry = await dryRun(limiter, input);
      else decision = await limiter.decide(input);
    } catch (error) {
      // An operation the cost analysis refuses, or the application's own error from identify, is the client's.
      if (error instanceof GraphQLError) refuse(context, error, statusOf(error));
      if (error instanceof mercurius.ErrorWithProps) throw error;
      refuse(context, operationFault(error, logger), 500);
    }
    if (dry !== undefined) {
      if (dry.kind === 'store_error') refuse(context, unavailableError(), 503);
      if (rateLimitHeaders && reply !== undefined && dry.kind === 'checked') fieldsByReply.for(reply).addCharges(dry.charges, dry.remaining);
      admitted.set(context, { kind: 'validated', report: dry.kind === 'checked' ? dryRunReport(dry) : {} });
      // Priced and checked, not run: the executor gets an operation that reads nothing.
      return { document: nothingOf(operation) };
    }
    if (decision === undefined) return;
    if (rateLimitHeaders && reply !== undefined && decision.kind === 'denied') fieldsByReply.for(reply).addDecision(decision);
    switch (decision.kind) {
      case 'denied':
        refuse(context, rateLimitedError(decision.bucket, decision.cost, decision.retryAfterMs), 429, decision.retryAfterMs);
        break;
      case 'store_error':
        if (!decision.allowed) refuse(context, unavailableError(), 503);
        break;
      case 'allowed':
      case 'free':
        break;
    }
    admitted.set(context, { kind: 'run', input, decision, mode });
    // graphql-js runs what was priced, with the variables as the pricer read them: a document
    // handed over in a hook keeps Mercurius from running its graphql-jit compilation instead.
    const several = document.definitions.some((d) => d.kind === Kind.OPERATION_DEFINITION && d !== operation);
    // An operation that costs nothing keeps its graphql-jit compilation, if any: the variables alone are handed over.
    if (decision.kind === 'free' && !several) return { variables: held };
    return { document: several ? narrowed(document, operation) : document, variables: held };
  };

  const preExecution: PreExecutionHook = async (schema, document, context, variables) => {
    const hooks = context.preExecution;
    // A hook added after the limiter's still runs before the executor: price after it.
    if (Array.isArray(hooks) && hooks[hooks.length - 1] !== preExecution && !deferred.has(context)) {
      deferred.add(context);
      hooks.push(preExecution);
      return;
    }
    deferred.delete(context);
    return price(schema, document, context, variables);
  };

  async function onResolution(execution: ExecutionResult, context: OperationContext): Promise<void> {
    if (deferred.has(context)) {
      logger.error('graphql-token-bucket: an operation ran unpriced: Mercurius did not run the limiter after a preExecution hook added after it. Add that hook before the server is ready.');
    }
    const entry = admitted.get(context);
    if (entry === undefined) return;
    admitted.delete(context);
    if (entry.kind === 'validated') {
      delete (execution as { data?: unknown }).data;
      execution.extensions = { ...execution.extensions, rateLimit: entry.report };
      return;
    }
    const { input, decision, mode } = entry;
    if (decision.kind !== 'allowed') return;
    const refunded =
      refundUnusedCost && input.operation.operation !== 'subscription' ? await refundUnused(limiter, input, decision, execution) : undefined;
    const reply = replyOf(context);
    if (rateLimitHeaders && reply !== undefined) fieldsByReply.for(reply).addDecision(decision, refunded);
    const report = reportCost || mode === 'report' ? limiter.report(decision, refunded) : undefined;
    if (report !== undefined) execution.extensions = { ...execution.extensions, rateLimit: report };
  }

  // Hooks added now run after those of every plugin registered before the server is ready.
  app.addHook('onReady', async () => {
    // The schema served from now on, with what plugins registered after the limiter extended or replaced: its faults fail the start.
    limiter.load(graphql.schema, undefined, logger);
    if (!eachEvent) warnOfUnchargedEvents(graphql.schema, limiter.ruleCoordinates(graphql.schema), logger, owner);
    graphql.addHook('preExecution', preExecution as never);
    graphql.addHook('onResolution', onResolution as never);
    graphql.addHook('preSubscriptionExecution', subscriptions.preSubscriptionExecution as never);
    graphql.addHook('onSubscriptionResolution', subscriptions.onSubscriptionResolution as never);
  });

  app.addHook('onSend', async (_request, reply, payload) => {
    // A batch shares one status line, which Mercurius leaves to its last
    // operation with errors: one the limiter refused decides it, as on
    // Apollo Server (429 with the longest wait, else 503, else 500).
    const status = refusals.status(reply);
    if (status !== undefined) {
      reply.code(status);
      const wait = refusals.retryAfterSeconds(reply);
      if (status === 429 && wait !== undefined) reply.header('retry-after', String(wait));
    }
    if (rateLimitHeaders) fieldsByReply.get(reply)?.writeTo({ set: (name, value) => reply.header(name, value) });
    return payload;
  });
};

// As fastify-plugin marks a plugin: its hooks apply to the whole server, and it needs mercurius registered first.
Object.assign(mercuriusTokenBucket, {
  [Symbol.for('skip-override')]: true,
  [Symbol.for('fastify.display-name')]: 'graphql-token-bucket',
  [Symbol.for('plugin-meta')]: { name: 'graphql-token-bucket', fastify: '5.x', dependencies: ['mercurius'] },
});

/** The Fastify reply of an operation Mercurius' HTTP routes (or `reply.graphql`) run: none over the WebSocket. */
function replyOf(context: OperationContext): FastifyReply | undefined {
  const reply = context.reply as Partial<FastifyReply> | undefined;
  return typeof reply === 'object' && reply !== null && typeof reply.header === 'function' && typeof reply.request === 'object' ? (reply as FastifyReply) : undefined;
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}

/**
 * The operation name Mercurius runs the operation with, where its routes
 * took it from the request: the body (an entry per operation of a batch) or,
 * on GET, the query string. Mercurius' hooks are not told it.
 */
function requestedOperationName(context: OperationContext): unknown {
  const reply = replyOf(context);
  if (typeof context.__currentQuery !== 'string' || reply === undefined) return UNKNOWN_NAME;
  const { request } = reply;
  const params: unknown = request.method === 'GET' ? request.query : request.body;
  const entry: unknown = Array.isArray(params) ? params[typeof context.operationId === 'number' ? context.operationId : 0] : params;
  return typeof entry === 'object' && entry !== null ? (entry as { operationName?: unknown }).operationName : undefined;
}

/** `document` with `operation` as its only operation. */
function narrowed(document: DocumentNode, operation: OperationDefinitionNode): DocumentNode {
  return { ...document, definitions: document.definitions.filter((d) => d.kind !== Kind.OPERATION_DEFINITION || d === operation) };
}

/** An operation of the same name that reads only `__typename`: what a dry run hands the executor. */
function nothingOf(operation: OperationDefinitionNode): DocumentNode {
  return {
    kind: Kind.DOCUMENT,
    definitions: [
      {
        kind: Kind.OPERATION_DEFINITION,
        operation: 'query' as OperationDefinitionNode['operation'],
        ...(operation.name ? { name: operation.name } : {}),
        selectionSet: { kind: Kind.SELECTION_SET, selections: [{ kind: Kind.FIELD, name: { kind: Kind.NAME, value: '__typename' } }] },
      },
    ],
  };
}

/**
 * The HTTP status of a `GraphQLError` the limiter met: the one an
 * application's own error asks for (`extensions.http.status`, as Apollo
 * Server and Yoga read it), 503 for an unavailable limiter, else 400.
 */
function statusOf(error: GraphQLError): number {
  const status = (error.extensions['http'] as { status?: unknown } | undefined)?.status;
  if (typeof status === 'number' && Number.isInteger(status) && status >= 400 && status <= 599) return status;
  return error.extensions['code'] === RATE_LIMITER_UNAVAILABLE ? 503 : 400;
}
