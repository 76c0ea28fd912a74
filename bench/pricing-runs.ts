import { getOperationAST, parse, validate } from 'graphql';
import type { DocumentNode, GraphQLSchema, OperationDefinitionNode } from 'graphql';
import type { CostModel } from '../src/index.js';

/** One run of a pricing benchmark: the document's source and a model of its own. */
export interface PricingRun {
  source: string;
  model: CostModel;
}

export interface PricingTimes<T> {
  validateMs: number[];
  priceMs: number[];
  /** Heap growth of each pricing in MiB, when `collect` is given. */
  heapMb: number[];
  /** Median price time ÷ median validate time. */
  ratio: number;
  /** What the last pricing returned. */
  priced: T;
}

/**
 * Times graphql-js `validate` and then `price` of the same document, `runs`
 * times after one run that warms both up, each run on a fresh document and
 * model (`next`) so nothing is cached from the run before. `prepare` runs
 * between the two, untimed; with `collect` (a full garbage collection) the
 * heap each pricing grows is measured too.
 */
export function timePricing<T>(
  name: string,
  schema: GraphQLSchema,
  runs: number,
  next: (run: number) => PricingRun,
  price: (model: CostModel, document: DocumentNode, operation: OperationDefinitionNode) => T,
  { prepare, collect }: { prepare?: ((model: CostModel, document: DocumentNode, operation: OperationDefinitionNode) => void) | undefined; collect?: (() => void) | undefined } = {},
): PricingTimes<T> {
  const validateMs: number[] = [];
  const priceMs: number[] = [];
  const heapMb: number[] = [];
  let priced: T | undefined;
  for (let run = 0; run <= runs; run++) {
    const { source, model } = next(run);
    const document = parse(source);
    const operation = getOperationAST(document);
    if (operation == null) throw new Error('no operation');
    let started = performance.now();
    const errors = validate(schema, document);
    const validated = performance.now() - started;
    if (errors.length > 0) throw new Error(`${name} is invalid: ${errors[0]?.message ?? ''}`);
    prepare?.(model, document, operation);
    collect?.();
    const before = process.memoryUsage().heapUsed;
    started = performance.now();
    priced = price(model, document, operation);
    const took = performance.now() - started;
    const grown = (process.memoryUsage().heapUsed - before) / 2 ** 20;
    // The first run warms both up.
    if (run > 0) {
      validateMs.push(validated);
      priceMs.push(took);
      if (collect) heapMb.push(grown);
    }
  }
  return { validateMs, priceMs, heapMb, ratio: median(priceMs) / median(validateMs), priced: priced as T };
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
}
