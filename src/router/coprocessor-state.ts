import type { Limiter } from '../core/limiter.js';
import type { Logger } from '../core/options.js';
import type { ChargeSealer, RefundLedger } from './charge-record.js';
import type { Documents } from './documents.js';
import type { RouterRequest } from './options.js';
import type { Supergraphs } from './supergraphs.js';

/** What the stages of one coprocessor share. */
export interface CoprocessorState {
  readonly limiter: Limiter<RouterRequest>;
  readonly logger: Logger;
  readonly supergraphs: Supergraphs;
  readonly documents: Documents;
  readonly sealer: ChargeSealer;
  readonly ledger: RefundLedger;
  /** This coprocessor, among replicas: charges it sealed name it (`ChargeRecord.by`). */
  readonly instance: string;
  /** Logs a problem of the Router's set-up (a field its `router.yaml` does not send) the first time it is met. */
  once(problem: string, message: string, level?: 'warn' | 'error'): void;
}
