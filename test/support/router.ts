// Apollo Router's side of the coprocessor protocol, for the coprocessor's
// tests. No Router binary can be fetched here, so the payloads are built as
// the Router builds them and its answers applied as it applies them, both
// taken from the Router's own source and documentation:
//
//   apollographql/router, Router 2.7.0 (commit 01dd32745a4e886c90dc8c5a32d24f5c6bcaef15):
//     apollo-router/src/plugins/coprocessor/supergraph.rs — what each stage sends
//       (`Externalizable::supergraph_builder()`), and how an answer is applied:
//       at SupergraphRequest `control` is required, a break ends the request with
//       the answer's body and *replaces* the response headers with its headers;
//       at SupergraphResponse a `control` sets the HTTP status, context entries
//       are upserted, headers and body replace the response's when present;
//       later chunks of a response (`@defer`, subscription events) come to the
//       same stage without headers, with `hasNext`.
//     apollo-router/src/services/external.rs (commit 00399c31cae043379d7a6ec9a3fc037125a9336d):
//       the payload's fields (camelCase: version, stage, control, id, headers,
//       body, context, sdl, uri, method, path, serviceName, statusCode, hasNext),
//       `control` serialised as "continue" or { "break": status }.
//     apollo-router/src/plugins/coprocessor/mod.rs (commit 00d3ed0702dfbe150ba04516c0c65581851b9569):
//       `validate_coprocessor_output` (version 1, the same stage, `control` at a
//       request stage), `internalize_header_map` (content-length dropped).
//     apollo-router/src/request.rs: the SupergraphRequest body, a graphql::Request
//       (query; operationName and variables left out when empty).
//     apollo-router/src/graphql/response.rs: a break body without `data` must hold an error.
//     docs/source/routing/customization/coprocessor/reference.mdx (commit 06786ad455b56ae35fce048e460e647cb14bcb18):
//       the example payloads of each stage, `context: { entries }`.
import { createServer } from 'node:http';
import type { RequestListener, Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export type Headers = Record<string, string[]>;
export type Entries = Record<string, unknown>;

export interface ClientRequest {
  query: string;
  operationName?: string;
  variables?: Record<string, unknown>;
  /** Header names as clients send them; the Router lower-cases them. */
  headers?: Record<string, string>;
}

let ids = 0;

/** A client request id as the Router makes one (32 hex digits). */
export function requestId(): string {
  ids += 1;
  return `${process.pid.toString(16).padStart(8, '0')}${ids.toString(16).padStart(24, '0')}`;
}

/** The Router's request headers: names lower-case, every value a list. */
export function routerHeaders(headers: Record<string, string> = {}): Headers {
  const out: Headers = { 'content-type': ['application/json'], host: ['127.0.0.1:4000'], accept: ['*/*'] };
  for (const [name, value] of Object.entries(headers)) (out[name.toLowerCase()] ??= []).push(value);
  return out;
}

/** The SupergraphRequest payload of `coprocessor.supergraph.request: { headers, body, sdl, context: all, method }`. */
export function supergraphRequestPayload(request: ClientRequest, sdl: string, options: { id?: string; entries?: Entries } = {}): Record<string, unknown> {
  const body: Record<string, unknown> = { query: request.query };
  if (request.operationName !== undefined) body['operationName'] = request.operationName;
  if (request.variables !== undefined && Object.keys(request.variables).length > 0) body['variables'] = request.variables;
  return {
    version: 1,
    stage: 'SupergraphRequest',
    control: 'continue',
    id: options.id ?? requestId(),
    headers: routerHeaders(request.headers),
    body,
    context: { entries: { 'accepts-json': true, 'accepts-wildcard': false, 'accepts-multipart-defer': false, ...options.entries } },
    sdl,
    method: 'POST',
  };
}

/** The SupergraphResponse payload of `coprocessor.supergraph.response: { headers, body, context: all, status_code }` (no `control`). */
export function supergraphResponsePayload(
  id: string,
  body: Record<string, unknown>,
  entries: Entries,
  options: { headers?: Headers; statusCode?: number; sdl?: string; hasNext?: boolean } = {},
): Record<string, unknown> {
  const payload: Record<string, unknown> = {
    version: 1,
    stage: 'SupergraphResponse',
    id,
    headers: options.headers ?? { 'content-type': ['application/json'] },
    body,
    context: { entries },
    statusCode: options.statusCode ?? 200,
  };
  if (options.sdl !== undefined) payload['sdl'] = options.sdl;
  if (options.hasNext !== undefined) payload['hasNext'] = options.hasNext;
  return payload;
}

export interface Answered {
  status: number;
  headers: globalThis.Headers;
  /** The JSON answer, or the text when it is not JSON. */
  body: Record<string, unknown>;
  text: string;
}

export interface CoprocessorServer {
  url: string;
  server: Server;
  post(payload: unknown): Promise<Answered>;
  /** POSTs a raw body. */
  send(body: string | ReadableStream<Uint8Array>, init?: RequestInit): Promise<Answered>;
  stop(): Promise<void>;
}

/** Serves `handler` on a free loopback port. */
export async function serveCoprocessor(handler: RequestListener): Promise<CoprocessorServer> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  const send = async (body: string | ReadableStream<Uint8Array>, init: RequestInit = {}): Promise<Answered> => {
    const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json' }, body, ...init });
    const text = await response.text();
    let parsed: Record<string, unknown> = {};
    try {
      parsed = JSON.parse(text) as Record<string, unknown>;
    } catch {
      // Not JSON: the text tells.
    }
    return { status: response.status, headers: response.headers, body: parsed, text };
  };
  return {
    url,
    server,
    post: (payload) => send(JSON.stringify(payload)),
    send,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** What the client receives from the Router. */
export interface ClientResponse {
  status: number;
  headers: Headers;
  body: Record<string, unknown>;
  /** The Router's context entries at the end of the request. */
  entries: Entries;
}

export type Execute = (body: Record<string, unknown>) => Record<string, unknown> | Promise<Record<string, unknown>>;

/**
 * One client request through the Router's supergraph stages, with the
 * coprocessor at `request` (SupergraphRequest) and `response`
 * (SupergraphResponse; the same URL unless replicas are given), and
 * `execute` standing for the Router's planning and execution of the
 * operation: what the client receives, the answers applied as the Router
 * applies them. Throws where the Router would fail the request for an
 * answer it rejects.
 */
export async function throughRouter(
  coprocessors: { request: CoprocessorServer; response?: CoprocessorServer },
  request: ClientRequest,
  sdl: string,
  execute: Execute,
  options: { id?: string; entries?: Entries; responseSdl?: boolean; responseHeaders?: Headers } = {},
): Promise<ClientResponse> {
  const id = options.id ?? requestId();
  const sent = supergraphRequestPayload(request, sdl, { id, ...(options.entries ? { entries: options.entries } : {}) });
  const entries: Entries = { ...((sent['context'] as { entries: Entries }).entries) };
  const first = await coprocessors.request.post(sent);
  const answer = checkAnswer(first, 'SupergraphRequest', id);
  upsert(entries, answer);
  const control = answer['control'];
  if (control !== 'continue') {
    const status = (control as { break: number }).break;
    return { status, headers: withoutContentLength((answer['headers'] as Headers | undefined) ?? {}), body: answer['body'] as Record<string, unknown>, entries };
  }
  const body = (answer['body'] as Record<string, unknown> | undefined) ?? (sent['body'] as Record<string, unknown>);
  const result = await execute(body);
  const responsePayload = supergraphResponsePayload(id, result, { ...entries }, {
    ...(options.responseHeaders ? { headers: options.responseHeaders } : {}),
    ...(options.responseSdl ? { sdl } : {}),
  });
  const second = await (coprocessors.response ?? coprocessors.request).post(responsePayload);
  const back = checkAnswer(second, 'SupergraphResponse', id);
  upsert(entries, back);
  const status = isBreak(back['control']) ? back['control'].break : 200;
  return {
    status,
    headers: withoutContentLength((back['headers'] as Headers | undefined) ?? (responsePayload['headers'] as Headers)),
    body: (back['body'] as Record<string, unknown> | undefined) ?? result,
    entries,
  };
}

function isBreak(control: unknown): control is { break: number } {
  return typeof control === 'object' && control !== null && typeof (control as { break?: unknown }).break === 'number';
}

/** `validate_coprocessor_output`: an answer the Router would fail the client's request for throws. */
function checkAnswer(answered: Answered, stage: string, id: string): Record<string, unknown> {
  if (answered.status < 200 || answered.status > 299) throw new Error(`the coprocessor answered HTTP ${answered.status}: ${answered.text}`);
  const answer = answered.body;
  if (answer['version'] !== 1) throw new Error(`Coprocessor returned the wrong version: ${String(answer['version'])}`);
  if (answer['stage'] !== stage) throw new Error(`Coprocessor returned the wrong stage: ${String(answer['stage'])}`);
  if (answer['id'] !== id) throw new Error(`Coprocessor returned another id: ${String(answer['id'])}`);
  if (stage.endsWith('Request') && answer['control'] === undefined) throw new Error('Coprocessor response is missing the `control` parameter');
  const control = answer['control'];
  if (control !== undefined && control !== 'continue' && !(isBreak(control) && control.break >= 100 && control.break <= 999)) {
    throw new Error(`Coprocessor returned an invalid control: ${JSON.stringify(control)}`);
  }
  if (isBreak(control)) {
    const body = answer['body'] as Record<string, unknown> | undefined;
    // graphql::Response::from_value: a body without data must hold at least one error.
    if (body === undefined || (!('data' in body) && !(Array.isArray(body['errors']) && body['errors'].length > 0))) {
      throw new Error('graphql response without data must contain at least one error');
    }
  }
  return answer;
}

function upsert(entries: Entries, answer: Record<string, unknown>): void {
  const context = answer['context'] as { entries?: Entries } | undefined;
  for (const [key, value] of Object.entries(context?.entries ?? {})) entries[key] = value;
}

function withoutContentLength(headers: Headers): Headers {
  const out: Headers = {};
  for (const [name, values] of Object.entries(headers)) if (name !== 'content-length') out[name] = values;
  return out;
}

/** `payload` without `keys` (what an answer leaves out: `sdl`). */
export function without(payload: Record<string, unknown>, ...keys: string[]): Record<string, unknown> {
  const rest = { ...payload };
  for (const key of keys) delete rest[key];
  return rest;
}

/**
 * The answer that changes nothing: the payload itself (at a request stage
 * with `control` set, as the Router requires one there).
 */
export function unchangedAnswer(payload: Record<string, unknown>, control?: unknown): Record<string, unknown> {
  return control === undefined ? { ...payload } : { ...payload, control };
}
