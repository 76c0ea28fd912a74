import { GraphQLError, Kind } from 'graphql';
import type { DocumentNode, GraphQLErrorExtensions, OperationDefinitionNode } from 'graphql';

/**
 * The operation of `document` that graphql-js's `execute` (and GraphQL
 * Yoga's executor) runs for `operationName`: with a name, the **last**
 * operation of that name; without one, the only operation. `undefined` when
 * graphql-js's execution refuses (no such name, several operations and no name).
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

/**
 * The refusal of a request in which `executedOperation` finds no operation,
 * worded as graphql-js's `execute` words it. Such a request is answered by
 * the limiter, never handed on: not every executor refuses it as graphql-js
 * does (Apollo Gateway reads an empty `operationName` as none, and runs the
 * document's only operation), and nothing was priced.
 */
export function unidentifiedOperationError(document: DocumentNode, operationName: unknown): GraphQLError {
  const operations = document.definitions.filter((definition) => definition.kind === Kind.OPERATION_DEFINITION).length;
  const message =
    operationName !== null && operationName !== undefined
      ? `Unknown operation named "${String(operationName)}".`
      : operations > 1
        ? 'Must provide operation name if query contains multiple operations.'
        : 'Must provide an operation.';
  return new GraphQLError(message, { extensions: { code: 'BAD_REQUEST' } as GraphQLErrorExtensions });
}
