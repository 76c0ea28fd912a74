import { buildSchema } from 'graphql';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { CostModel } from '../src/index.js';
import { HOSTILE_SCHEMA, HOSTILE_SHAPES } from '../test/support/hostile-documents.js';
import type { TargetCheck } from './benchmark.js';
import { formatTable } from './benchmark.js';
import { median, timePricing } from './pricing-runs.js';
import type { PricingRun } from './pricing-runs.js';

/*
 * The documents built to make pricing cost more than the work it prices
 * (each about 200 KB): pricing against graphql-js `validate` of the same
 * freshly parsed document in the same run, and the heap pricing adds.
 */

/** Pricing may take at most this many times `validate` of the same document. */
export const TARGET_HOSTILE_RATIO = 5;
/** Nor grow the heap by more than this, in MB, for one document. */
export const TARGET_HOSTILE_HEAP_MB = 64;

export interface HostileFigures {
  name: string;
  description: string;
  kilobytes: number;
  validateMs: number[];
  priceMs: number[];
  /** Median price time ÷ median validate time. */
  ratio: number;
  /** Heap used right after pricing, less heap used before it (collected first), per run, MB: what one pricing holds at once. */
  heapMb: number[];
  api: number;
}

/** A way to collect garbage between measurements, without `--expose-gc` on the command line. */
function collector(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

export function runHostileBench({ runs = 5 } = {}): HostileFigures[] {
  const collect = collector();
  const schema = buildSchema(HOSTILE_SCHEMA);
  return HOSTILE_SHAPES.map((shape, s) => {
    const { name, description } = shape();
    let kilobytes = 0;
    const next = (run: number): PricingRun => {
      const { source } = shape(run * 100 + s);
      kilobytes = Math.round(source.length / 1024);
      return { source, model: new CostModel(schema) };
    };
    const times = timePricing(name, schema, runs, next, (model, document, operation) => model.costOf(document, operation).get('api') ?? 0, { collect });
    const { validateMs, priceMs, heapMb, ratio, priced: api } = times;
    return { name, description, kilobytes, validateMs, priceMs, ratio, heapMb, api };
  });
}

/** The lines and targets `--only cost` prints for the hostile documents. */
export function hostileReport(figures: readonly HostileFigures[]): { lines: string[]; targets: TargetCheck[] } {
  const ms = (values: readonly number[]): string => values.map((v) => v.toFixed(0)).join(' ');
  const lines = [
    'Hostile documents: validate and costOf on the same freshly parsed document, ms per run; heap pricing adds, MB per run:',
    '',
    ...formatTable(
      ['document', 'KB', 'validate ms', 'costOf ms', 'costOf / validate (medians)', 'heap MB', 'api'],
      figures.map((f) => [f.name, String(f.kilobytes), ms(f.validateMs), ms(f.priceMs), `${f.ratio.toFixed(2)}x`, ms(f.heapMb), String(f.api)]),
    ),
    ...figures.map((f) => `  ${f.name}: ${f.description}`),
  ];
  const targets = figures.flatMap((f): TargetCheck[] => [
    {
      label: `${f.name}: costOf <= ${TARGET_HOSTILE_RATIO}x graphql-js validate`,
      pass: f.ratio <= TARGET_HOSTILE_RATIO,
      detail: `${f.ratio.toFixed(2)}x (${median(f.priceMs).toFixed(1)} ms vs ${median(f.validateMs).toFixed(1)} ms, medians of ${f.priceMs.length} runs)`,
    },
    {
      label: `${f.name}: heap growth per pricing <= ${TARGET_HOSTILE_HEAP_MB} MB`,
      pass: Math.max(...f.heapMb) <= TARGET_HOSTILE_HEAP_MB,
      detail: `${Math.max(...f.heapMb).toFixed(1)} MB at most over ${f.heapMb.length} runs`,
    },
  ]);
  return { lines, targets };
}
