import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { MAX_BATCH_REQUESTS } from '../stores/validate.js';
import { isObject } from './payload.js';

/**
 * What an operation was charged, carried from the Router's request stage to
 * its response stage in the Router's own context, so that whichever
 * replica answers the response stage can report and refund it. The record
 * is signed: a refund gives tokens back, and anything that can write the
 * Router's context — or POST to the coprocessor — could otherwise name any
 * identity and any number. The invariant: tokens go back only for a record
 * this deployment signed, for the request it was signed for, by the
 * coprocessor that took them, once, within `REFUND_WINDOW_MS`, and never
 * more than it took.
 */

/** The context entry the record lives in. */
export const CHARGE_CONTEXT_KEY = 'graphql-token-bucket::charge';

/** What the response stage leaves in the entry once it has used it: later chunks (`@defer`, subscription events) find nothing to do. */
export const SPENT = 'spent';

/** How long after its request stage a charge can still be refunded. */
export const REFUND_WINDOW_MS = 10 * 60_000;

/** How far ahead of this replica's clock a record's time may be (another replica's clock). */
const CLOCK_SKEW_MS = 60_000;

/** One bucket of the charge, with the bucket's terms (a plan's may differ from the configured bucket's). */
export interface ChargedBucket {
  readonly name: string;
  /** The identity, as the store keys it (`7`, `"7"` and `7n` are one identity). */
  readonly key: string;
  readonly cost: number;
  /** Tokens taken: the cost, or 0 for a measured bucket that took nothing. */
  readonly taken: number;
  /** Whole tokens the bucket held after the charge. */
  readonly remaining: number;
  readonly measured: boolean;
  readonly wouldDeny: boolean;
  readonly capacity: number;
  readonly tokens: number;
  readonly periodUs: number;
}

/** What pricing the response needs: the operation as the Router ran it, and which supergraph priced it. */
export interface RefundSource {
  /** SHA-256 (hex) of the supergraph SDL the operation was priced against. */
  readonly supergraph: string;
  readonly query: string;
  readonly operationName: string | null;
  readonly variables: Record<string, unknown> | null;
}

export interface ChargeRecord {
  /** The Router's id of the client request (`id` of every payload of it). */
  readonly id: string;
  /**
   * The coprocessor that took the tokens. A store gives back only tokens it
   * took itself (its receipts), so only that coprocessor can refund them.
   */
  readonly by: string;
  /** When it was charged: ms since the epoch. */
  readonly at: number;
  /** Add `extensions.rateLimit` to the response. */
  readonly report: boolean;
  /** Add the RateLimit header fields to the response. */
  readonly headers: boolean;
  readonly charges: readonly ChargedBucket[];
  /** Present when the unused part is to be given back. */
  readonly refund?: RefundSource | undefined;
}

/** Why a record was not used. */
export type Unusable = 'foreign' | 'forged' | 'malformed' | 'other-request';

/** `mac` tells one sealing from another: a replayed entry has the same. */
export type Opened = { readonly ok: true; readonly record: ChargeRecord; readonly mac: string } | { readonly ok: false; readonly why: Unusable };

/** The context entry: the record as a JSON string, and its signature. */
interface SealedRecord {
  /** Which secret signed it: tells another replica's secret from a forgery. */
  readonly kid: string;
  readonly data: string;
  readonly mac: string;
}

export class ChargeSealer {
  private readonly secret: Buffer;
  private readonly kid: string;

  /** Without a secret, one of this process's own. */
  constructor(secret: string | undefined) {
    this.secret = secret === undefined ? randomBytes(32) : Buffer.from(secret, 'utf8');
    this.kid = createHash('sha256').update('graphql-token-bucket key id\0').update(this.secret).digest('base64url').slice(0, 12);
  }

  seal(record: ChargeRecord): SealedRecord {
    const data = JSON.stringify(record);
    return { kid: this.kid, data, mac: this.mac(data) };
  }

  /** The record sealed in `value` for the request `id`, if this deployment sealed it for that request. */
  open(value: unknown, id: unknown): Opened {
    if (!isObject(value)) return { ok: false, why: 'malformed' };
    const { kid, data, mac } = value;
    if (typeof kid !== 'string' || typeof data !== 'string' || typeof mac !== 'string') return { ok: false, why: 'malformed' };
    if (kid !== this.kid) return { ok: false, why: 'foreign' };
    const expected = Buffer.from(this.mac(data), 'utf8');
    const given = Buffer.from(mac, 'utf8');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return { ok: false, why: 'forged' };
    let parsed: unknown;
    try {
      parsed = JSON.parse(data);
    } catch {
      return { ok: false, why: 'malformed' };
    }
    const record = readRecord(parsed);
    if (record === undefined) return { ok: false, why: 'malformed' };
    return record.id === id ? { ok: true, record, mac } : { ok: false, why: 'other-request' };
  }

  private mac(data: string): string {
    return createHmac('sha256', this.secret).update(this.kid).update('\0').update(data).digest('base64url');
  }
}

/** The record's shape, checked field by field even though it is signed: one bug elsewhere must not become a refund. */
function readRecord(value: unknown): ChargeRecord | undefined {
  if (!isObject(value)) return undefined;
  const { id, by, at, report, headers, charges, refund } = value;
  if (typeof id !== 'string' || typeof by !== 'string' || !isTime(at) || typeof report !== 'boolean' || typeof headers !== 'boolean') return undefined;
  if (!Array.isArray(charges) || charges.length === 0 || charges.length > MAX_BATCH_REQUESTS) return undefined;
  const read: ChargedBucket[] = [];
  for (const charge of charges as unknown[]) {
    const bucket = readCharge(charge);
    if (bucket === undefined) return undefined;
    read.push(bucket);
  }
  let source: RefundSource | undefined;
  if (refund !== undefined) {
    source = readRefund(refund);
    if (source === undefined) return undefined;
  }
  return { id, by, at, report, headers, charges: read, refund: source };
}

function readCharge(value: unknown): ChargedBucket | undefined {
  if (!isObject(value)) return undefined;
  const { name, key, cost, taken, remaining, measured, wouldDeny, capacity, tokens, periodUs } = value;
  if (typeof name !== 'string' || typeof key !== 'string' || typeof measured !== 'boolean' || typeof wouldDeny !== 'boolean') return undefined;
  if (typeof cost !== 'number' || !(cost >= 0) || !Number.isFinite(cost)) return undefined;
  if (!isCount(taken) || taken > cost || !isCount(remaining) || !isCount(capacity) || taken > capacity) return undefined;
  if (!isCount(tokens) || tokens < 1 || !isCount(periodUs) || periodUs < 1) return undefined;
  return { name, key, cost, taken, remaining, measured, wouldDeny, capacity, tokens, periodUs };
}

function readRefund(value: unknown): RefundSource | undefined {
  if (!isObject(value)) return undefined;
  const { supergraph, query, operationName, variables } = value;
  if (typeof supergraph !== 'string' || typeof query !== 'string') return undefined;
  if (operationName !== null && typeof operationName !== 'string') return undefined;
  if (variables !== null && !isObject(variables)) return undefined;
  return { supergraph, query, operationName, variables };
}

function isCount(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) >= 0;
}

function isTime(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) > 0;
}

/**
 * The requests this replica refunded lately, so that a response payload
 * sent again (a replay by whoever can reach the coprocessor) gives nothing
 * back twice. Entries leave once their refund window is over; at most
 * `max` are kept, the oldest first out.
 */
export class RefundLedger {
  private readonly refunded = new Map<string, number>();

  constructor(private readonly max = 100_000) {}

  /**
   * Whether the charge sealed as `mac` may be refunded now, noting that it
   * is: not twice, not after its window, not from the future.
   */
  claim(record: ChargeRecord, mac: string, now = Date.now()): 'ok' | 'expired' | 'replayed' {
    if (record.at > now + CLOCK_SKEW_MS || now - record.at > REFUND_WINDOW_MS) return 'expired';
    for (const [id, until] of this.refunded) {
      if (until > now && this.refunded.size < this.max) break;
      this.refunded.delete(id);
    }
    if (this.refunded.has(mac)) return 'replayed';
    this.refunded.set(mac, record.at + REFUND_WINDOW_MS);
    return 'ok';
  }
}
