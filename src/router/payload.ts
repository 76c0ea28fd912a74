import type { GraphQLError } from 'graphql';
import type { RouterRequest } from './options.js';
import type { Edit } from './raw-json.js';

/**
 * Apollo Router's coprocessor protocol, version 1: the Router POSTs a JSON
 * object (its `Externalizable`) at each stage it is configured for, and
 * reads the coprocessor's answer as the same object, in which `control`,
 * `body`, `headers` and `context` may be changed (a field left out keeps
 * its value; the coprocessor sends the payload back whole, only what it
 * changes replaced). At a request stage `control: { break: status }` ends
 * the request with `body` and `headers` as the client's response (those
 * headers replace the response's); at a response stage a `control` sets
 * the response's status, so an answer never changes the one there.
 */
export const PROTOCOL_VERSION = 1;

export const SUPERGRAPH_REQUEST = 'SupergraphRequest';
export const SUPERGRAPH_RESPONSE = 'SupergraphResponse';

/** A coprocessor request as JSON: only what the limiter reads is typed. */
export interface Payload {
  readonly version?: unknown;
  readonly stage?: unknown;
  readonly control?: unknown;
  readonly id?: unknown;
  readonly headers?: unknown;
  readonly body?: unknown;
  readonly context?: unknown;
  readonly sdl?: unknown;
  readonly method?: unknown;
  readonly hasNext?: unknown;
  readonly [field: string]: unknown;
}

/**
 * What the answer to one coprocessor request changes: the answer is the
 * payload's own text with these values set (`raw-json.ts`), every other
 * byte as the Router sent it. None: the payload back unchanged.
 */
export type Answer = readonly Edit[];

export type Headers = Record<string, string[]>;

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The answer that changes nothing: the payload back as the Router sent it, byte for byte. */
export const UNCHANGED: Answer = Object.freeze([]);

/** An edit setting the member at `path` to `value` (JSON-serialisable). */
export function set(path: readonly string[], value: unknown): Edit {
  return { path, json: JSON.stringify(value) ?? 'null' };
}

/** The payload with `control: "continue"`: at a request stage, the operation goes on. */
export const CONTINUE: Answer = Object.freeze([set(['control'], 'continue')]);

/** The context entries of a payload (`context.entries`), or none. */
export function contextEntries(payload: Payload): Readonly<Record<string, unknown>> {
  const entries = isObject(payload.context) ? payload.context['entries'] : undefined;
  return isObject(entries) ? entries : EMPTY;
}

/** `answer` with context entries set inside `context.entries` (the Router upserts each entry an answer holds; the others are sent back as they came). */
export function withContextEntries(answer: Answer, entries: Readonly<Record<string, unknown>>): Answer {
  return [...answer, ...Object.entries(entries).map(([key, value]) => set(['context', 'entries', key], value))];
}

/**
 * The request `identify` sees: header names lower-cased (the Router sends
 * them so; a hand-made payload may not), values kept as strings in arrays.
 * Null-prototype objects, so a header or entry named `__proto__` is a key.
 */
export function routerRequest(payload: Payload): RouterRequest {
  const headers: Record<string, string[]> = Object.create(null) as Record<string, string[]>;
  if (isObject(payload.headers)) {
    for (const [name, values] of Object.entries(payload.headers)) {
      const list = (Array.isArray(values) ? values : [values]).filter((v): v is string => typeof v === 'string');
      const lower = name.toLowerCase();
      const known = headers[lower];
      if (known === undefined) headers[lower] = list;
      else known.push(...list);
    }
  }
  const context: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  for (const [key, value] of Object.entries(contextEntries(payload))) context[key] = value;
  return { headers, context, method: typeof payload.method === 'string' ? payload.method : undefined };
}

/** A header's values as one field value, joined as HTTP joins a repeated header; `undefined` without it. */
export function headerValue(request: RouterRequest, name: string): string | undefined {
  const values = request.headers[name];
  return values === undefined || values.length === 0 ? undefined : values.join(', ');
}

/**
 * Ends the client's request at a request stage: HTTP `status`, `body` as
 * the client's GraphQL response, `headers` as its only response headers.
 */
export function breakWith(status: number, body: Record<string, unknown>, headers: Headers = {}): Answer {
  return [set(['control'], { break: status }), set(['body'], body), set(['headers'], headers)];
}

/** `{ errors: [error] }` as the client reads it: the error's JSON, without an `http` extension a server may have put there. */
export function errorsBody(error: GraphQLError): Record<string, unknown> {
  const json = error.toJSON() as unknown as { extensions?: Record<string, unknown> } & Record<string, unknown>;
  if (json.extensions !== undefined && 'http' in json.extensions) {
    const extensions = { ...json.extensions };
    delete extensions['http'];
    return { errors: [{ ...json, extensions }] };
  }
  return { errors: [json] };
}

const EMPTY: Readonly<Record<string, unknown>> = Object.freeze({});
