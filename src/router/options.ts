import { LIMITER_OPTIONS } from '../core/options.js';
import type { LimiterOptions, Logger } from '../core/options.js';

/**
 * What `identify` is given of the client's request, as Apollo Router sends
 * it at the `SupergraphRequest` stage: header names lower-case, each with
 * its values (a header sent twice has two); the Router's context entries
 * (`apollo::authentication::jwt_claims` holds the claims of a JWT the
 * Router verified); the HTTP method. A part the `router.yaml` does not send
 * is empty (`{}`) or undefined.
 */
export interface RouterRequest {
  readonly headers: Readonly<Record<string, readonly string[]>>;
  readonly context: Readonly<Record<string, unknown>>;
  readonly method: string | undefined;
}

/** Default of `maxPayloadBytes`: 32 MiB, room for a large supergraph SDL in every payload. */
export const DEFAULT_MAX_PAYLOAD_BYTES = 32 * 1024 * 1024;

/**
 * The options of `routerCoprocessor`: those of every adapter, `identify`
 * given the `RouterRequest` and the bucket, and the coprocessor's own.
 */
export type RouterCoprocessorOptions = LimiterOptions<RouterRequest> & {
  /** Where store failures, refused supergraphs and payloads that lack what the limiter needs are reported. Default `console`. */
  logger?: Logger;
  /**
   * The secret that signs what an operation was charged, which the
   * coprocessor keeps in the Router's context between the request and the
   * response stage (for `refundUnusedCost`, `reportCost`, `rateLimitHeaders`
   * and `GraphQL-Cost: report`). Give every replica behind one Router the
   * same secret (at least 32 characters), so that any of them can finish what
   * another began. Default: a random secret of this process, so a response
   * reaching another replica keeps its estimate and has no report.
   */
  contextSecret?: string;
  /**
   * The largest coprocessor request body read, in bytes; a larger one is
   * answered 413. The Router sends the supergraph SDL in every payload that
   * asks for it. Default `DEFAULT_MAX_PAYLOAD_BYTES` (32 MiB).
   */
  maxPayloadBytes?: number;
};

/** The smallest `contextSecret`: 32 characters, e.g. `openssl rand -hex 16`. */
export const MIN_CONTEXT_SECRET_LENGTH = 32;

/** The coprocessor's own options, once checked. */
export interface RouterSettings {
  readonly logger: Logger;
  readonly contextSecret: string | undefined;
  readonly maxPayloadBytes: number;
}

const OWN_OPTIONS = ['logger', 'contextSecret', 'maxPayloadBytes'] as const;

/** Every option `routerCoprocessor` takes, by name: any other key is a `TypeError`. */
export const ROUTER_OPTIONS: Readonly<Record<keyof RouterCoprocessorOptions, true>> = {
  ...LIMITER_OPTIONS,
  ...(Object.fromEntries(OWN_OPTIONS.map((name) => [name, true])) as Record<(typeof OWN_OPTIONS)[number], true>),
};

/** Checks the coprocessor's own options (the limiter checks the rest). */
export function routerSettings(options: RouterCoprocessorOptions, owner: string): RouterSettings {
  if (options === null || typeof options !== 'object') throw new TypeError(`${owner} needs an options object`);
  for (const name of Object.keys(options)) {
    if (!Object.hasOwn(ROUTER_OPTIONS, name)) {
      throw new TypeError(`${owner} has no option ${JSON.stringify(name)}; its options are ${Object.keys(ROUTER_OPTIONS).join(', ')}`);
    }
  }
  const { logger, contextSecret } = options;
  if (logger !== undefined && (typeof logger?.warn !== 'function' || typeof logger.error !== 'function')) {
    throw new TypeError(`${owner} option "logger" must have warn and error methods`);
  }
  if (contextSecret !== undefined && (typeof contextSecret !== 'string' || contextSecret.length < MIN_CONTEXT_SECRET_LENGTH)) {
    throw new RangeError(`${owner} option "contextSecret" must be a string of at least ${MIN_CONTEXT_SECRET_LENGTH} characters (e.g. the output of \`openssl rand -hex 16\`)`);
  }
  const maxPayloadBytes = options.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES;
  if (!Number.isSafeInteger(maxPayloadBytes) || maxPayloadBytes < 1024) {
    throw new RangeError(`${owner} option "maxPayloadBytes" must be a whole number of bytes, at least 1024, got ${String(maxPayloadBytes)}`);
  }
  return { logger: logger ?? console, contextSecret, maxPayloadBytes };
}
