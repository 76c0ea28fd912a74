import { GraphQLError } from 'graphql';
import { COST_HEADER, costHeaderMode, invalidCostHeaderError } from '../core/cost-header.js';
import type { CostHeaderMode } from '../core/cost-header.js';
import { dryRun, dryRunReport } from '../core/dry-run.js';
import { operationFault, rateLimitedError, schemaRefusedError, unavailableError } from '../core/errors.js';
import { executedOperation, unidentifiedOperationError } from '../core/executed-operation.js';
import type { Decision, OperationInput } from '../core/limiter.js';
import { RateLimitFields } from '../core/ratelimit-headers.js';
import { RATE_LIMITER_UNAVAILABLE } from '../client.js';
import { keyString } from '../stores/validate.js';
import { CHARGE_CONTEXT_KEY } from './charge-record.js';
import type { ChargeRecord } from './charge-record.js';
import type { CoprocessorState } from './coprocessor-state.js';
import type { RouterRequest } from './options.js';
import { CONTINUE, breakWith, errorsBody, headerValue, isObject, routerRequest, withContextEntries } from './payload.js';
import type { Answer, Headers, Payload } from './payload.js';
import type { Supergraph } from './supergraphs.js';

/**
 * `SupergraphRequest`: the Router has parsed and validated the client's
 * operation and is about to plan it. The operation is priced against the
 * supergraph SDL of the payload and its tokens taken; the answer lets it
 * run (the payload with `control: "continue"` and what the response stage
 * needs in its context entries, every other field as sent) or ends it
 * (`control: { break: 429 }`, §3's error as `body`, `headers`).
 */
export async function supergraphRequest(state: CoprocessorState, payload: Payload): Promise<Answer> {
  const { sdl, body } = payload;
  if (typeof sdl !== 'string' || sdl === '') {
    state.once('request-sdl', 'the Router sends no supergraph at the SupergraphRequest stage, so no operation is limited: set `sdl: true` under coprocessor.supergraph.request in router.yaml', 'error');
    return CONTINUE;
  }
  if (!isObject(body)) {
    state.once('request-body', 'the Router sends no body at the SupergraphRequest stage, so no operation is limited: set `body: true` under coprocessor.supergraph.request in router.yaml', 'error');
    return CONTINUE;
  }
  const { query, operationName, variables } = body;
  // No operation the Router runs (it refuses a request without a query string before this stage): a payload the limiter cannot use, passed unchanged.
  if (typeof query !== 'string') return CONTINUE;
  if (operationName !== undefined && operationName !== null && typeof operationName !== 'string') return CONTINUE;
  if (variables !== undefined && variables !== null && !isObject(variables)) return CONTINUE;

  const supergraph = state.supergraphs.of(sdl);
  if (supergraph.kind === 'refused') return breakWith(503, errorsBody(schemaRefusedError()));
  const request = routerRequest(payload);
  const { settings } = state.limiter;
  let mode: CostHeaderMode | undefined;
  if (settings.costHeader) {
    const value = headerValue(request, COST_HEADER);
    const asked = costHeaderMode(value);
    if (asked === null) return breakWith(400, errorsBody(invalidCostHeaderError(value ?? '')));
    mode = asked;
  }
  let document;
  try {
    document = state.documents.parse(query);
  } catch (error) {
    // The Router parsed it before this stage, with a parser of its own: one graphql-js cannot read cannot be priced, and is refused.
    return breakWith(400, errorsBody(unparsedError(error)));
  }
  const operation = executedOperation(document, operationName);
  // Nothing to price: refused here, as other servers than graphql-js's may run something.
  if (!operation) return breakWith(400, errorsBody(unidentifiedOperationError(document, operationName)));

  const input: OperationInput<RouterRequest> = { schema: supergraph.schema, document, operation, variables, context: request, logger: state.logger };
  let decision: Decision | undefined;
  try {
    if (mode === 'validate') return await validated(state, input);
    decision = await state.limiter.decide(input);
  } catch (error) {
    return refused(state, error);
  }
  const rateLimitFields = settings.rateLimitHeaders ? new RateLimitFields() : undefined;
  switch (decision.kind) {
    case 'free':
      return CONTINUE;
    case 'store_error':
      return decision.allowed ? CONTINUE : breakWith(503, errorsBody(unavailableError()));
    case 'denied': {
      rateLimitFields?.addDecision(decision);
      const headers: Headers = rateLimitFields === undefined ? {} : headersOf(rateLimitFields);
      if (decision.retryAfterMs !== null) headers['retry-after'] = [String(Math.ceil(decision.retryAfterMs / 1000))];
      return breakWith(429, errorsBody(rateLimitedError(decision.bucket, decision.cost, decision.retryAfterMs)), headers);
    }
    case 'allowed': {
      const record = chargeRecord(state, payload, input, decision, mode, supergraph);
      return record === undefined ? CONTINUE : withContextEntries(CONTINUE, { [CHARGE_CONTEXT_KEY]: state.sealer.seal(record) });
    }
  }
}

/** graphql-js's syntax error, or the refusal of a document that nests too deeply for it to parse. */
function unparsedError(error: unknown): GraphQLError {
  if (error instanceof GraphQLError) return new GraphQLError(error.message, { extensions: { ...error.extensions, code: 'GRAPHQL_PARSE_FAILED' } });
  return new GraphQLError('The operation nests too deeply to be parsed.', { extensions: { code: 'GRAPHQL_PARSE_FAILED' } });
}

/** `GraphQL-Cost: validate`: priced and checked, nothing taken, nothing run; HTTP 200. */
async function validated(state: CoprocessorState, input: OperationInput<RouterRequest>): Promise<Answer> {
  const dry = await dryRun(state.limiter, input);
  if (dry.kind === 'store_error') return breakWith(503, errorsBody(unavailableError()));
  let headers: Headers = {};
  if (state.limiter.settings.rateLimitHeaders && dry.kind === 'checked') {
    const fields = new RateLimitFields();
    fields.addCharges(dry.charges, dry.remaining);
    headers = headersOf(fields);
  }
  // The Router takes a GraphQL response with `data` or `errors`: `data: null`, as nothing ran.
  return breakWith(200, { data: null, extensions: { rateLimit: dry.kind === 'checked' ? dryRunReport(dry) : {} } }, headers);
}

/**
 * The answer to an operation the limiter could not decide: one the cost
 * analysis refuses (or `identify` refuses with a `GraphQLError`) is the
 * client's, with that error's own HTTP status if it names one; a failure of
 * `identify`, or what it returns that is not an identity, is a server
 * error (logged).
 */
function refused(state: CoprocessorState, error: unknown): Answer {
  if (error instanceof GraphQLError) {
    const http = error.extensions['http'];
    const status = statusOf(http) ?? (error.extensions['code'] === RATE_LIMITER_UNAVAILABLE ? 503 : 400);
    return breakWith(status, errorsBody(error), headersOfExtension(http));
  }
  return breakWith(500, errorsBody(operationFault(error, state.logger)));
}

/** An HTTP status an error's `extensions.http` names (Apollo Server's and GraphQL Yoga's shape). */
function statusOf(http: unknown): number | undefined {
  const status = isObject(http) ? http['status'] : undefined;
  return Number.isInteger(status) && (status as number) >= 200 && (status as number) <= 599 ? (status as number) : undefined;
}

/** The headers an error's `extensions.http` names: a `Map` (Apollo Server's `HeaderMap`) or a plain object. */
function headersOfExtension(http: unknown): Headers {
  const headers: Headers = {};
  const given = isObject(http) ? http['headers'] : undefined;
  const entries = given instanceof Map ? [...given.entries()] : isObject(given) ? Object.entries(given) : [];
  for (const [name, value] of entries) {
    if (typeof name === 'string' && typeof value === 'string') headers[name.toLowerCase()] = [value];
  }
  return headers;
}

/** The RateLimit header fields as the Router takes response headers: each a list of values. */
export function headersOf(fields: RateLimitFields): Headers {
  const headers: Headers = {};
  fields.writeTo({ set: (name: string, value: string) => (headers[name] = [value]) });
  return headers;
}

/**
 * What the response stage needs of an admitted operation, when it has
 * anything to do: the report, the RateLimit fields, or a refund (queries
 * and mutations: a subscription keeps its estimate).
 */
function chargeRecord(
  state: CoprocessorState,
  payload: Payload,
  input: OperationInput<RouterRequest>,
  decision: Extract<Decision, { kind: 'allowed' }>,
  mode: CostHeaderMode | undefined,
  supergraph: Extract<Supergraph, { kind: 'accepted' }>,
): ChargeRecord | undefined {
  const { settings } = state.limiter;
  const report = settings.reportCost || mode === 'report';
  const refund = settings.refundUnusedCost && input.operation.operation !== 'subscription';
  if (!report && !settings.rateLimitHeaders && !refund) return undefined;
  // A record is bound to the request it was made for; a payload without an id has none to bind it to.
  if (typeof payload.id !== 'string') return undefined;
  const body = payload.body as { query: string; operationName?: string | null };
  return {
    id: payload.id,
    by: state.instance,
    at: Date.now(),
    report,
    headers: settings.rateLimitHeaders,
    charges: decision.charges.map(({ bucket, key, cost, measured }, i) => ({
      name: bucket.name,
      key: keyString(key),
      cost,
      taken: decision.taken[i] ?? 0,
      remaining: decision.remaining[i] ?? 0,
      measured,
      wouldDeny: decision.wouldDeny.some((w) => w.index === i),
      capacity: bucket.capacity,
      tokens: bucket.rate.tokens,
      periodUs: bucket.rate.periodUs,
    })),
    refund: refund
      ? { supergraph: supergraph.hash, query: body.query, operationName: body.operationName ?? null, variables: (input.variables as Record<string, unknown> | null | undefined) ?? null }
      : undefined,
  };
}
