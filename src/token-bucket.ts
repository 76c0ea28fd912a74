import { Rate } from './rate.js';

const NAME = /^[A-Za-z0-9_.-]{1,64}$/;

/**
 * A named bucket definition: up to `capacity` tokens, refilled at `rate`.
 * One definition serves every identity; each (bucket, key) pair has its own
 * tokens in the store.
 */
export class TokenBucket {
  readonly name: string;
  readonly capacity: number;
  readonly rate: Rate;

  constructor(name: string, capacity: number, rate: Rate) {
    if (typeof name !== 'string' || !NAME.test(name)) {
      throw new RangeError(`a bucket name must be 1-64 characters of [A-Za-z0-9_.-], got ${JSON.stringify(name)}`);
    }
    if (!Number.isSafeInteger(capacity) || capacity < 0) {
      throw new RangeError(`bucket "${name}": capacity must be a non-negative safe integer, got ${String(capacity)}`);
    }
    if (!(rate instanceof Rate)) {
      throw new RangeError(`bucket "${name}": rate must be a Rate, e.g. Rate.perSecond(10)`);
    }
    this.name = name;
    this.capacity = capacity;
    this.rate = rate;
  }
}
