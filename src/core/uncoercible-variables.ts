import { GraphQLError, getVariableValues } from 'graphql';
import type { GraphQLErrorExtensions, GraphQLSchema, OperationDefinitionNode } from 'graphql';
import { outOfStack } from '../cost/cost-model.js';
import { BAD_USER_INPUT } from './unrepresentable-variables.js';

/**
 * The refusal of an operation whose variables do not coerce to the types it
 * declares (a missing non-null variable, a string for an `Int`): the first
 * error graphql-js's `getVariableValues` raises, as the executor would raise
 * it (Apollo Server's `BAD_USER_INPUT` code where it has none), or
 * `undefined` when they coerce.
 *
 * The executor refuses such an operation before any resolver runs, so the
 * limiter refuses it first, before any store call: it takes no token, and an
 * executor that coerced differently could not run what was never priced.
 * Variables graphql-js runs out of stack coercing are not refused here: the
 * cost model prices them as sent, and the executor, on a stack of another
 * depth, may coerce them.
 */
export function uncoercibleVariables(schema: GraphQLSchema, operation: OperationDefinitionNode, variables: unknown): GraphQLError | undefined {
  const definitions = operation.variableDefinitions;
  if (definitions === undefined || definitions.length === 0) return undefined;
  const inputs = typeof variables === 'object' && variables !== null ? (variables as Record<string, unknown>) : {};
  const { errors } = getVariableValues(schema, definitions, inputs);
  const first = errors?.[0];
  if (first === undefined || errors!.some(outOfStack)) return undefined;
  return new GraphQLError(first.message, {
    nodes: first.nodes ?? null,
    source: first.source ?? null,
    positions: first.positions ?? null,
    originalError: first.originalError ?? null,
    extensions: { ...first.extensions, code: first.extensions['code'] ?? BAD_USER_INPUT } as GraphQLErrorExtensions,
  });
}
