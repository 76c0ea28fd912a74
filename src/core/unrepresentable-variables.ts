import { GraphQLError } from 'graphql';
import type { GraphQLErrorExtensions, OperationDefinitionNode, VariableDefinitionNode } from 'graphql';

/** `extensions.code` of an operation refused because its executor could not hold its variables as they were priced. */
export const BAD_USER_INPUT = 'BAD_USER_INPUT';

// Assigned to a plain object, `__proto__` replaces the prototype instead of
// making a key: an executor that keeps variables (or input objects) in plain
// objects drops it, or reads its fields through the prototype, while the
// pricer (graphql-js, null-prototype objects) sees the value. No schema may
// name an input field `__proto__` (names starting `__` are reserved), so
// only a variable can carry it.
const DROPPED = '__proto__';

/**
 * The error refusing an operation whose variables an executor cannot
 * represent as they were priced: a variable named `__proto__` (defined, with
 * a value or a default), or a value holding an object key `__proto__` at any
 * depth. `undefined` when there is none.
 */
export function unrepresentableVariables(operation: OperationDefinitionNode, variables: unknown): GraphQLError | undefined {
  for (const definition of operation.variableDefinitions ?? []) {
    if (definition.variable.name.value === DROPPED) {
      return refusal(`Variable "$${DROPPED}" cannot be used: the server's executor cannot hold a variable of that name. Rename it.`, definition);
    }
  }
  if (typeof variables !== 'object' || variables === null) return undefined;
  if (Object.hasOwn(variables, DROPPED)) {
    return refusal(`Variable "$${DROPPED}" cannot be used: the server's executor cannot hold a variable of that name. Rename it.`);
  }
  // Iterative, and each object once: variables nest as deep as a client sends them.
  const seen = new Set<object>();
  const pending: { value: object; path: string }[] = [];
  for (const [name, value] of Object.entries(variables)) {
    if (typeof value === 'object' && value !== null) pending.push({ value, path: `$${name}` });
  }
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const { value, path } = next;
    if (seen.has(value) || !walkable(value)) continue;
    seen.add(value);
    if (!Array.isArray(value) && Object.hasOwn(value, DROPPED)) {
      return refusal(`Variable "${path}" holds an object field named "${DROPPED}", which the server's executor cannot hold as sent. Remove it.`);
    }
    if (Array.isArray(value)) {
      value.forEach((item: unknown, i) => {
        if (typeof item === 'object' && item !== null) pending.push({ value: item, path: `${path}[${i}]` });
      });
    } else {
      for (const [key, item] of Object.entries(value)) {
        if (typeof item === 'object' && item !== null) pending.push({ value: item, path: `${path}.${key}` });
      }
    }
  }
  return undefined;
}

/** Arrays and plain objects, as JSON makes them; an uploaded file or a class instance is the application's. */
function walkable(value: object): boolean {
  if (Array.isArray(value)) return true;
  const prototype: unknown = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

function refusal(message: string, node?: VariableDefinitionNode): GraphQLError {
  return new GraphQLError(message, { ...(node ? { nodes: node } : {}), extensions: { code: BAD_USER_INPUT } as GraphQLErrorExtensions });
}
