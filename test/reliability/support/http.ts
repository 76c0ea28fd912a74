// A minimal GraphQL-over-HTTP client on node:http keep-alive sockets: cheaper
// per request than fetch, so a load generator on a 2-core machine leaves CPU
// for the servers it measures. Every request has a hard deadline.
import { Agent, request } from 'node:http';

export interface HttpAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** What one GraphQL response means to a client of the limiter. */
export type AnswerKind = 'data' | 'limited' | 'unavailable' | 'other';

export const now = (): number => performance.timeOrigin + performance.now();

export function keepAliveAgent(maxSockets: number): Agent {
  return new Agent({ keepAlive: true, maxSockets, maxFreeSockets: maxSockets });
}

/** POSTs `payload` as JSON; rejects on a network error or after `timeoutMs` without a full answer. */
export function postJson(
  url: string,
  payload: unknown,
  options: { headers?: Record<string, string>; agent?: Agent; timeoutMs?: number } = {},
): Promise<HttpAnswer> {
  const body = JSON.stringify(payload);
  const timeoutMs = options.timeoutMs ?? 10_000;
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'POST',
        agent: options.agent,
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          ...options.headers,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          clearTimeout(timer);
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') });
        });
        res.on('error', fail);
      },
    );
    const timer = setTimeout(() => {
      req.destroy(new Error(`no answer within ${timeoutMs} ms`));
    }, timeoutMs);
    function fail(error: Error): void {
      clearTimeout(timer);
      reject(error);
    }
    req.on('error', fail);
    req.end(body);
  });
}

interface GraphQLErrorShape {
  extensions?: { code?: unknown };
}

/** Reads a single (non-batched) GraphQL answer. */
export function classify(answer: HttpAnswer): AnswerKind {
  let parsed: { data?: unknown; errors?: GraphQLErrorShape[] };
  try {
    parsed = JSON.parse(answer.text) as typeof parsed;
  } catch {
    return 'other';
  }
  const code = parsed.errors?.[0]?.extensions?.code;
  if (answer.status === 200 && parsed.data != null && parsed.errors === undefined) return 'data';
  if (answer.status === 429 && code === 'RATE_LIMITED') return 'limited';
  if (answer.status === 503 && code === 'RATE_LIMITER_UNAVAILABLE') return 'unavailable';
  return 'other';
}
