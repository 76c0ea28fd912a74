/**
 * The contract between `bench/run.ts` and each benchmark. A benchmark gets a
 * Redis URL whose database it owns for its run (it may flush it), measures,
 * and hands back lines to print, target checks and its raw figures.
 */
export interface BenchContext {
  /** A Redis whose selected database is empty when the benchmark starts. */
  readonly redisUrl: string;
}

/** One target: reported as PASS or FAIL, never fatal. */
export interface TargetCheck {
  readonly label: string;
  readonly pass: boolean;
  /** The figures the verdict rests on, e.g. `"2.31 µs vs 2.87 µs"`. */
  readonly detail: string;
}

export interface BenchReport {
  /** Human-readable lines (usually a table), printed as they are. */
  readonly lines: readonly string[];
  readonly targets: readonly TargetCheck[];
  /** Every figure, quoted under the benchmark's name in the `BENCH_JSON` line. */
  readonly figures: unknown;
}

export interface Benchmark {
  /** Name for `--only <name>` and key in the `BENCH_JSON` line. */
  readonly name: string;
  readonly description: string;
  run(context: BenchContext): Promise<BenchReport>;
}

/** Left-aligns the first column and right-aligns the others. */
export function formatTable(header: readonly string[], rows: readonly (readonly string[])[]): string[] {
  const all = [header, ...rows];
  const widths = header.map((_, c) => Math.max(...all.map((row) => (row[c] ?? '').length)));
  const line = (row: readonly string[]): string =>
    row
      .map((cell, c) => (c === 0 ? cell.padEnd(widths[c] ?? 0) : cell.padStart(widths[c] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)];
}

export function formatTargets(targets: readonly TargetCheck[]): string[] {
  return targets.map((t) => `${t.pass ? 'PASS' : 'FAIL'}  ${t.label}: ${t.detail}`);
}
