import { Kind } from 'graphql';
import type { ArgumentNode, DirectiveNode, DocumentNode, FieldNode, SelectionSetNode, ValueNode } from 'graphql';

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

/** Whether a fragment is deferred: `@defer` without an `if` that is false (an unknown one counts as deferred). */
export function deferred(directives: readonly DirectiveNode[] | undefined, variables: Readonly<Record<string, unknown>>): boolean {
  for (const directive of directives ?? []) {
    if (directive.name.value !== 'defer') continue;
    const condition = directive.arguments?.find((a) => a.name.value === 'if')?.value;
    if (condition === undefined) return true;
    if (condition.kind === Kind.BOOLEAN) return condition.value;
    if (condition.kind === Kind.VARIABLE) return variables[condition.name.value] !== false;
    return true;
  }
  return false;
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
 * The variables a `@skip`, `@include` or `@defer` of the document reads:
 * what a selection set collects depends on the request only through them,
 * and only through whether each is true, false or neither.
 */
export function conditionVariables(document: DocumentNode): readonly string[] {
  const names = new Set<string>();
  const pending: SelectionSetNode[] = [];
  for (const definition of document.definitions) {
    if (definition.kind === Kind.OPERATION_DEFINITION || definition.kind === Kind.FRAGMENT_DEFINITION) pending.push(definition.selectionSet);
  }
  const seen = new Set<SelectionSetNode>();
  for (let selectionSet = pending.pop(); selectionSet !== undefined; selectionSet = pending.pop()) {
    if (seen.has(selectionSet)) continue;
    seen.add(selectionSet);
    for (const selection of selectionSet.selections) {
      for (const directive of selection.directives ?? []) {
        const name = directive.name.value;
        if (name !== 'skip' && name !== 'include' && name !== 'defer') continue;
        for (const argument of directive.arguments ?? []) if (argument.value.kind === Kind.VARIABLE) names.add(argument.value.name.value);
      }
      if (selection.kind !== Kind.FRAGMENT_SPREAD && selection.selectionSet !== undefined) pending.push(selection.selectionSet);
    }
  }
  return [...names];
}

/** Saturating arithmetic: totals stay finite and comparable however large an operation is. */
export function sat(value: number): number {
  return value > Number.MAX_VALUE ? Number.MAX_VALUE : value;
}

/** Numbers for a document's selection sets, by what they cost. */
export interface SelectionSetIds {
  /**
   * Equal for two selection sets that price alike everywhere: the same
   * selections with the same response keys, arguments and directives, and
   * the same below. Distinct for every other pair.
   */
  readonly ids: ReadonlyMap<SelectionSetNode, number>;
  /** Per id: 1 when selection sets of that id sit at more than one place of the document. */
  readonly repeated: Uint8Array;
}

/**
 * Numbers every selection set of `document` by its content, bottom up and
 * without recursion, in time linear in the document: each set's key holds
 * its own selections' names, their arguments and directives written out,
 * and its children's numbers.
 */
export function selectionSetIds(document: DocumentNode): SelectionSetIds {
  const ids = new Map<SelectionSetNode, number>();
  const byKey = new Map<string, number>();
  const places: number[] = [];
  // Sets being numbered, each with the index of the next selection whose set to number first.
  const pending: SelectionSetNode[] = [];
  const cursors: number[] = [];
  const open = new Set<SelectionSetNode>();
  for (const definition of document.definitions) {
    if (definition.kind !== Kind.OPERATION_DEFINITION && definition.kind !== Kind.FRAGMENT_DEFINITION) continue;
    if (!ids.has(definition.selectionSet)) {
      pending.push(definition.selectionSet);
      cursors.push(0);
      open.add(definition.selectionSet);
    }
    while (pending.length > 0) {
      const top = pending.length - 1;
      const selectionSet = pending[top]!;
      const selections = selectionSet.selections;
      let cursor = cursors[top]!;
      let child: SelectionSetNode | undefined;
      while (cursor < selections.length) {
        const selection = selections[cursor++]!;
        if (selection.kind !== Kind.FRAGMENT_SPREAD && selection.selectionSet !== undefined && !ids.has(selection.selectionSet)) {
          child = selection.selectionSet;
          break;
        }
      }
      cursors[top] = cursor;
      if (child !== undefined && !open.has(child)) {
        pending.push(child);
        cursors.push(0);
        open.add(child);
        continue;
      }
      if (child !== undefined) continue; // a node inside itself (only a hand-built document): left unnumbered
      pending.pop();
      cursors.pop();
      open.delete(selectionSet);
      const key = contentKey(selectionSet, ids);
      let id = key === null ? undefined : byKey.get(key);
      if (id === undefined) {
        id = places.length;
        places.push(0);
        if (key !== null) byKey.set(key, id);
      }
      ids.set(selectionSet, id);
      for (const selection of selections) {
        if (selection.kind !== Kind.FRAGMENT_SPREAD && selection.selectionSet !== undefined) {
          const below = ids.get(selection.selectionSet);
          if (below !== undefined) places[below] = (places[below] ?? 0) + 1;
        }
      }
    }
    const root = ids.get(definition.selectionSet);
    if (root !== undefined) places[root] = (places[root] ?? 0) + 1;
  }
  const repeated = new Uint8Array(places.length);
  for (let id = 0; id < places.length; id++) if ((places[id] ?? 0) > 1) repeated[id] = 1;
  return { ids, repeated };
}

/** What a selection set costs depends on, as a string; null where a child is not numbered yet. */
function contentKey(selectionSet: SelectionSetNode, ids: ReadonlyMap<SelectionSetNode, number>): string | null {
  let key = '';
  for (const selection of selectionSet.selections) {
    const directives = directivesText(selection.directives);
    if (selection.kind === Kind.FIELD) {
      const below = selection.selectionSet === undefined ? -1 : ids.get(selection.selectionSet);
      if (below === undefined) return null;
      // The response key too: fields merge by it, so two sets differing only in aliases collect differently.
      key += `F${selection.alias === undefined ? '' : `${selection.alias.value}:`}${selection.name.value}(${argumentsText(selection.arguments)})${directives}{${below}}`;
    } else if (selection.kind === Kind.INLINE_FRAGMENT) {
      const below = ids.get(selection.selectionSet);
      if (below === undefined) return null;
      key += `I${selection.typeCondition?.name.value ?? ''}${directives}{${below}}`;
    } else {
      key += `S${selection.name.value}${directives};`;
    }
  }
  return key;
}

function directivesText(directives: readonly DirectiveNode[] | undefined): string {
  let text = '';
  for (const directive of directives ?? []) text += `@${directive.name.value}(${argumentsText(directive.arguments)})`;
  return text;
}

function argumentsText(args: readonly ArgumentNode[] | undefined): string {
  let text = '';
  for (const arg of args ?? []) text += `${arg.name.value}:${valueText(arg.value)},`;
  return text;
}

/** A value as text that tells every two values apart (strings quoted), written without recursion. */
function valueText(value: ValueNode): string {
  let text = '';
  // Values still to write, and the text closing a list or object once its items are written.
  const pending: (ValueNode | string)[] = [value];
  while (pending.length > 0) {
    const next = pending.pop()!;
    if (typeof next === 'string') {
      text += next;
      continue;
    }
    switch (next.kind) {
      case Kind.VARIABLE:
        text += `$${next.name.value}`;
        break;
      case Kind.INT:
      case Kind.FLOAT:
      case Kind.ENUM:
        text += next.value;
        break;
      case Kind.STRING:
        text += JSON.stringify(next.value);
        break;
      case Kind.BOOLEAN:
        text += String(next.value);
        break;
      case Kind.NULL:
        text += 'null';
        break;
      case Kind.LIST:
        text += '[';
        pending.push(']');
        for (let i = next.values.length - 1; i >= 0; i--) pending.push(',', next.values[i]!);
        break;
      case Kind.OBJECT:
        text += '{';
        pending.push('}');
        for (let i = next.fields.length - 1; i >= 0; i--) pending.push(',', next.fields[i]!.value, `${next.fields[i]!.name.value}:`);
        break;
    }
  }
  return text;
}
