// Load generator, run as its own process so that its CPU use and event-loop
// stalls do not distort the test process's timers:
//
//   node --import tsx test/reliability/support/load.ts '<LoadConfig as JSON>'
//
// Keeps `concurrency` requests in flight against each target until
// `durationMs` has passed or `maxRequests` were sent, then writes one record
// per request to `recordsFile` and exits. Prints `LOAD-STARTED <epoch ms>`
// when the first request goes out.
import { writeFileSync } from 'node:fs';
import { classify, keepAliveAgent, now, postJson } from './http.js';
import type { AnswerKind } from './http.js';

export interface LoadConfig {
  /** GraphQL endpoints; workers are spread evenly over them. */
  targets: string[];
  /** Requests in flight per target. */
  concurrency: number;
  durationMs: number;
  /** Hard cap on requests sent, whatever the duration. */
  maxRequests: number;
  /** Deadline of one request; a request still unanswered then is recorded as an error. */
  requestTimeoutMs: number;
  query: string;
  headers: Record<string, string>;
  recordsFile: string;
}

/** [target index, sent at, answered at (epoch ms, fractional), HTTP status (0: no answer), kind or error message] */
export type LoadRecord = [number, number, number, number, AnswerKind | `error: ${string}`];

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2] ?? '') as LoadConfig;
  const agents = config.targets.map(() => keepAliveAgent(config.concurrency));
  const records: LoadRecord[] = [];
  const started = now();
  const end = started + config.durationMs;
  let sent = 0;
  console.log(`LOAD-STARTED ${started}`);

  const worker = async (target: number): Promise<void> => {
    const url = config.targets[target]!;
    while (now() < end && sent < config.maxRequests) {
      sent += 1;
      const sentAt = now();
      try {
        const answer = await postJson(url, { query: config.query }, {
          headers: config.headers,
          agent: agents[target]!,
          timeoutMs: config.requestTimeoutMs,
        });
        records.push([target, sentAt, now(), answer.status, classify(answer)]);
      } catch (error) {
        records.push([target, sentAt, now(), 0, `error: ${(error as Error).message}`]);
      }
    }
  };

  const workers: Promise<void>[] = [];
  for (let w = 0; w < config.concurrency * config.targets.length; w++) workers.push(worker(w % config.targets.length));
  await Promise.all(workers);
  for (const agent of agents) agent.destroy();
  writeFileSync(config.recordsFile, JSON.stringify(records));
  console.log(`LOAD-DONE ${records.length}`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
