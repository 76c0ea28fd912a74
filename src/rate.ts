/**
 * How fast a bucket refills: `tokens` every `periodMs`, added continuously.
 *
 * The period is kept in whole microseconds (the resolution of Redis `TIME`),
 * so `new Rate(1, 0.0004)` is rejected rather than silently rounded to zero.
 */
export class Rate {
  /** Tokens added per period: a positive safe integer. */
  readonly tokens: number;
  /** The period in whole microseconds (>= 1). */
  readonly periodUs: number;

  /**
   * @param tokens Tokens added every period: an integer from 1 to
   *   `Number.MAX_SAFE_INTEGER`, else a `RangeError`.
   * @param periodMs The period in milliseconds, kept in whole microseconds:
   *   from 0.001 (1 µs) to `Number.MAX_SAFE_INTEGER` µs, else a `RangeError`.
   *   No default: `new Rate(1, 3000)` is one token every 3 seconds.
   */
  constructor(tokens: number, periodMs: number) {
    if (!Number.isSafeInteger(tokens) || tokens < 1) {
      throw new RangeError('a rate must refill at least one token');
    }
    if (typeof periodMs !== 'number' || !Number.isFinite(periodMs) || periodMs <= 0) {
      throw new RangeError(`a rate's period must be a positive number of milliseconds, got ${String(periodMs)}`);
    }
    const periodUs = Math.round(periodMs * 1000);
    if (periodUs < 1 || !Number.isSafeInteger(periodUs)) {
      throw new RangeError(`a rate's period must be between 1 µs and ${Number.MAX_SAFE_INTEGER} µs, got ${String(periodMs)} ms`);
    }
    this.tokens = tokens;
    this.periodUs = periodUs;
    // The stores compute a rate's terms once per bucket: a rate changed afterwards would be ignored.
    if (new.target === Rate) Object.freeze(this);
  }

  /** The period in milliseconds (whole microseconds, so possibly fractional). */
  get periodMs(): number {
    return this.periodUs / 1000;
  }

  /** Tokens added per millisecond. */
  get tokensPerMs(): number {
    return (this.tokens * 1000) / this.periodUs;
  }

  /** `n` tokens a second, added continuously: `new Rate(n, 1000)`. `n` an integer >= 1. */
  static perSecond(n: number): Rate {
    return new Rate(n, 1000);
  }

  /** `n` tokens a minute, added continuously: `new Rate(n, 60_000)`. `n` an integer >= 1. */
  static perMinute(n: number): Rate {
    return new Rate(n, 60_000);
  }

  /** `n` tokens an hour, added continuously: `new Rate(n, 3_600_000)`. `n` an integer >= 1. */
  static perHour(n: number): Rate {
    return new Rate(n, 3_600_000);
  }

  toString(): string {
    return `${this.tokens} per ${this.periodMs} ms`;
  }
}
