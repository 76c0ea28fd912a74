import { createRequire } from 'node:module';

/** The OpenTelemetry meter the limiter records with. */
export const METER_NAME = 'graphql-token-bucket';
/** Counter: one per bucket per decision, with `BUCKET_ATTRIBUTE` and `RESULT_ATTRIBUTE`. */
export const DECISIONS_METRIC = 'graphql.token_bucket.decisions';
/** Histogram: the static cost of each priced operation, per bucket. */
export const ESTIMATED_COST_METRIC = 'graphql.token_bucket.cost.estimated';
/** Histogram: the cost of each operation once its response is priced, per bucket. */
export const ACTUAL_COST_METRIC = 'graphql.token_bucket.cost.actual';
/** Histogram: how long each store call took, in seconds, failures and timeouts included. */
export const STORE_DURATION_METRIC = 'graphql.token_bucket.store.duration';
export const BUCKET_ATTRIBUTE = 'graphql.token_bucket.bucket';
export const RESULT_ATTRIBUTE = 'graphql.token_bucket.result';

/**
 * `RESULT_ATTRIBUTE` of a decision: `allowed` (tokens taken), `denied` (short
 * now, by the store or this replica's deny cache), `never` (costs more than
 * the capacity), `would_deny` (a measured bucket that would have denied),
 * `store_error` (the store failed or timed out).
 */
export type DecisionResult = 'allowed' | 'denied' | 'never' | 'would_deny' | 'store_error';

/**
 * What the limiter needs of an OpenTelemetry `MeterProvider` (from
 * `@opentelemetry/sdk-metrics`, or `metrics.getMeterProvider()`), declared
 * here so the package's types never require `@opentelemetry/api`.
 */
export interface MeterProviderLike {
  getMeter(name: string, version?: string): MeterLike;
}

/** The part of an OpenTelemetry `Meter` the limiter uses. */
export interface MeterLike {
  createCounter(name: string, options?: InstrumentOptions): { add(value: number, attributes?: Attributes): void };
  createHistogram(name: string, options?: InstrumentOptions): { record(value: number, attributes?: Attributes): void };
}

interface InstrumentOptions {
  description?: string;
  unit?: string;
  advice?: { explicitBucketBoundaries?: number[] };
}

type Attributes = Readonly<Record<string, string>>;

interface Instruments {
  decisions: ReturnType<MeterLike['createCounter']>;
  estimated: ReturnType<MeterLike['createHistogram']>;
  actual: ReturnType<MeterLike['createHistogram']>;
  storeDuration: ReturnType<MeterLike['createHistogram']>;
}

const COST_BOUNDARIES = [0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 100_000, 1_000_000];
const DURATION_BOUNDARIES = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

/** `@opentelemetry/api`'s `metrics`, or null when it is not installed (an optional peer dependency). */
let globalMetrics: { getMeterProvider(): MeterProviderLike } | null | undefined;

function globalMeterProvider(): MeterProviderLike | undefined {
  if (globalMetrics === undefined) {
    try {
      // Loaded on first use, not imported: the package must load without it.
      const api = createRequire(import.meta.url)('@opentelemetry/api') as { metrics: { getMeterProvider(): MeterProviderLike } };
      globalMetrics = api.metrics;
    } catch {
      globalMetrics = null;
    }
  }
  return globalMetrics?.getMeterProvider();
}

/**
 * The limiter's OpenTelemetry instruments. The meter is looked up when
 * something is recorded, not when the limiter is made, so a `MeterProvider`
 * registered after the server starts is used from then on. Without an SDK
 * the API's provider is a no-op and recording costs next to nothing.
 */
export class LimiterMetrics {
  private provider: MeterProviderLike | undefined;
  private instruments: Instruments | undefined;
  private readonly attributes = new Map<string, Attributes>();
  /** The provider whose failure was last reported: said once, not once per operation. */
  private reported: MeterProviderLike | undefined;

  /**
   * `meterProvider`: the one given in the options; default the global one of
   * `@opentelemetry/api`. `onFailure` hears of a provider that throws, once
   * per provider: recording never fails an operation.
   */
  constructor(
    private readonly meterProvider?: MeterProviderLike,
    private readonly onFailure: (error: unknown) => void = () => {},
  ) {}

  /** One decision of one bucket. */
  decision(bucket: string, result: DecisionResult): void {
    this.record((instruments) => instruments.decisions.add(1, this.attributesOf(bucket, result)));
  }

  /** The cost an operation was priced at, before it ran. */
  estimatedCost(bucket: string, cost: number): void {
    this.record((instruments) => instruments.estimated.record(cost, this.attributesOf(bucket)));
  }

  /** The cost of what an operation's response holds (with refunds of unused cost). */
  actualCost(bucket: string, cost: number): void {
    this.record((instruments) => instruments.actual.record(cost, this.attributesOf(bucket)));
  }

  /** One store call, in seconds, whatever its outcome. */
  storeDuration(seconds: number): void {
    this.record((instruments) => instruments.storeDuration.record(seconds));
  }

  /**
   * Records with the current provider's instruments. A provider that throws
   * (a shut-down SDK, a failing exporter) costs the measurement, never the
   * operation: an exception here would fail an operation whose tokens were
   * already taken.
   */
  private record(write: (instruments: Instruments) => void): void {
    let provider: MeterProviderLike | undefined;
    try {
      provider = this.meterProvider ?? globalMeterProvider();
      if (provider === undefined) return;
      if (provider !== this.provider || this.instruments === undefined) {
        const instruments = createInstruments(provider.getMeter(METER_NAME));
        this.provider = provider;
        this.instruments = instruments;
      }
      write(this.instruments);
    } catch (error) {
      if (this.reported === provider) return;
      this.reported = provider;
      try {
        this.onFailure(error);
      } catch {
        // A logger that throws too is not the operation's problem either.
      }
    }
  }

  /** Attribute sets are few (buckets × results) and reused: no object per record. */
  private attributesOf(bucket: string, result?: DecisionResult): Attributes {
    const id = result === undefined ? bucket : `${bucket}\u0000${result}`;
    let attributes = this.attributes.get(id);
    if (attributes === undefined) {
      attributes = Object.freeze(result === undefined ? { [BUCKET_ATTRIBUTE]: bucket } : { [BUCKET_ATTRIBUTE]: bucket, [RESULT_ATTRIBUTE]: result });
      this.attributes.set(id, attributes);
    }
    return attributes;
  }
}

function createInstruments(meter: MeterLike): Instruments {
  return {
    decisions: meter.createCounter(DECISIONS_METRIC, {
      description: 'Rate limiting decisions, per bucket and result',
      unit: '{decision}',
    }),
    estimated: meter.createHistogram(ESTIMATED_COST_METRIC, {
      description: 'Cost of each priced operation before it runs, per bucket',
      unit: '{token}',
      advice: { explicitBucketBoundaries: COST_BOUNDARIES },
    }),
    actual: meter.createHistogram(ACTUAL_COST_METRIC, {
      description: 'Cost of what each operation returned, per bucket',
      unit: '{token}',
      advice: { explicitBucketBoundaries: COST_BOUNDARIES },
    }),
    storeDuration: meter.createHistogram(STORE_DURATION_METRIC, {
      description: 'Duration of each call to the token bucket store',
      unit: 's',
      advice: { explicitBucketBoundaries: DURATION_BOUNDARIES },
    }),
  };
}
