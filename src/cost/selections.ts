import { Kind } from 'graphql';
import type { DirectiveNode, DocumentNode, FieldNode, SelectionSetNode, ValueNode } from 'graphql';
import type { CompositeCost } from './schema-costs.js';

/** Whether a fragment on `typeCondition` applies to an object of `type`: the same type, or an interface or union it belongs to. */
export function applies(typeCondition: string, type: CompositeCost): boolean {
  return typeCondition === type.name || type.abstractTypes.has(typeCondition);
}

/**
 * `@skip`/`@include`: a condition whose value is unknown (a variable that did
 * not coerce) counts as included, so nothing is under-charged.
 */
export function included(directives: readonly DirectiveNode[], variables: Readonly<Record<string, unknown>>): boolean {
  for (const directive of directives) {
    const name = directive.name.value;
    if (name !== 'skip' && name !== 'include') continue;
    let condition: ValueNode | undefined;
    for (const argument of directive.arguments ?? []) {
      if (argument.name.value === 'if') {
        condition = argument.value;
        break;
      }
    }
    let value: unknown;
    if (condition?.kind === Kind.BOOLEAN) value = condition.value;
    else if (condition?.kind === Kind.VARIABLE) value = variables[condition.name.value];
    if (value === (name === 'skip')) return false;
  }
  return true;
}

/** The value node of the argument `name`, or undefined when the field does not pass it. */
export function findArgument(node: FieldNode, name: string): ValueNode | undefined {
  const args = node.arguments;
  if (args === undefined) return undefined;
  for (let a = 0; a < args.length; a++) {
    const arg = args[a];
    if (arg !== undefined && arg.name.value === name) return arg.value;
  }
  return undefined;
}

/**
 * True when some selection set node is reachable from two places of the
 * document. Stops at the first node seen twice, so a shared (DAG-shaped)
 * document is checked in linear time.
 */
export function sharesSelectionSets(document: DocumentNode): boolean {
  const seen = new Set<SelectionSetNode>();
  const pending: SelectionSetNode[] = [];
  for (const definition of document.definitions) {
    if (definition.kind === Kind.OPERATION_DEFINITION || definition.kind === Kind.FRAGMENT_DEFINITION) {
      pending.push(definition.selectionSet);
    }
  }
  for (let selectionSet = pending.pop(); selectionSet !== undefined; selectionSet = pending.pop()) {
    if (seen.has(selectionSet)) return true;
    seen.add(selectionSet);
    for (const selection of selectionSet.selections) {
      if (selection.kind !== Kind.FRAGMENT_SPREAD && selection.selectionSet !== undefined) pending.push(selection.selectionSet);
    }
  }
  return false;
}

/** Saturating arithmetic: totals stay finite and comparable however large an operation is. */
export function sat(value: number): number {
  return value > Number.MAX_VALUE ? Number.MAX_VALUE : value;
}
