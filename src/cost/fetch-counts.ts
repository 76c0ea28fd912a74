import type { DocumentNode, FieldNode, OperationDefinitionNode, SelectionSetNode } from 'graphql';
import type { CompositeCost, FieldCost } from './schema-costs.js';

/**
 * Federation: what a gateway fetches for the objects of one operation.
 * Every object a field returns was fetched once, by the fetch that returned
 * the field (the complexity counts it); each further fetch that returns the
 * same object again — one per subgraph asked to resolve it as an entity, or a
 * second subgraph asked for the same list — costs one more per object.
 */
export interface FetchCounts {
  /**
   * The fetches each object that `field` (of `parent`, selected by `node`
   * with `selectionSets`, several where fields of one response key merge)
   * returns costs beyond the one that returned it.
   */
  perObject(parent: CompositeCost, field: FieldCost, node: FieldNode, selectionSets: readonly (SelectionSetNode | undefined)[]): number;
}

/** A gateway's query plans, where they are known before it runs them. */
export interface PlannedFetches {
  /** The plan's counts for this operation; null where it has none (the bound prices it then). */
  countsFor(document: DocumentNode, operation: OperationDefinitionNode): FetchCounts | null;
}
