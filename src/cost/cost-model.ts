import { GraphQLError, Kind, assertSchema, getVariableValues } from 'graphql';
import type { DocumentNode, FragmentDefinitionNode, GraphQLSchema, OperationDefinitionNode } from 'graphql';
import { ArgumentPricer } from './argument-costs.js';
import { Work } from './budget.js';
import { Levels } from './levels.js';
import { ListSizes } from './list-sizes.js';
import { Estimate, Frames } from './price-operation.js';
import { ResponseWalk } from './price-response.js';
import { compileSchemaCosts } from './schema-costs.js';
import type { CompositeCost, CoordinateRule, SchemaCosts, TokenBucketAnnotation } from './schema-costs.js';
import type { RequiredSelections } from './required-selections.js';
import { EntityFetches } from './entity-fetches.js';
import type { FederationModel } from './entity-fetches.js';
import type { FetchCounts, PlannedFetches } from './fetch-counts.js';
import { conditionVariables, selectionSetIds } from './selections.js';
import type { SelectionSetIds } from './selections.js';

export type { CoordinateRule, TokenBucketAnnotation } from './schema-costs.js';
export type { RequiredSelections } from './required-selections.js';

/** The size assumed for a list field with no usable slicing argument and no `@listSize(assumedSize:)`. */
export const DEFAULT_LIST_SIZE = 10;

/** What every mutation costs before its fields, as the IBM specification and Apollo Router count it. */
export const MUTATION_BASE_COST = 10;

export interface CostModelOptions {
  /** Size of a list whose size nothing in the operation or schema states. Default `DEFAULT_LIST_SIZE` (10). */
  defaultListSize?: number | undefined;
  /**
   * Charge `__schema` and `__type` like the query type's own fields, so that a
   * type-level directive on it prices introspection too. Default `true`.
   */
  chargeIntrospection?: boolean | undefined;
  /** Bucket rules by schema coordinate, as `@tokenBucket` on that type or field would say. An unknown coordinate is an error. Default: none. */
  rules?: ReadonlyMap<string, readonly CoordinateRule[]> | undefined;
  /** Federation: the selection each `@requires` field needs fetched first (`'Type.field'` → selections on `Type`); the field also pays for it. Default: none. */
  requires?: RequiredSelections | undefined;
  /** Federation: per field (`'Product.reviews'`), the subgraphs that resolve it, one bit each (as many bits as subgraphs); each object then also pays for the entity fetches its selection needs. Default: none (one graph). */
  graphs?: ReadonlyMap<string, bigint> | undefined;
  /** Federation: how each subgraph finds each entity, which bounds the fetches of a plan not known in advance (`PricingSource.federation`). Default: none. */
  federation?: FederationModel | undefined;
  /** Federation: the gateway's query plans, whose fetches are priced where they are known (`PricingSource.plans`). Default: none. */
  plans?: PlannedFetches | undefined;
}

const NO_VARIABLES: Readonly<Record<string, unknown>> = Object.freeze({});

/** What the walks need to know about a document, computed once per document. */
interface DocumentInfo {
  readonly fragments: ReadonlyMap<string, FragmentDefinitionNode>;
  readonly selectionSets: SelectionSetIds;
  /** The variables `@skip`, `@include` and `@defer` read. */
  readonly conditions: readonly string[];
  /** What each selection set collects (levels.ts), kept with the document per truth of those variables (a few readings at most). */
  readonly levels: Map<string, Levels>;
}

/** Readings of a document's condition variables whose levels are kept; past this, each request collects its own. */
const MAX_READINGS = 16;

interface Variables {
  readonly coerced: Readonly<Record<string, unknown>>;
  /** As sent, when they coerced or graphql-js ran out of stack; null when they did not coerce (the operation then never runs). */
  readonly raw: Readonly<Record<string, unknown>> | null;
}

interface LastEstimate {
  readonly variables: unknown;
  readonly costs: ReadonlyMap<string, number>;
}

/**
 * The price of operations against one schema: reads every `@tokenBucket`,
 * `@cost` and `@listSize` once, in whatever form the schema holds them, then prices each
 * operation before it runs, and its response before it is sent.
 */
export class CostModel {
  /** Every `@tokenBucket` in the schema, for start-up validation. */
  readonly annotations: readonly TokenBucketAnnotation[];
  /** Every bucket name used anywhere in the schema. */
  readonly buckets: ReadonlySet<string>;
  /**
   * What start-up should warn about, one message each, naming every
   * element: annotations that are not read (a `complexity` function, a
   * `@cost` of another directive), slicing arguments that are not `Int`.
   */
  readonly warnings: readonly string[];

  private readonly schema: GraphQLSchema;
  private readonly costs: SchemaCosts;
  private readonly defaultListSize: number;
  /** Federation: what bounds the fetches, and the plans that price them where known; undefined for a graph of one server. */
  private readonly federation: FederationModel | undefined;
  private readonly plans: PlannedFetches | undefined;
  private readonly frames = new Frames();
  private readonly documents = new WeakMap<DocumentNode, DocumentInfo>();
  /** The last estimate per operation, so pricing its response does not price the operation again. */
  private readonly estimates = new WeakMap<OperationDefinitionNode, LastEstimate>();

  /** Throws an `Error` naming the schema coordinate when an annotation is malformed. */
  constructor(schema: GraphQLSchema, options: CostModelOptions = {}) {
    assertSchema(schema);
    const defaultListSize = options.defaultListSize ?? DEFAULT_LIST_SIZE;
    if (!Number.isSafeInteger(defaultListSize) || defaultListSize < 0) {
      throw new RangeError(`defaultListSize must be a non-negative safe integer, got ${String(defaultListSize)}`);
    }
    this.schema = schema;
    this.defaultListSize = defaultListSize;
    // Subgraphs without their keys (a model given `graphs` alone): every subgraph is reached by the keys the object has.
    this.federation = options.federation ?? (options.graphs === undefined ? undefined : { types: new Map(), roots: rootNames(schema) });
    this.plans = options.plans;
    this.costs = compileSchemaCosts(schema, defaultListSize, options.chargeIntrospection !== false, {
      rules: options.rules,
      requires: options.requires,
      graphs: options.graphs,
      federation: this.federation,
    });
    this.annotations = this.costs.annotations;
    this.buckets = new Set(this.costs.bucketNames);
    this.warnings = this.costs.warnings;
  }

  /**
   * Per-bucket cost of one operation: only buckets the operation touches
   * appear (a cost of 0 included). Every value is a non-negative integer;
   * anything above `Number.MAX_SAFE_INTEGER` (at most `Number.MAX_VALUE`)
   * means more than any bucket can hold.
   *
   * Never throws for an operation, however deep: the walk keeps its own
   * stack. Variables graphql-js cannot coerce are priced as absent
   * (execution then rejects them), except those too deep for its stack,
   * which are priced as sent.
   */
  costOf(
    document: DocumentNode,
    operation: OperationDefinitionNode,
    variables?: Readonly<Record<string, unknown>> | null,
  ): Map<string, number> {
    const result = new Map<string, number>();
    if (this.costs.bucketNames.length === 0) return result;
    const root = this.rootOf(operation);
    if (root === undefined) return result;

    const info = this.documentInfo(document);
    const { coerced, raw } = this.coerce(operation, variables);
    const work = new Work();
    const levels = this.levelsFor(info, coerced);
    const estimate = new Estimate({
      costs: this.costs,
      levels,
      sizes: new ListSizes(this.defaultListSize, coerced, raw ?? NO_VARIABLES),
      arguments: new ArgumentPricer(raw, operation.variableDefinitions),
      fragments: info.fragments,
      variables: coerced,
      work,
      frames: this.frames,
      fetches: this.fetchCounts(document, operation, info.fragments, coerced),
    });
    let measure;
    try {
      measure = estimate.price(operation.selectionSet, root);
    } finally {
      this.release(info, levels);
    }
    const charges = measure.v.slice(1);
    const touched = estimate.touched;
    this.addBase(operation, root, charges, touched);
    this.costs.bucketNames.forEach((name, b) => {
      if (touched[b] === 1) result.set(name, roundUp(charges[b] ?? 0));
    });
    this.estimates.set(operation, { variables, costs: new Map(result) });
    return result;
  }

  /**
   * Per-bucket cost of a response about to be sent for `operation`: the
   * same formula with every list's size replaced by the number of items it
   * holds (a null list or object: nothing below it), a fixed cost charged
   * once per place its field appears. Never above `estimate` (default:
   * `costOf` of the same operation and variables), bucket by bucket; the
   * same keys as the estimate.
   *
   * Where an object's concrete type cannot be told (an abstract type
   * whose possible types' selections would produce the same keys and
   * `__typename`s), it is priced as the most expensive type that could have
   * produced it.
   */
  actualCostOf(
    document: DocumentNode,
    operation: OperationDefinitionNode,
    variables: Readonly<Record<string, unknown>> | null | undefined,
    data: unknown,
    estimate?: ReadonlyMap<string, number>,
  ): Map<string, number> {
    const cap = estimate ?? this.lastEstimate(document, operation, variables);
    const result = new Map<string, number>();
    if (cap.size === 0) return result;
    const root = this.rootOf(operation);
    if (root === undefined) return result;

    const info = this.documentInfo(document);
    const { coerced, raw } = this.coerce(operation, variables);
    const levels = this.levelsFor(info, coerced);
    const walk = new ResponseWalk({
      costs: this.costs,
      levels,
      arguments: new ArgumentPricer(raw, operation.variableDefinitions),
      fragments: info.fragments,
      variables: coerced,
      work: new Work(),
      fetches: this.fetchCounts(document, operation, info.fragments, coerced),
    });
    let charges;
    try {
      charges = walk.price(operation.selectionSet, root, data).slice(1);
    } finally {
      this.release(info, levels);
    }
    this.addBase(operation, root, charges, null);
    this.costs.bucketNames.forEach((name, b) => {
      const most = cap.get(name);
      if (most !== undefined) result.set(name, Math.min(roundUp(charges[b] ?? 0), most));
    });
    return result;
  }

  /** Federation: the plan's fetches where the gateway's plan is known, else the bound. */
  private fetchCounts(
    document: DocumentNode,
    operation: OperationDefinitionNode,
    fragments: ReadonlyMap<string, FragmentDefinitionNode>,
    variables: Readonly<Record<string, unknown>>,
  ): FetchCounts | undefined {
    if (this.federation === undefined) return undefined;
    return this.plans?.countsFor(document, operation) ?? new EntityFetches(this.federation, fragments, variables);
  }

  private rootOf(operation: OperationDefinitionNode): CompositeCost | undefined {
    const rootType = this.schema.getRootType(operation.operation);
    return rootType === undefined || rootType === null ? undefined : this.costs.types.get(rootType);
  }

  /** A mutation's base cost belongs to the complexity its root type's type-level directives charge. */
  private addBase(operation: OperationDefinitionNode, root: CompositeCost, charges: Float64Array, touched: Uint8Array | null): void {
    if (operation.operation !== 'mutation') return;
    for (const rule of root.typeRules) {
      if (rule.cost !== null) continue;
      charges[rule.bucket] = (charges[rule.bucket] ?? 0) + MUTATION_BASE_COST;
      if (touched !== null) touched[rule.bucket] = 1;
    }
  }

  private lastEstimate(
    document: DocumentNode,
    operation: OperationDefinitionNode,
    variables: Readonly<Record<string, unknown>> | null | undefined,
  ): ReadonlyMap<string, number> {
    const last = this.estimates.get(operation);
    return last !== undefined && last.variables === variables ? last.costs : this.costOf(document, operation, variables);
  }

  /**
   * Variables that do not coerce fail execution later; the operation is
   * still priced, sizes falling back to assumed ones. Variables graphql-js
   * ran out of stack coercing are priced as sent: execution, on a stack of
   * another depth, may coerce them.
   */
  private coerce(operation: OperationDefinitionNode, variables: Readonly<Record<string, unknown>> | null | undefined): Variables {
    const definitions = operation.variableDefinitions;
    if (definitions === undefined || definitions.length === 0) return { coerced: NO_VARIABLES, raw: NO_VARIABLES };
    const values = variables ?? {};
    const coerced = getVariableValues(this.schema, definitions, values, { maxErrors: 1 });
    if (coerced.coerced !== undefined) return { coerced: coerced.coerced, raw: values };
    return { coerced: NO_VARIABLES, raw: coerced.errors.some(outOfStack) ? values : null };
  }

  /** The document's levels for these variables: kept per truth of its condition variables. */
  private levelsFor(info: DocumentInfo, variables: Readonly<Record<string, unknown>>): Levels {
    let key = '';
    for (const name of info.conditions) {
      const value = variables[name];
      key += value === true ? 't' : value === false ? 'f' : 'u';
    }
    let levels = info.levels.get(key);
    if (levels === undefined) {
      levels = new Levels(this.costs, info.fragments, variables, info.selectionSets.ids, info.selectionSets.repeated, this.costs.shapes);
      if (info.levels.size < MAX_READINGS) info.levels.set(key, levels);
    }
    return levels;
  }

  /** Levels that grew past what a document may keep (a selection set collected again per type) are not kept with it. */
  private release(info: DocumentInfo, levels: Levels): void {
    if (levels.keepable) return;
    for (const [key, kept] of info.levels) if (kept === levels) info.levels.delete(key);
  }

  private documentInfo(document: DocumentNode): DocumentInfo {
    let info = this.documents.get(document);
    if (info === undefined) {
      const fragments = new Map<string, FragmentDefinitionNode>();
      for (const definition of document.definitions) {
        if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments.set(definition.name.value, definition);
      }
      const selectionSets = selectionSetIds(document);
      info = { fragments, selectionSets, conditions: conditionVariables(document), levels: new Map() };
      this.documents.set(document, info);
    }
    return info;
  }
}

function rootNames(schema: GraphQLSchema): Set<string> {
  const names = new Set<string>();
  for (const root of [schema.getQueryType(), schema.getMutationType(), schema.getSubscriptionType()]) if (root) names.add(root.name);
  return names;
}

/** graphql-js passes a stack overflow on as it is, or wraps it when a scalar's `parseValue` hit it. */
export function outOfStack(error: unknown): boolean {
  return error instanceof RangeError || (error instanceof GraphQLError && error.originalError instanceof RangeError);
}

/**
 * Decimal weights add up with binary rounding error (10 × 0.3 is
 * 3.0000000000000004): a relative hair below is still the whole number.
 */
function roundUp(charge: number): number {
  return Math.ceil(charge - Math.min(charge * 1e-12, 1e-6));
}
