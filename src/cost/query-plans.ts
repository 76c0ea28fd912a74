import { createRequire } from 'node:module';
import { Kind } from 'graphql';
import type { DocumentNode, GraphQLSchema, OperationDefinitionNode, SelectionNode } from 'graphql';
import type { FetchCounts } from './fetch-counts.js';
import { planFetchCounts } from './plan-fetches.js';
import type { QueryPlan } from './plan-fetches.js';

interface Planner {
  buildQueryPlan(
    operation: unknown,
    options?: { recursiveSelectionsLimitDisabled?: boolean; nonLocalSelectionsLimitDisabled?: boolean; overrideConditions?: Map<string, boolean> },
  ): QueryPlan;
}

/** What is used of `@apollo/query-planner` and the `@apollo/federation-internals` it runs on. */
interface PlannerModules {
  readonly QueryPlanner: new (supergraph: unknown, config?: Record<string, unknown>) => Planner;
  readonly Supergraph: { build(sdl: string, options?: { validateSupergraph?: boolean }): { apiSchema(): unknown } };
  readonly operationFromDocument: (schema: unknown, document: DocumentNode, options?: { operationName?: string }) => unknown;
}

let modules: PlannerModules | Error | undefined;

/**
 * The most selections an operation may hold, its fragments spread out, for
 * its plan to be made here: planning takes about ten times what graphql-js
 * takes to validate the document, and more than that on larger ones, so
 * beyond this the bound prices it, in time linear in the document. Every
 * plan made here is one the gateway makes too.
 */
export const MAX_PLANNED_SELECTIONS = 1000;

/**
 * The most progressive overrides' labels a supergraph may have for its
 * operations to be planned under every setting of them (2^n plans each):
 * beyond this the bound prices them, which counts either side of every
 * label.
 */
export const MAX_PLANNED_LABELS = 3;

/**
 * Apollo's query planner, loaded on first use rather than imported (an
 * optional peer dependency: the package loads without it): the copy
 * `@apollo/gateway` runs where the gateway is installed, so the plans are
 * the gateway's own, else the one beside this package; the federation
 * internals it was built with.
 */
function plannerModules(): PlannerModules | Error {
  if (modules !== undefined) return modules;
  try {
    const own = createRequire(import.meta.url);
    let from = own;
    try {
      from = createRequire(own.resolve('@apollo/gateway'));
    } catch {
      // No gateway (Apollo Router's supergraph): the planner beside this package.
    }
    const plannerPath = from.resolve('@apollo/query-planner');
    const planner = from(plannerPath) as { QueryPlanner?: PlannerModules['QueryPlanner'] };
    const internals = createRequire(plannerPath)('@apollo/federation-internals') as Partial<PlannerModules>;
    if (typeof planner.QueryPlanner !== 'function' || typeof internals.Supergraph?.build !== 'function' || typeof internals.operationFromDocument !== 'function') {
      throw new Error('@apollo/query-planner or @apollo/federation-internals is not a version this package can use (2.7 or later)');
    }
    modules = { QueryPlanner: planner.QueryPlanner, Supergraph: internals.Supergraph, operationFromDocument: internals.operationFromDocument };
  } catch (error) {
    modules = error instanceof Error ? error : new Error(String(error));
  }
  return modules;
}

/** Why plans cannot be made here, or undefined when they can. */
export function plannerUnavailable(): string | undefined {
  const loaded = plannerModules();
  return loaded instanceof Error ? loaded.message : undefined;
}

/** Plans an operation: once, or once per setting of the progressive overrides' labels. */
type Build = (document: DocumentNode, operationName: string | undefined) => readonly QueryPlan[];

/**
 * The query plans Apollo Gateway makes for one supergraph, as fetch counts:
 * built by the same planner from the same supergraph, with the planner's
 * own limits as the gateway sets them, once per operation of a document
 * (as the gateway keeps its plans). An operation the planner refuses, or
 * of more than `maxSelections` selections, is priced by the bound
 * (`countsFor` answers null), as is every operation when the planner cannot
 * be loaded.
 *
 * `labels`: the progressive overrides' labels to plan for every way they
 * may be set (a router draws each anew per request): each object then costs
 * the most of the plans of every combination of them — not only all set
 * and none set, since a plan that takes one field from each side fetches
 * from both. More than `MAX_PLANNED_LABELS` labels are priced by the bound.
 * Each operation is planned once per setting, so it is planned only up to
 * `MAX_PLANNED_SELECTIONS` / 2^n selections: one operation's planning costs
 * no more than without labels.
 * Apollo Gateway sets none: an empty list plans as it does.
 */
export class QueryPlans {
  private planner: Build | null | undefined;
  private readonly plans = new WeakMap<DocumentNode, Map<OperationDefinitionNode, FetchCounts | null>>();

  /** The most selections an operation planned here may hold: the planning work of one operation stays within `MAX_PLANNED_SELECTIONS` however many plans it takes. */
  readonly maxSelections: number;

  /** `schema`: the supergraph as graphql-js builds it, for the types a plan names. */
  constructor(
    private readonly sdl: string,
    private readonly schema: GraphQLSchema,
    private readonly labels: readonly string[] = [],
  ) {
    this.maxSelections = Math.floor(MAX_PLANNED_SELECTIONS / 2 ** Math.min(labels.length, MAX_PLANNED_LABELS));
  }

  countsFor(document: DocumentNode, operation: OperationDefinitionNode): FetchCounts | null {
    let byOperation = this.plans.get(document);
    const known = byOperation?.get(operation);
    if (known !== undefined) return known;
    let counts: FetchCounts | null = null;
    const planner = withinPlanning(document, operation, this.maxSelections) ? this.plannerFor() : null;
    if (planner !== null) {
      try {
        const each = planner(document, operation.name?.value).map((plan) => planFetchCounts(plan, document, operation, this.schema));
        counts = each.length === 1 ? each[0]! : { perObject: (...args) => Math.max(...each.map((c) => c.perObject(...args))) };
      } catch {
        // One the gateway cannot plan either: it will not run there; the bound prices it.
      }
    }
    if (byOperation === undefined) this.plans.set(document, (byOperation = new Map()));
    byOperation.set(operation, counts);
    return counts;
  }

  /** The planner of this supergraph, made on first use (it reads the whole supergraph); null when none can be. */
  private plannerFor(): Build | null {
    if (this.planner !== undefined) return this.planner;
    const loaded = plannerModules();
    this.planner = null;
    if (loaded instanceof Error || this.labels.length > MAX_PLANNED_LABELS) return null;
    try {
      // Read as the gateway reads the supergraph it serves (in production, without validating it again).
      const supergraph = loaded.Supergraph.build(this.sdl, { validateSupergraph: false });
      const apiSchema = supergraph.apiSchema();
      // The gateway's defaults; the fetches' documents kept as nodes rather than printed and parsed again.
      const planner = new loaded.QueryPlanner(supergraph, { exposeDocumentNodeInFetchNode: true });
      // The limits the gateway plans with: on unless its environment turns them off.
      const limits = {
        recursiveSelectionsLimitDisabled: process.env['APOLLO_DISABLE_SECURITY_RECURSIVE_SELECTIONS_CHECK'] === 'true',
        nonLocalSelectionsLimitDisabled: process.env['APOLLO_DISABLE_SECURITY_NON_LOCAL_SELECTIONS_CHECK'] === 'true',
      };
      const settings = labelSettings(this.labels).map((set) => (set === undefined ? limits : { ...limits, overrideConditions: set }));
      this.planner = (document, operationName) => {
        const operation = loaded.operationFromDocument(apiSchema, document, operationName === undefined ? {} : { operationName });
        return settings.map((options) => planner.buildQueryPlan(operation, options));
      };
    } catch {
      // A supergraph the planner cannot read: the gateway cannot serve it either; the bound prices.
    }
    return this.planner;
  }
}

/** Every setting of the labels, each label set or not: 2^n of them (`undefined`, none set, for no labels). */
function labelSettings(labels: readonly string[]): (Map<string, boolean> | undefined)[] {
  if (labels.length === 0) return [undefined];
  return Array.from({ length: 2 ** labels.length }, (_, bits) => new Map(labels.map((label, i) => [label, (bits & (1 << i)) !== 0])));
}

/**
 * Whether the operation holds at most `limit` selections
 * with its fragments spread out (as the planner reads it): counted one by
 * one and given up past the limit, so a fragment spread many times, or in
 * itself (validation off), costs no more than the limit.
 */
function withinPlanning(document: DocumentNode, operation: OperationDefinitionNode, limit: number): boolean {
  const fragments = new Map<string, readonly SelectionNode[]>();
  for (const definition of document.definitions) if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments.set(definition.name.value, definition.selectionSet.selections);
  const pending: (readonly SelectionNode[])[] = [operation.selectionSet.selections];
  let count = 0;
  for (let selections = pending.pop(); selections !== undefined; selections = pending.pop()) {
    for (const selection of selections) {
      if (++count > limit) return false;
      if (selection.kind === Kind.FRAGMENT_SPREAD) {
        const spread = fragments.get(selection.name.value);
        if (spread !== undefined) pending.push(spread);
      } else if (selection.selectionSet !== undefined) {
        pending.push(selection.selectionSet.selections);
      }
    }
  }
  return true;
}
