import { executedOperation } from '../core/executed-operation.js';
import type { Charge, Decision } from '../core/limiter.js';
import { RateLimitFields } from '../core/ratelimit-headers.js';
import { refundUnused } from '../core/refunds.js';
import type { ExecutedResult, Refunded } from '../core/refunds.js';
import { Rate } from '../rate.js';
import { TokenBucket } from '../token-bucket.js';
import { CHARGE_CONTEXT_KEY, SPENT } from './charge-record.js';
import type { ChargeRecord, ChargedBucket, RefundSource, Unusable } from './charge-record.js';
import type { CoprocessorState } from './coprocessor-state.js';
import { UNCHANGED, contextEntries, isObject, routerRequest, set, withContextEntries } from './payload.js';
import type { Answer, Payload } from './payload.js';
import { headersOf } from './request-stage.js';
import { MAX_SUPERGRAPHS } from './supergraphs.js';

type Admitted = Extract<Decision, { kind: 'allowed' }>;

/**
 * `SupergraphResponse`: the first response of an operation the request
 * stage admitted (later ones, `@defer` parts and subscription events, come
 * to this stage too). From the charge the request stage sealed in the
 * Router's context it adds `extensions.rateLimit`, the RateLimit header
 * fields, and gives back what the response shows was not used — once: the
 * answer marks the entry spent, and later payloads of the request find it so.
 */
export async function supergraphResponse(state: CoprocessorState, payload: Payload): Promise<Answer> {
  const { settings } = state.limiter;
  if (!isObject(payload.context)) {
    if (settings.reportCost || settings.refundUnusedCost || settings.rateLimitHeaders) {
      state.once('response-context', 'the Router sends no context at the SupergraphResponse stage, so responses have no report, no RateLimit fields and no refund: set `context: all` under coprocessor.supergraph.response in router.yaml');
    }
    return UNCHANGED;
  }
  const sealed = contextEntries(payload)[CHARGE_CONTEXT_KEY];
  if (sealed === undefined || sealed === SPENT) return UNCHANGED;
  let answer = withContextEntries(UNCHANGED, { [CHARGE_CONTEXT_KEY]: SPENT });
  const opened = state.sealer.open(sealed, payload.id);
  if (!opened.ok) {
    state.once(`record-${opened.why}`, UNUSABLE[opened.why]);
    return answer;
  }
  const { record, mac } = opened;
  const decision = admitted(record, settings.buckets);
  if (decision === undefined) {
    state.once('record-buckets', UNUSABLE.buckets);
    return answer;
  }
  const body = isObject(payload.body) ? payload.body : undefined;
  if (body === undefined && (record.report || record.refund !== undefined)) {
    state.once('response-body', 'the Router sends no body at the SupergraphResponse stage, so responses have no report and no refund: set `body: true` under coprocessor.supergraph.response in router.yaml');
  }
  // Incremental delivery and subscriptions keep the estimate: this payload is only the first part.
  const refunded =
    record.refund !== undefined && body !== undefined && payload.hasNext !== true ? await refund(state, payload, record, mac, record.refund, decision, body) : undefined;
  // The report is set in the body's `extensions` (made when there is none); the rest of the body goes back as the Router sent it.
  if (record.report && body !== undefined) answer = [...answer, set(['body', 'extensions', 'rateLimit'], state.limiter.report(decision, refunded))];
  if (record.headers) {
    if (isObject(payload.headers)) {
      const fields = new RateLimitFields();
      fields.addDecision(decision, refunded);
      answer = [...answer, ...Object.entries(headersOf(fields)).map(([name, values]) => set(['headers', name], values))];
    } else {
      state.once('response-headers', 'the Router sends no headers at the SupergraphResponse stage, so admitted responses have no RateLimit fields: set `headers: true` under coprocessor.supergraph.response in router.yaml');
    }
  }
  return answer;
}

const UNUSABLE: Readonly<Record<Unusable | 'buckets', string>> = {
  foreign:
    'a response reached this coprocessor with a charge another one sealed with a different contextSecret: it keeps its estimate and has no report. Give every replica the same contextSecret',
  forged: 'a response came with a charge whose signature does not hold (forged or altered): nothing is given back for it',
  malformed: 'a response came with a charge entry that is not one this coprocessor writes: nothing is given back for it',
  'other-request': 'a response came with a charge sealed for another request: nothing is given back for it',
  buckets: 'a response came with a charge of a bucket this coprocessor is not configured with: nothing is given back for it',
};

/** The admitted decision the record describes: its buckets as configured, or a plan's terms. */
function admitted(record: ChargeRecord, buckets: ReadonlyMap<string, TokenBucket>): Admitted | undefined {
  const charges: Charge[] = [];
  for (const charged of record.charges) {
    const configured = buckets.get(charged.name);
    if (configured === undefined) return undefined;
    const bucket = sameTerms(configured, charged) ? configured : planBucket(charged);
    if (bucket === undefined) return undefined;
    charges.push({ bucket, key: charged.key, cost: charged.cost, measured: charged.measured });
  }
  return {
    kind: 'allowed',
    charges,
    remaining: record.charges.map((c) => c.remaining),
    wouldDeny: record.charges.flatMap((c, index) => (c.wouldDeny ? [{ index, retryAfterMs: null }] : [])),
    taken: record.charges.map((c) => c.taken),
  };
}

function sameTerms(bucket: TokenBucket, charged: ChargedBucket): boolean {
  return bucket.capacity === charged.capacity && bucket.rate.tokens === charged.tokens && bucket.rate.periodUs === charged.periodUs;
}

/** The bucket of the plan `identify` returned at the request stage, built again from its terms. */
function planBucket(charged: ChargedBucket): TokenBucket | undefined {
  try {
    const bucket = new TokenBucket(charged.name, charged.capacity, new Rate(charged.tokens, charged.periodUs / 1000));
    return sameTerms(bucket, charged) ? bucket : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Prices the response and gives back what the estimate charged beyond it,
 * as every adapter does (`refundUnused`), against the supergraph the
 * operation was priced with. A record this replica already refunded, or
 * one past its window, keeps its estimate.
 */
async function refund(
  state: CoprocessorState,
  payload: Payload,
  record: ChargeRecord,
  mac: string,
  source: RefundSource,
  decision: Admitted,
  body: Record<string, unknown>,
): Promise<Refunded | undefined> {
  if (record.by !== state.instance) {
    state.once(
      'refund-elsewhere',
      'a response reached this coprocessor for an operation another replica charged: it keeps its estimate, since a store gives back only tokens it took itself. Run one coprocessor per Router (a sidecar) so that both stages of a request reach the same one',
    );
    return undefined;
  }
  let supergraph = state.supergraphs.withHash(source.supergraph);
  if (supergraph === undefined && typeof payload.sdl === 'string') {
    const sent = state.supergraphs.of(payload.sdl);
    if (sent.hash === source.supergraph) supergraph = sent;
  }
  if (supergraph?.kind !== 'accepted') {
    state.once(
      'refund-supergraph',
      `a response came for an operation priced against a supergraph this coprocessor no longer keeps (more than ${MAX_SUPERGRAPHS} others came since): it keeps its estimate. Set \`sdl: true\` under coprocessor.supergraph.response in router.yaml to price it anyway`,
    );
    return undefined;
  }
  if (!Object.hasOwn(body, 'data')) {
    // A request error (nothing ran, or the Router refused after this stage) keeps its estimate, as does a body sent without its data.
    if (body['errors'] === undefined) state.once('response-data', RESPONSE_WITHOUT_DATA);
    return undefined;
  }
  const result = executedResult(body);
  if (result === undefined) return undefined;
  let document;
  try {
    document = state.documents.parse(source.query);
  } catch {
    return undefined;
  }
  const operation = executedOperation(document, source.operationName);
  if (operation === undefined) return undefined;
  const claim = state.ledger.claim(record, mac);
  if (claim !== 'ok') {
    state.once(`refund-${claim}`, claim === 'expired' ? 'a response came after its charge could be refunded (10 minutes), or from a clock far ahead: it keeps its estimate' : 'a response payload came twice with the same charge: nothing is given back the second time');
    return undefined;
  }
  const input = { schema: supergraph.schema, document, operation, variables: source.variables, context: routerRequest(payload), logger: state.logger };
  return refundUnused(state.limiter, input, decision, result);
}

const RESPONSE_WITHOUT_DATA =
  'the Router sends SupergraphResponse bodies without their data, so no response is refunded: set `body: true` under coprocessor.supergraph.response in router.yaml';

/**
 * The response as the refund reads it. Errors whose shape is not a GraphQL
 * error's, or paths that are not response paths, count as errors that
 * cannot be placed (the estimate is kept where data came back); a body
 * whose `errors` is not a list is no response to price.
 */
function executedResult(body: Record<string, unknown>): ExecutedResult | undefined {
  const { data, errors } = body;
  if (errors === undefined || errors === null) return { data };
  if (!Array.isArray(errors)) return undefined;
  return {
    data,
    errors: (errors as unknown[]).map((error) => {
      const path = isObject(error) ? error['path'] : undefined;
      return Array.isArray(path) && path.every((key) => typeof key === 'string' || Number.isInteger(key)) ? { path: path as (string | number)[] } : {};
    }),
  };
}
