import { Kind, assertSchema, getVariableValues } from 'graphql';
import type { DocumentNode, FragmentDefinitionNode, GraphQLSchema, OperationDefinitionNode } from 'graphql';
import { measureOperation, sharesSelectionSets } from './measure-operation.js';
import { compileSchemaCosts } from './schema-costs.js';
import type { SchemaCosts, TokenBucketAnnotation } from './schema-costs.js';

export type { TokenBucketAnnotation } from './schema-costs.js';

/** The size assumed for a list field with no usable slicing argument and no `@listSize(assumedSize:)`. */
export const DEFAULT_LIST_SIZE = 10;

export interface CostModelOptions {
  /** Size of a list whose size nothing in the operation or schema states. Default `DEFAULT_LIST_SIZE` (10). */
  defaultListSize?: number | undefined;
  /**
   * Charge `__schema` and `__type` like the query type's own fields, so that a
   * type-level directive on it prices introspection too. Default `true`.
   */
  chargeIntrospection?: boolean | undefined;
}

const NO_VARIABLES: Readonly<Record<string, unknown>> = Object.freeze({});

/** What the walk needs to know about a document, computed once per document. */
interface DocumentInfo {
  readonly fragments: ReadonlyMap<string, FragmentDefinitionNode>;
  readonly sharesSelectionSets: boolean;
}

/**
 * The static price of operations against one schema: reads every
 * `@tokenBucket` (and `@cost`, `@listSize` where declared) once, then prices
 * each operation before it runs.
 */
export class CostModel {
  /** Every `@tokenBucket` in the schema, for start-up validation. */
  readonly annotations: readonly TokenBucketAnnotation[];
  /** Every bucket name used anywhere in the schema. */
  readonly buckets: ReadonlySet<string>;

  private readonly schema: GraphQLSchema;
  private readonly costs: SchemaCosts;
  private readonly defaultListSize: number;
  private readonly documents = new WeakMap<DocumentNode, DocumentInfo>();

  /** Throws an `Error` naming the schema coordinate when an annotation is malformed. */
  constructor(schema: GraphQLSchema, options: CostModelOptions = {}) {
    assertSchema(schema);
    const defaultListSize = options.defaultListSize ?? DEFAULT_LIST_SIZE;
    if (!Number.isSafeInteger(defaultListSize) || defaultListSize < 0) {
      throw new RangeError(`defaultListSize must be a non-negative safe integer, got ${String(defaultListSize)}`);
    }
    this.schema = schema;
    this.defaultListSize = defaultListSize;
    this.costs = compileSchemaCosts(schema, options.chargeIntrospection !== false);
    this.annotations = this.costs.annotations;
    this.buckets = new Set(this.costs.bucketNames);
  }

  /**
   * Per-bucket cost of one operation: only buckets the operation touches
   * appear (a cost of 0 included). Every value is a non-negative integer;
   * anything above `Number.MAX_SAFE_INTEGER` (at most `Number.MAX_VALUE`)
   * means more than any bucket can hold.
   */
  costOf(
    document: DocumentNode,
    operation: OperationDefinitionNode,
    variables?: Readonly<Record<string, unknown>> | null,
  ): Map<string, number> {
    const result = new Map<string, number>();
    if (this.costs.bucketNames.length === 0) return result;
    const rootType = this.schema.getRootType(operation.operation);
    const root = rootType === undefined || rootType === null ? undefined : this.costs.types.get(rootType);
    if (root === undefined) return result;

    const { fragments, sharesSelectionSets } = this.documentInfo(document);
    const { charges, touched } = measureOperation(
      {
        costs: this.costs,
        defaultListSize: this.defaultListSize,
        fragments,
        sharesSelectionSets,
        variables: this.coerce(operation, variables),
      },
      operation.selectionSet,
      root,
    );
    this.costs.bucketNames.forEach((name, b) => {
      // Decimal weights add up with binary rounding error (10 × 0.3 is
      // 3.0000000000000004): a relative hair below is still the whole number.
      const charge = charges[b] ?? 0;
      if (touched[b] === 1) result.set(name, Math.ceil(charge - Math.min(charge * 1e-12, 1e-6)));
    });
    return result;
  }

  /** Invalid variables fail execution later; the operation is still charged, with sizes falling back to assumed ones. */
  private coerce(
    operation: OperationDefinitionNode,
    variables: Readonly<Record<string, unknown>> | null | undefined,
  ): Readonly<Record<string, unknown>> {
    const definitions = operation.variableDefinitions;
    if (definitions === undefined || definitions.length === 0) return NO_VARIABLES;
    const coerced = getVariableValues(this.schema, definitions, variables ?? {}, { maxErrors: 1 });
    return coerced.coerced ?? NO_VARIABLES;
  }

  private documentInfo(document: DocumentNode): DocumentInfo {
    let info = this.documents.get(document);
    if (info === undefined) {
      const fragments = new Map<string, FragmentDefinitionNode>();
      for (const definition of document.definitions) {
        if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments.set(definition.name.value, definition);
      }
      info = { fragments, sharesSelectionSets: sharesSelectionSets(document) };
      this.documents.set(document, info);
    }
    return info;
  }
}
