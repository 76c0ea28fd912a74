import type { BucketTerms } from './bucket-terms.js';

/** One request of an operation that may share a script call: its key and terms (never huge), and its cost. */
export interface SharedRequest {
  readonly key: string;
  readonly terms: BucketTerms;
  readonly cost: number;
}

/** An operation's own answer from a shared call (lua/acquire-each.lua). */
export type SharedAnswer =
  | { readonly taken: true; readonly remaining: number[]; readonly takenAt: number }
  | { readonly taken: false; readonly remaining: number[]; readonly waits: number[] };

/**
 * `ALONE`: no other operation for its group came in its tick, or the shared
 * call could not decide it and wrote nothing for it (a foreign value, a value
 * to repair, a key its node no longer serves), or ran nothing at all: the
 * caller runs it as it would alone.
 */
export const ALONE = 'alone';

interface Waiting {
  readonly requests: readonly SharedRequest[];
  resolve(answer: SharedAnswer | typeof ALONE): void;
  reject(error: unknown): void;
}

/**
 * Keys per shared call at most, on any client: a longer call would hold
 * Redis up for everyone else. A client may ask for fewer
 * (`ScriptClient.sharedKeys`).
 */
export const MAX_SHARED_KEYS = 512;

/**
 * Runs lua/acquire-each.lua with `keys` and `args` for the group `group` (its node, or the slot of
 * the first key); resolves to `ALONE` when the call ran nothing, so that each operation runs alone.
 */
export type RunShared = (group: string, keys: readonly string[], args: readonly number[]) => Promise<unknown>;

/**
 * Gathers the operations issued in one tick, per group (a node; on a Cluster
 * whose nodes cannot run a call across slots, a hash slot), and sends each
 * group's as one script call when there are several.
 * Nothing waits for a timer: the call goes out once the tick's synchronous
 * work and promise jobs are done (`process.nextTick`). (The store sends an
 * operation that finds none of its own in flight at once, without this.)
 * A shared call is one command on the
 * store's connection: when it fails (its reply lost), every operation in it
 * fails, and none is sent again, since it may have been applied.
 */
export class Coalescer {
  readonly #run: RunShared;
  /** Keys per call at most. */
  readonly #maxKeys: number;
  /** Keys of a node's first call of a tick at most. */
  readonly #firstKeys: number;
  #pending = new Map<string, Waiting[]>();
  #scheduled = false;

  constructor(run: RunShared, maxKeys = MAX_SHARED_KEYS, firstKeys = maxKeys) {
    this.#run = run;
    this.#maxKeys = maxKeys;
    this.#firstKeys = Math.min(firstKeys, maxKeys);
  }

  /** Keys per shared call at most: an operation of more is never shared. */
  get maxKeys(): number {
    return this.#maxKeys;
  }

  /** Whether no operation waits for its tick's end to be sent. */
  get idle(): boolean {
    return !this.#scheduled;
  }

  /** Queues an operation for the group `group`; resolves to its own answer, or `ALONE`. */
  submit(group: string, requests: readonly SharedRequest[]): Promise<SharedAnswer | typeof ALONE> {
    return new Promise((resolve, reject) => {
      const waiting = this.#pending.get(group);
      if (waiting) waiting.push({ requests, resolve, reject });
      else this.#pending.set(group, [{ requests, resolve, reject }]);
      if (!this.#scheduled) {
        this.#scheduled = true;
        process.nextTick(() => this.#flush());
      }
    });
  }

  #flush(): void {
    const groups = this.#pending;
    this.#pending = new Map();
    this.#scheduled = false;
    for (const [group, waiting] of groups) {
      if (waiting.length === 1) {
        waiting[0]!.resolve(ALONE);
        continue;
      }
      let start = 0;
      let keys = 0;
      let most = this.#firstKeys;
      for (let i = 0; i < waiting.length; i++) {
        const size = waiting[i]!.requests.length;
        if (keys + size > most && i > start) {
          this.#send(group, waiting.slice(start, i));
          start = i;
          keys = 0;
          most = this.#maxKeys;
        }
        keys += size;
      }
      this.#send(group, waiting.slice(start));
    }
  }

  #send(group: string, batch: readonly Waiting[]): void {
    if (batch.length === 1) {
      batch[0]!.resolve(ALONE);
      return;
    }
    const keys: string[] = [];
    // each bucket's terms once (by the object termsOf keeps per bucket), then per request: terms index, cost
    const index = new Map<BucketTerms, number>();
    const terms: number[] = [];
    const requests: number[] = [];
    for (const waiting of batch) {
      waiting.requests.forEach(({ key, terms: t, cost }, i) => {
        let j = index.get(t);
        if (j === undefined) {
          j = index.size + 1;
          index.set(t, j);
          terms.push(t.capacity, t.tokens, t.period);
        }
        keys.push(key);
        requests.push(i === 0 ? j : -j, cost);
      });
    }
    const args = [index.size, ...terms, ...requests];
    this.#run(group, keys, args).then(
      (reply) => {
        let answers: (SharedAnswer | typeof ALONE)[];
        try {
          answers = reply === ALONE ? batch.map(() => ALONE) : parseShared(reply, batch);
        } catch (error) {
          for (const w of batch) w.reject(error);
          return;
        }
        batch.forEach((w, i) => w.resolve(answers[i]!));
      },
      (error: unknown) => {
        for (const w of batch) w.reject(error);
      },
    );
  }
}

/** lua/acquire-each.lua's reply: {t, then per operation 1 rem×k | 0 rem×k w×k | 3}. */
function parseShared(reply: unknown, waiting: readonly Waiting[]): (SharedAnswer | typeof ALONE)[] {
  const bad = (): Error => new Error(`token bucket script returned an unexpected reply: ${JSON.stringify(reply)}`);
  if (!Array.isArray(reply)) throw bad();
  const takenAt: unknown = reply[0];
  if (!Number.isSafeInteger(takenAt)) throw bad();
  const answers: (SharedAnswer | typeof ALONE)[] = [];
  let p = 1;
  for (const { requests } of waiting) {
    const k = requests.length;
    const status: unknown = reply[p];
    if (status === 1) {
      // whole tokens within 64 of 2^53 come as strings (ioredis misreads such integers)
      answers.push({ taken: true, remaining: reply.slice(p + 1, p + 1 + k).map(Number), takenAt: takenAt as number });
      p += 1 + k;
    } else if (status === 0) {
      answers.push({ taken: false, remaining: reply.slice(p + 1, p + 1 + k).map(Number), waits: reply.slice(p + 1 + k, p + 1 + 2 * k).map(Number) });
      p += 1 + 2 * k;
    } else if (status === 3) {
      answers.push(ALONE);
      p += 1;
    } else {
      throw bad();
    }
  }
  if (p !== reply.length) throw bad();
  return answers;
}
