import type { Plugin } from '@envelop/core';
import { GraphQLError, isSchema } from 'graphql';
import type { DocumentNode, ExecutionResult, GraphQLSchema } from 'graphql';
import { BatchRefusals } from '../core/batch-refusals.js';
import type { RefusalStatus } from '../core/batch-refusals.js';
import { COST_HEADER, costHeaderMode, invalidCostHeaderError } from '../core/cost-header.js';
import type { CostHeaderMode } from '../core/cost-header.js';
import { dryRun, dryRunReport } from '../core/dry-run.js';
import type { DryRun } from '../core/dry-run.js';
import { internalError, operationFault, rateLimitedError, unavailableError, withHttpStatus } from '../core/errors.js';
import { changedAfterPricing, freezeDocument, frozenVariables, holdProperties } from '../core/held-operation.js';
import type { HttpExtension } from '../core/errors.js';
import { chargeEachEvent, chargeEachEventOption, isAsyncIterable } from '../core/events.js';
import { executedOperation, unidentifiedOperationError } from '../core/executed-operation.js';
import { Limiter } from '../core/limiter.js';
import { stitchedPricing } from '../cost/federation.js';
import type { PricingSource } from '../cost/federation.js';
import type { BucketReport, Decision, OperationInput } from '../core/limiter.js';
import type { Refunded } from '../core/refunds.js';
import type { Logger } from '../core/options.js';
import { RateLimitFieldsByResponse } from '../core/ratelimit-headers.js';
import { carriesData, refundUnused, returnUnexecuted } from '../core/refunds.js';
import { withRateLimitReport } from '../core/result-extensions.js';
import { warnOfUnchargedEvents } from '../core/subscriptions.js';
import { USE_TOKEN_BUCKET_OPTIONS } from './options.js';
import type { UseTokenBucketOptions } from './options.js';

/**
 * GraphQL Yoga reads an error's `extensions.http` as a plain
 * `{ status, headers }`, takes the highest status of a result's errors, and
 * strips `http` from the response body.
 */
const yogaHttp: HttpExtension = (status, headers) => ({ status, headers: { ...headers } });

const STATUS_TEXT: Readonly<Record<RefusalStatus, string>> = { 429: 'Too Many Requests', 503: 'Service Unavailable', 500: 'Internal Server Error' };

/** The envelop plugin, with the GraphQL Yoga hooks that hand it Yoga's logger and each HTTP response. */
export type TokenBucketEnvelopPlugin<TContext extends object> = Plugin<TContext> & {
  onYogaInit(payload: { yoga: { logger: Logger } }): void;
  onResponse(payload: {
    request: Request;
    response: Response;
    setResponse?(response: Response): void;
    fetchAPI?: { Response: typeof Response; Headers: typeof Headers };
  }): void;
};

/**
 * An operation the plugin answers itself (refused, or `GraphQL-Cost:
 * validate`), or one it lets run (`null`: nothing was decided).
 */
type Admission<TContext> =
  | { readonly answer: ExecutionResult }
  | { readonly answer?: undefined; readonly input: OperationInput<TContext>; readonly decision: Decision; readonly mode: CostHeaderMode | undefined };

/** The execution arguments the limiter prices, and holds on envelop's `args` (see core/held-operation.ts). */
const HELD = ['schema', 'document', 'operationName', 'variableValues'] as const;

interface PricedArgs {
  schema: unknown;
  document: unknown;
  operationName?: unknown;
  variableValues?: unknown;
}

/**
 * Holds the arguments of an operation to what is priced: the document
 * frozen, the variables a frozen copy, each a read-only property of envelop's
 * `args` (which later plugins' hooks get, and envelop spreads into the call
 * of the execute function); a plugin that assigns another value fails the
 * operation, the reason logged. Returns what is held.
 */
function holdArgs(args: PricedArgs, refuse: (what: string) => never): Readonly<PricedArgs> {
  const held: PricedArgs = {
    schema: args.schema,
    document: freezeDocument(args.document as DocumentNode),
    operationName: args.operationName,
    variableValues: frozenVariables(args.variableValues),
  };
  holdProperties(args, held as unknown as Record<string, unknown>, (name) => refuse(`args.${name}`));
  return held;
}

/**
 * `run` (envelop's execute or subscribe), called only with the arguments held
 * for it: a later plugin's wrapper that hands it others fails the operation,
 * as a later plugin assigning them does. `started` is told of the call.
 */
function asPriced<TArgs extends PricedArgs, TResult>(
  run: (args: TArgs) => TResult,
  held: Readonly<PricedArgs>,
  refuse: (what: string) => never,
  started: () => void,
): (args: TArgs) => TResult {
  return (args) => {
    for (const name of HELD) {
      if (args[name] !== held[name]) refuse(`the ${name} handed to the execute function`);
    }
    started();
    return run(args);
  };
}

/** The `Request` GraphQL Yoga puts in the context: the header is read from it, the response fields are keyed by it. */
function requestOf(context: unknown): Request | undefined {
  const request = (context as { request?: unknown } | null)?.request;
  return typeof request === 'object' && request !== null && typeof (request as Partial<Request>).headers?.get === 'function'
    ? (request as Request)
    : undefined;
}

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
  const limiter = new Limiter<TContext>(options, owner, USE_TOKEN_BUCKET_OPTIONS);
  const eachEvent = chargeEachEventOption(options, owner);
  if (options.logger !== undefined && (typeof options.logger?.warn !== 'function' || typeof options.logger.error !== 'function')) {
    throw new TypeError(`${owner} option "logger" must have warn and error methods`);
  }
  let logger: Logger = options.logger ?? console;
  const { reportCost, refundUnusedCost, costHeader, rateLimitHeaders } = limiter.settings;
  // Keyed by Yoga's Request, which the operations of an HTTP batch share.
  const fieldsByRequest = new RateLimitFieldsByResponse();
  const refusals = new BatchRefusals<Request>();
  /**
   * Per request, the admitted operations whose executor has not been called:
   * a plugin after this one that throws in its onExecute ends the operation
   * with no hook of this one called, so their tokens come back when the
   * response is sent.
   */
  const unexecuted = new WeakMap<Request, Set<() => Promise<unknown>>>();
  let loaded = false;
  /** A later plugin changed what was priced: logged, and the operation fails with a generic 500. */
  const refuse = (what: string): never => {
    logger.error(changedAfterPricing(what, owner));
    throw internalError(yogaHttp);
  };
  /**
   * An admitted operation whose executor is not called yet: `giveBack` returns
   * what it took; `executed` takes it off the request's list.
   */
  function untilExecuted(contextValue: unknown, decision: Extract<Decision, { kind: 'allowed' }>): { giveBack: () => Promise<Refunded>; executed: () => void } {
    const request = requestOf(contextValue);
    const giveBack = () => returnUnexecuted(limiter, logger, decision);
    if (request !== undefined) {
      let returns = unexecuted.get(request);
      if (returns === undefined) unexecuted.set(request, (returns = new Set()));
      returns.add(giveBack);
    }
    return { giveBack, executed: () => void (request !== undefined && unexecuted.get(request)?.delete(giveBack)) };
  }
  /** True while the server is being created: a schema given then fails the creation; one met later (a gateway's) is logged. */
  let creating = true;

  async function admit(
    args: { schema: unknown; document: unknown; operationName?: unknown; variableValues?: unknown; contextValue: TContext },
  ): Promise<Admission<TContext> | null> {
    const request = requestOf(args.contextValue);
    let mode: CostHeaderMode | undefined;
    if (costHeader && request !== undefined) {
      const value = request.headers.get(COST_HEADER);
      const asked = costHeaderMode(value);
      if (asked === null) return { answer: { errors: [invalidCostHeaderError(value ?? '', yogaHttp)] } };
      mode = asked;
    }
    const document = args.document as DocumentNode;
    const operation = executedOperation(document, args.operationName);
    // Nothing to price: refused here, as an executor other than graphql-js's (a gateway's) may run something.
    if (!operation) return { answer: { errors: [withHttpStatus(unidentifiedOperationError(document, args.operationName), 400, yogaHttp)] } };
    const input: OperationInput<TContext> = {
      schema: args.schema as GraphQLSchema,
      document,
      operation,
      variables: args.variableValues as OperationInput<TContext>['variables'],
      context: args.contextValue,
      logger,
    };
    let decision: Decision | undefined;
    let dry: DryRun | undefined;
    try {
      if (mode === 'validate') dry = await dryRun(limiter, input);
      else decision = await limiter.decide(input);
    } catch (error) {
      // An operation the cost analysis refuses is the client's to fix.
      if (error instanceof GraphQLError) return { answer: { errors: [withHttpStatus(error, 400, yogaHttp)] } };
      refusals.refused(request, 500);
      return { answer: { errors: [operationFault(error, logger, yogaHttp)] } };
    }
    if (dry !== undefined) {
      if (dry.kind === 'store_error') {
        refusals.refused(request, 503);
        return { answer: { errors: [unavailableError(yogaHttp)] } };
      }
      if (rateLimitHeaders && request !== undefined && dry.kind === 'checked') fieldsByRequest.for(request).addCharges(dry.charges, dry.remaining);
      // Priced and checked, not run: no `data`, HTTP 200.
      return { answer: { extensions: { rateLimit: dry.kind === 'checked' ? dryRunReport(dry) : {} } } };
    }
    if (decision === undefined) return null;
    if (rateLimitHeaders && request !== undefined && decision.kind === 'denied') fieldsByRequest.for(request).addDecision(decision);
    switch (decision.kind) {
      case 'denied':
        refusals.refused(request, 429, decision.retryAfterMs);
        return { answer: { errors: [rateLimitedError(decision.bucket, decision.cost, decision.retryAfterMs, yogaHttp)] } };
      case 'store_error':
        if (decision.allowed) return { input, decision, mode };
        refusals.refused(request, 503);
        return { answer: { errors: [unavailableError(yogaHttp)] } };
      default:
        return { input, decision, mode };
    }
  }

  return {
    onYogaInit({ yoga }) {
      if (options.logger === undefined) logger = yoga.logger;
    },

    async onResponse({ request, response, setResponse, fetchAPI }) {
      const returns = unexecuted.get(request);
      if (returns !== undefined) {
        unexecuted.delete(request);
        await Promise.all([...returns].map((giveBack) => giveBack()));
      }
      if (rateLimitHeaders) fieldsByRequest.get(request)?.writeTo(response.headers);
      // GraphQL Yoga answers a batch 200 whatever its operations' errors; one
      // with an operation the limiter refused answers as Apollo Server's
      // does: 429 with the longest wait, else 503, else 500. (A single
      // operation already carries its own status.)
      const status = refusals.status(request);
      if (status === undefined || response.status === status || setResponse === undefined) return;
      const wait = refusals.retryAfterSeconds(request);
      // The server's own Fetch API: its body streams are its own.
      const fetch = fetchAPI ?? globalThis;
      const headers = new fetch.Headers(response.headers);
      if (status === 429 && wait !== undefined) headers.set('retry-after', String(wait));
      setResponse(new fetch.Response(response.body, { status, statusText: STATUS_TEXT[status], headers }));
    },

    onPluginInit() {
      // envelop hands over the schema it was created with before it returns.
      queueMicrotask(() => {
        creating = false;
      });
    },

    onSchemaChange({ schema }) {
      if (!isSchema(schema)) return;
      // A schema stitched from subgraphs (Hive Gateway's) also says what each field needs from the others;
      // it arrives after start-up, whenever the gateway's plugins were set up.
      const stitched = schema.extensions['stitchingInfo'] !== undefined;
      if (!loaded && creating && !stitched) {
        // The first schema is checked strictly: a faulty annotation fails the server's creation.
        limiter.load(schema, undefined, logger);
      } else {
        // Thrown here, the error would answer every request with a bare 500.
        let source: PricingSource | undefined;
        try {
          source = stitched ? stitchedPricing(schema) : undefined;
          limiter.modelFor(schema, logger, source);
          if (stitched) limiter.warnIfUnlimited(schema, logger);
        } catch (error) {
          limiter.refuse(schema, error, logger, source);
        }
      }
      if (!eachEvent) warnOfUnchargedEvents(schema, limiter.ruleCoordinates(schema), logger, owner);
      loaded = true;
    },

    async onExecute({ args, executeFn, setExecuteFn, setResultAndStopExecution }) {
      let started = false;
      let pending: ReturnType<typeof untilExecuted> | undefined;
      setExecuteFn(
        asPriced(executeFn, holdArgs(args, refuse), refuse, () => {
          started = true;
          pending?.executed();
        }),
      );
      const admission = await admit(args);
      if (admission === null) return;
      if (admission.answer) {
        setResultAndStopExecution(admission.answer);
        return;
      }
      const { input, decision, mode } = admission;
      if (decision.kind !== 'allowed') return;
      // Until the executor is called, a plugin after this one may still refuse the operation.
      const admitted = (pending = untilExecuted(args.contextValue, decision));
      const request = rateLimitHeaders ? requestOf(args.contextValue) : undefined;
      const reported = reportCost || mode === 'report';
      return {
        async onExecuteDone({ result, setResult }) {
          admitted.executed();
          if (!isAsyncIterable(result)) {
            // Answered by a plugin after this one without running (and without data): nothing ran, nothing is kept.
            const refunded =
              !started && !carriesData(result)
                ? await admitted.giveBack()
                : refundUnusedCost
                  ? await refundUnused(limiter, input, decision, result)
                  : undefined;
            if (request !== undefined) fieldsByRequest.for(request).addDecision(decision, refunded);
            const report = reported ? limiter.report(decision, refunded) : undefined;
            if (report !== undefined) setResult(withRateLimitReport(result, report));
            return;
          }
          // Incremental delivery keeps its estimate; the first payload carries the report.
          if (request !== undefined) fieldsByRequest.for(request).addDecision(decision);
          const report = reported ? limiter.report(decision) : undefined;
          if (report === undefined) return;
          return reportOnFirst(report);
        },
      };
    },

    async onSubscribe({ args, subscribeFn, setSubscribeFn, setResultAndStopExecution }) {
      let pending: ReturnType<typeof untilExecuted> | undefined;
      setSubscribeFn(asPriced(subscribeFn, holdArgs(args, refuse), refuse, () => pending?.executed()));
      const admission = await admit(args);
      if (admission === null) return;
      if (admission.answer) {
        setResultAndStopExecution(admission.answer);
        return;
      }
      const { input, decision, mode } = admission;
      // Until the subscribe function is called, a plugin after this one may still refuse the subscription.
      if (decision.kind === 'allowed') pending = untilExecuted(args.contextValue, decision);
      if (rateLimitHeaders && decision.kind === 'allowed') {
        const request = requestOf(args.contextValue);
        if (request !== undefined) fieldsByRequest.for(request).addDecision(decision);
      }
      // An operation nothing charges costs nothing per event either.
      if (decision.kind === 'free') return;
      const reported = reportCost || mode === 'report';
      // The first event carries what starting the subscription cost, as Apollo Server's answer does.
      const report = !eachEvent && reported ? limiter.report(decision) : undefined;
      return {
        onSubscribeResult({ result, setResult }) {
          // Answered by a plugin after this one with events or data: kept, as if it ran.
          if (isAsyncIterable(result) || carriesData(result)) pending?.executed();
          if (!isAsyncIterable(result)) return;
          if (eachEvent) {
            setResult(chargeEachEvent(limiter, input, result, reported));
            return;
          }
          return report === undefined ? undefined : reportOnFirst(report);
        },
      };
    },
  };
}

/** The hooks that put `report` on the first payload of a stream (incremental delivery, a subscription's events). */
function reportOnFirst(report: Record<string, BucketReport>): { onNext: (payload: { result: ExecutionResult; setResult: (result: ExecutionResult) => void }) => void } {
  let sent = false;
  return {
    onNext({ result: payload, setResult: setPayload }) {
      if (sent) return;
      sent = true;
      setPayload(withRateLimitReport(payload, report));
    },
  };
}
