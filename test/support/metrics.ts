// Reads back what the limiter recorded through OpenTelemetry, with the SDK's
// own in-memory exporter: a MeterProvider to register globally or pass as
// `meterProvider`, and the data points of the last collection.
import { AggregationTemporality, DataPointType, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import type { MetricData } from '@opentelemetry/sdk-metrics';

export interface HistogramReading {
  count: number;
  sum: number;
  min: number | undefined;
  max: number | undefined;
}

export interface Readings {
  /** `graphql.token_bucket.decisions` by `"<bucket> <result>"`. */
  decisions: Record<string, number>;
  /** A histogram's totals per bucket attribute ('' for none). */
  histogram(name: string, bucket?: string): HistogramReading | undefined;
  /** The metric's descriptor, as an exporter sees it. */
  descriptor(name: string): MetricData['descriptor'] | undefined;
}

export class MetricsProbe {
  readonly exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  // Exports only when asked (forceFlush): an hour between automatic exports.
  readonly reader = new PeriodicExportingMetricReader({ exporter: this.exporter, exportIntervalMillis: 3_600_000 });
  readonly provider = new MeterProvider({ readers: [this.reader] });

  async read(): Promise<Readings> {
    this.exporter.reset();
    await this.reader.forceFlush();
    const metrics = this.exporter
      .getMetrics()
      .flatMap((resource) => resource.scopeMetrics)
      .filter((scope) => scope.scope.name === 'graphql-token-bucket')
      .flatMap((scope) => scope.metrics);
    const find = (name: string): MetricData | undefined => metrics.find((m) => m.descriptor.name === name);
    const decisions: Record<string, number> = {};
    const counter = find('graphql.token_bucket.decisions');
    for (const point of counter?.dataPoints ?? []) {
      const key = `${String(point.attributes['graphql.token_bucket.bucket'])} ${String(point.attributes['graphql.token_bucket.result'])}`;
      decisions[key] = (decisions[key] ?? 0) + (point.value as number);
    }
    return {
      decisions,
      descriptor: (name) => find(name)?.descriptor,
      histogram(name, bucket) {
        const metric = find(name);
        if (metric === undefined || metric.dataPointType !== DataPointType.HISTOGRAM) return undefined;
        const point = metric.dataPoints.find((p) => (bucket === undefined ? true : p.attributes['graphql.token_bucket.bucket'] === bucket));
        if (point === undefined) return undefined;
        return { count: point.value.count, sum: point.value.sum ?? NaN, min: point.value.min, max: point.value.max };
      },
    };
  }

  shutdown(): Promise<void> {
    return this.provider.shutdown();
  }
}
