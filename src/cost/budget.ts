import { GraphQLError } from 'graphql';
import type { GraphQLErrorExtensions } from 'graphql';

/** `extensions.code` of an operation refused because pricing it would take more work than the budget allows. */
export const COST_ANALYSIS_ABORTED = 'COST_ANALYSIS_ABORTED';

/**
 * Units of pricing work allowed per operation, each a few map reads or a
 * field priced: about 40 times what the largest document graphql-js
 * validates in its own budget needs (a 1 MB document is priced in about a
 * tenth of it), so it only ever stops operations built to make pricing do
 * more than linear work (fragment cycles and chains with validation off).
 */
export const PRICING_WORK_BUDGET = 5_000_000;

/** The error of an operation whose pricing ran past the work budget: refused before it runs, with HTTP 400. */
export function costAnalysisAbortedError(): GraphQLError {
  return new GraphQLError('Cost analysis aborted: pricing this operation takes more work than the server allows. Split it into smaller operations.', {
    extensions: { code: COST_ANALYSIS_ABORTED } as GraphQLErrorExtensions,
  });
}

/**
 * The work budget of one pricing, and the loop that runs it: a walk is a
 * tree of generators, each yielding the generator of a step it needs done
 * first and receiving that step's result, so that however deep an operation
 * nests the call stack stays flat (the generators live on the heap).
 */
export class Work {
  private left: number;

  constructor(private readonly budget = PRICING_WORK_BUDGET) {
    this.left = budget;
  }

  /** Units spent so far. */
  get spent(): number {
    return this.budget - this.left;
  }

  /** Spends `units`; throws `costAnalysisAbortedError()` past the budget. */
  spend(units: number): void {
    this.left -= units;
    if (this.left < 0) throw costAnalysisAbortedError();
  }

  /** Runs a step to completion, with the steps it yields run first. */
  run<T>(root: Step<T>): T {
    const stack: Step<unknown>[] = [root];
    let sent: unknown = undefined;
    for (;;) {
      const top = stack[stack.length - 1]!;
      const next = top.next(sent);
      if (next.done === true) {
        stack.pop();
        sent = next.value;
        if (stack.length === 0) return sent as T;
      } else {
        stack.push(next.value);
        sent = undefined;
      }
    }
  }
}

/** A step of a walk: yields the steps it waits for, each answered with its result; returns its own. */
export type Step<T> = Generator<Step<unknown>, T, unknown>;
