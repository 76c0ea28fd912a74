import { randomUUID } from 'node:crypto';
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { describeError, internalError } from '../core/errors.js';
import { Limiter } from '../core/limiter.js';
import type { Logger } from '../core/options.js';
import { ChargeSealer, RefundLedger } from './charge-record.js';
import type { CoprocessorState } from './coprocessor-state.js';
import { Documents } from './documents.js';
import { ROUTER_OPTIONS, routerSettings } from './options.js';
import type { RouterCoprocessorOptions, RouterRequest } from './options.js';
import { PROTOCOL_VERSION, SUPERGRAPH_REQUEST, SUPERGRAPH_RESPONSE, UNCHANGED, breakWith, errorsBody, isObject } from './payload.js';
import type { Answer, Payload } from './payload.js';
import { documentSpan, withEdits } from './raw-json.js';
import { supergraphRequest } from './request-stage.js';
import { supergraphResponse } from './response-stage.js';
import { Supergraphs } from './supergraphs.js';

/**
 * Apollo Router's coprocessor, as a Node request listener: each POST is a
 * payload of the Router's coprocessor protocol (version 1), answered with
 * HTTP 200 and the payload itself: its text as the Router sent it, with
 * only the members the limiter changes replaced (`raw-json.ts`), so what
 * the limiter leaves alone comes back byte for byte, numbers beyond 2^53
 * included. At `SupergraphRequest` the operation is
 * priced against the supergraph the Router sends and its tokens taken in
 * one store call; a denied one is ended there with HTTP 429, `Retry-After`
 * and §3's error. At `SupergraphResponse` the charge sealed in the Router's
 * context is reported and its unused part given back. Every other stage,
 * and any payload the limiter cannot use, is answered with its own text.
 *
 *     http.createServer(routerCoprocessor({ store, buckets, identify })).listen(8081);
 *
 * A body that is not JSON is answered 400, one above `maxPayloadBytes` 413,
 * any method but POST 405. Nothing a payload holds makes it answer 500 or
 * throw. Throws at once when an option is wrong.
 */
export function routerCoprocessor(options: RouterCoprocessorOptions): RequestListener {
  const owner = 'routerCoprocessor';
  const { logger, contextSecret, maxPayloadBytes } = routerSettings(options, owner);
  const limiter = new Limiter<RouterRequest>(options, owner, ROUTER_OPTIONS);
  const logged = new Set<string>();
  const state: CoprocessorState = {
    limiter,
    logger,
    supergraphs: new Supergraphs(limiter, logger),
    documents: new Documents(),
    sealer: new ChargeSealer(contextSecret),
    ledger: new RefundLedger(),
    instance: randomUUID(),
    once(problem, message, level = 'warn') {
      if (logged.has(problem)) return;
      logged.add(problem);
      logger[level](`graphql-token-bucket: ${message}`);
    },
  };

  async function answer(payload: Payload): Promise<Answer> {
    try {
      if (payload.version !== PROTOCOL_VERSION) {
        if (payload.stage === SUPERGRAPH_REQUEST) {
          state.once(`version-${String(payload.version)}`, `a SupergraphRequest payload of protocol version ${JSON.stringify(payload.version) ?? 'undefined'} passes unpriced: this coprocessor speaks version ${PROTOCOL_VERSION}`, 'error');
        }
        return UNCHANGED;
      }
      switch (payload.stage) {
        case SUPERGRAPH_REQUEST:
          return await supergraphRequest(state, payload);
        case SUPERGRAPH_RESPONSE:
          return await supergraphResponse(state, payload);
        default:
          return UNCHANGED;
      }
    } catch (error) {
      // A fault of the limiter itself: an operation is never let through unpriced for it, a response keeps its estimate.
      logger.error(`graphql-token-bucket: could not handle a ${String(payload.stage)} payload: ${describeError(error)}`);
      return payload.stage === SUPERGRAPH_REQUEST ? breakWith(500, errorsBody(internalError())) : UNCHANGED;
    }
  }

  return (request, response) => {
    void serve(request, response, maxPayloadBytes, answer, logger);
  };
}

async function serve(request: IncomingMessage, response: ServerResponse, maxPayloadBytes: number, answer: (payload: Payload) => Promise<Answer>, logger: Logger): Promise<void> {
  // A client that goes away mid-request is no error of the coprocessor's.
  request.on('error', () => undefined);
  response.on('error', () => undefined);
  if (request.method !== 'POST') {
    send(response, 405, { error: 'POST a coprocessor payload of Apollo Router (JSON)' }, { allow: 'POST' });
    return;
  }
  const body = await readBody(request, maxPayloadBytes);
  if (body === 'too large') {
    send(response, 413, { error: `the payload is larger than ${maxPayloadBytes} bytes (maxPayloadBytes)` }, { connection: 'close' });
    return;
  }
  if (body === undefined) return;
  const text = body.toString('utf8');
  let payload: unknown;
  try {
    payload = JSON.parse(text);
  } catch {
    send(response, 400, { error: 'the body is not JSON: POST a coprocessor payload of Apollo Router' });
    return;
  }
  if (!isObject(payload)) {
    send(response, 400, { error: 'the body is not a coprocessor payload (a JSON object)' });
    return;
  }
  sendJson(response, 200, answerText(text, payload, await answer(payload), logger));
}

/**
 * The answer: the payload's text with the answer's edits spliced in, every
 * other byte as the Router sent it (`raw-json.ts`). Should the text defeat
 * the splicing, the control fields and the members the answer sets whole,
 * as a new object: what an answer leaves out, the Router keeps as it was.
 */
function answerText(text: string, payload: Payload, answer: Answer, logger: Logger): string {
  try {
    return withEdits(text, documentSpan(text), answer);
  } catch (error) {
    logger.error(`graphql-token-bucket: could not splice the answer into a ${String(payload.stage)} payload: ${describeError(error)}`);
    const whole = Object.fromEntries(answer.flatMap((edit) => (edit.path.length === 1 ? [[edit.path[0], JSON.parse(edit.json) as unknown]] : [])));
    return JSON.stringify({ version: payload.version, stage: payload.stage, id: payload.id, control: payload.control, ...whole });
  }
}

/** The request's body, `'too large'` past the limit, or `undefined` when the client went away. */
function readBody(request: IncomingMessage, limit: number): Promise<Buffer | 'too large' | undefined> {
  const declared = Number(request.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) return Promise.resolve('too large');
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    request.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        request.removeAllListeners('data');
        resolve('too large');
        return;
      }
      chunks.push(chunk);
    });
    request.on('end', () => resolve(size > limit ? 'too large' : Buffer.concat(chunks, size)));
    request.on('close', () => resolve(undefined));
  });
}

function send(response: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  sendJson(response, status, JSON.stringify(body), headers);
}

function sendJson(response: ServerResponse, status: number, json: string, headers: Record<string, string> = {}): void {
  if (response.headersSent || response.destroyed) return;
  response.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json), ...headers });
  response.end(json);
}
