// Prometheus metrics for the example server: an OpenTelemetry MeterProvider
// whose reader is the Prometheus exporter, serving `GET /metrics` on its own
// port, registered as the global provider the limiter records with.
import { metrics } from '@opentelemetry/api';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { MeterProvider } from '@opentelemetry/sdk-metrics';

/** Serves `http://host:port/metrics` (every interface unless `host` is given) until `stop()`. */
export async function servePrometheusMetrics(port: number, host?: string): Promise<{ url: string; stop(): Promise<void> }> {
  const exporter = new PrometheusExporter({ port, ...(host === undefined ? {} : { host }) });
  // The exporter starts listening in its constructor; this waits until it does (and fails if it cannot).
  await exporter.startServer();
  const provider = new MeterProvider({ readers: [exporter] });
  metrics.setGlobalMeterProvider(provider);
  return {
    url: `http://${host ?? 'localhost'}:${port}/metrics`,
    stop: async () => {
      metrics.disable();
      await provider.shutdown();
    },
  };
}
