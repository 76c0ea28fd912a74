import { Kind } from 'graphql';
import type { DocumentNode, OperationDefinitionNode } from 'graphql';

/**
 * The operation of `document` that graphql-js's `execute` (and GraphQL
 * Yoga's executor) runs for `operationName`: with a name, the **last**
 * operation of that name; without one, the only operation. `undefined` when
 * execution itself refuses (no such name, several operations and no name).
 *
 * `getOperationAST`, which Apollo Server and graphql-ws use to name the
 * operation, returns the first of a name: with validation turned off a
 * document may hold two, and the one priced must be the one that runs.
 */
export function executedOperation(document: DocumentNode, operationName: unknown): OperationDefinitionNode | undefined {
  let operation: OperationDefinitionNode | undefined;
  for (const definition of document.definitions) {
    if (definition.kind !== Kind.OPERATION_DEFINITION) continue;
    if (operationName === null || operationName === undefined) {
      if (operation !== undefined) return undefined;
      operation = definition;
    } else if (definition.name?.value === operationName) {
      operation = definition;
    }
  }
  return operation;
}
