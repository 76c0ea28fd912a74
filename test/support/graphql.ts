// Helpers for the plugin tests: read Apollo Server answers the way a client
// sees them, over `executeOperation` or real HTTP.
import type { ApolloServer, BaseContext, GraphQLResponse } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import type { StandaloneServerContextFunctionArgument } from '@apollo/server/standalone';
import { buildSchema, getOperationAST, parse, validate } from 'graphql';
import type { DocumentNode, GraphQLSchema, OperationDefinitionNode } from 'graphql';
import { CostModel, tokenBucketDirectiveTypeDefs } from '../../src/index.js';
import type { AcquireRequest, Admission, BatchAdmission, BatchCheck, BucketKey, BucketStore, CostModelOptions, TokenBucket } from '../../src/index.js';

/** The server's logger type, without depending on `@apollo/utils.logger` directly. */
export type Logger = ApolloServer<BaseContext>['logger'];

/** A GraphQL response body as JSON, as a client receives it. */
export interface ResponseBody {
  data?: Record<string, unknown> | null;
  errors?: ErrorBody[];
  extensions?: Record<string, unknown>;
}

export interface ErrorBody {
  message: string;
  locations?: unknown;
  path?: unknown;
  extensions?: Record<string, unknown>;
}

/** `body.singleResult` of an `executeOperation` answer, as JSON (what HTTP would carry). */
export function singleResult(response: GraphQLResponse<Record<string, unknown>>): ResponseBody {
  if (response.body.kind !== 'single') throw new Error(`expected a single result, got ${response.body.kind}`);
  return JSON.parse(JSON.stringify(response.body.singleResult)) as ResponseBody;
}

/** The `extensions.code` of every error of a body. */
export function errorCodes(body: ResponseBody): unknown[] {
  return (body.errors ?? []).map((e) => e.extensions?.['code']);
}

export interface HttpAnswer<TBody> {
  status: number;
  headers: Headers;
  body: TBody;
  /** Wall time of the request, in ms. */
  ms: number;
}

export interface HttpEndpoint {
  url: string;
  /** POSTs one operation. */
  post(operation: GraphQLOperation, headers?: Record<string, string>): Promise<HttpAnswer<ResponseBody>>;
  /** POSTs an HTTP batch (a JSON array of operations). */
  postBatch(operations: GraphQLOperation[], headers?: Record<string, string>): Promise<HttpAnswer<ResponseBody[]>>;
}

export interface GraphQLOperation {
  query: string;
  variables?: Record<string, unknown>;
  operationName?: string;
}

type StandaloneContext<TContext extends BaseContext> = (argument: StandaloneServerContextFunctionArgument) => Promise<TContext>;

/**
 * Starts `server` (not yet started) on a free port. `server.stop()` closes
 * the HTTP server too.
 */
export async function serveHttp<TContext extends BaseContext>(
  server: ApolloServer<TContext>,
  context: StandaloneContext<TContext>,
): Promise<HttpEndpoint> {
  const { url } = await startStandaloneServer(server, { context, listen: { port: 0, host: '127.0.0.1' } });
  const send = async <TBody>(payload: unknown, headers: Record<string, string>): Promise<HttpAnswer<TBody>> => {
    const started = performance.now();
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(payload),
    });
    const text = await response.text();
    const ms = performance.now() - started;
    let body: TBody;
    try {
      body = JSON.parse(text) as TBody;
    } catch {
      throw new Error(`HTTP ${response.status} answered with a body that is not JSON: ${text.slice(0, 500)}`);
    }
    return { status: response.status, headers: response.headers, body, ms };
  };
  return {
    url,
    post: (operation, headers = {}) => send<ResponseBody>(operation, headers),
    postBatch: (operations, headers = {}) => send<ResponseBody[]>(operations, headers),
  };
}

export interface CapturedLogger extends Logger {
  readonly warnings: string[];
  readonly errors: string[];
}

/** A logger that keeps warnings and errors for assertions and prints nothing. */
export function captureLogger(): CapturedLogger {
  const warnings: string[] = [];
  const errors: string[] = [];
  return {
    warnings,
    errors,
    debug: () => {},
    info: () => {},
    warn: (message: unknown) => void warnings.push(String(message)),
    error: (message: unknown) => void errors.push(String(message)),
  };
}

/** Collects unhandled rejections until `stop()`; vitest would report them too, but not per test. */
export function watchUnhandledRejections(): { readonly rejections: unknown[]; stop(): void } {
  const rejections: unknown[] = [];
  const listener = (reason: unknown): void => void rejections.push(reason);
  process.on('unhandledRejection', listener);
  return { rejections, stop: () => void process.off('unhandledRejection', listener) };
}

/** Calls `probe` until it returns true, every 20 ms, failing after `timeoutMs`. */
export async function waitFor(what: string, timeoutMs: number, probe: () => Promise<boolean> | boolean): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      if (await probe()) return;
    } catch (error) {
      last = error;
    }
    if (Date.now() >= deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last === undefined ? '' : ` (last error: ${String(last)})`}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * A store that records every `acquireAll` before passing it on, and how each
 * one settled; refunds and checks pass through unrecorded.
 */
export class RecordingStore implements BucketStore {
  readonly calls: AcquireRequest[][] = [];
  /** Parallel to `calls`. */
  readonly outcomes: ('pending' | 'fulfilled' | 'rejected')[] = [];

  constructor(readonly inner: Required<Pick<BucketStore, 'acquire' | 'acquireAll' | 'reset'>> & Pick<BucketStore, 'refundAll' | 'checkAll'>) {}

  refundAll(requests: readonly AcquireRequest[]): Promise<void | number[]> {
    if (!this.inner.refundAll) return Promise.reject(new Error('the inner store cannot refund'));
    return this.inner.refundAll(requests);
  }

  checkAll(requests: readonly AcquireRequest[]): Promise<BatchCheck> {
    if (!this.inner.checkAll) return Promise.reject(new Error('the inner store cannot check'));
    return this.inner.checkAll(requests);
  }

  /** How many `acquireAll` calls have not settled yet. */
  get pending(): number {
    return this.outcomes.filter((o) => o === 'pending').length;
  }

  acquire(bucket: TokenBucket, key: BucketKey, cost?: number): Promise<Admission> {
    return cost === undefined ? this.inner.acquire(bucket, key) : this.inner.acquire(bucket, key, cost);
  }

  acquireAll(requests: readonly AcquireRequest[]): Promise<BatchAdmission> {
    const index = this.calls.push([...requests]) - 1;
    this.outcomes[index] = 'pending';
    // The caller gets a promise that rejects like the store's, so one it leaves unhandled is still reported.
    return this.inner.acquireAll(requests).then(
      (admission) => {
        this.outcomes[index] = 'fulfilled';
        return admission;
      },
      (error: unknown) => {
        this.outcomes[index] = 'rejected';
        throw error;
      },
    );
  }

  reset(bucket: TokenBucket, key: BucketKey): Promise<boolean> {
    return this.inner.reset(bucket, key);
  }
}

/** `schema` with the `@tokenBucket` definition, and IBM's `@cost` and `@listSize` when `ibm` is set. */
export function costSchema(sdl: string, { ibm = true }: { ibm?: boolean } = {}): GraphQLSchema {
  return buildSchema(`${tokenBucketDirectiveTypeDefs}\n${ibm ? `${IBM_COST_DIRECTIVES}\n` : ''}${sdl}`);
}

/** The IBM GraphQL cost directive specification's `@cost` and `@listSize`. */
export const IBM_COST_DIRECTIVES = `directive @cost(weight: String!) on ARGUMENT_DEFINITION | ENUM | FIELD_DEFINITION | INPUT_FIELD_DEFINITION | OBJECT | SCALAR
directive @listSize(assumedSize: Int, slicingArguments: [String!], sizedFields: [String!], requireOneSlicingArgument: Boolean = true) on FIELD_DEFINITION`;

export type Costs = Record<string, number>;

/**
 * `costOf` and `actualCostOf` of a `CostModel` on `schema`, taking query
 * text (checked valid first) and returning plain objects.
 */
export function pricer(schema: GraphQLSchema, options?: CostModelOptions) {
  const model = new CostModel(schema, options);
  const prepare = (query: string): [DocumentNode, OperationDefinitionNode] => {
    const document = parse(query);
    const errors = validate(schema, document);
    if (errors.length > 0) throw new Error(`invalid operation: ${errors.map((e) => e.message).join('; ')}`);
    const operation = getOperationAST(document);
    if (operation == null) throw new Error('no operation');
    return [document, operation];
  };
  return {
    model,
    costOf(query: string, variables?: Record<string, unknown>): Costs {
      const [document, operation] = prepare(query);
      return Object.fromEntries(model.costOf(document, operation, variables));
    },
    actualCostOf(query: string, data: unknown, variables?: Record<string, unknown>): Costs {
      const [document, operation] = prepare(query);
      return Object.fromEntries(model.actualCostOf(document, operation, variables, data));
    },
  };
}
