import { Kind, isInterfaceType } from 'graphql';
import type { ArgumentNode, DirectiveNode, DocumentNode, FieldNode, FragmentDefinitionNode, SelectionNode, SelectionSetNode, ValueNode } from 'graphql';
import type { CompositeCost, SchemaCosts } from './schema-costs.js';

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

/** An abstract type's possible types by name, the class of each (schema-costs.ts), and the members of each class. */
export interface PossibleTypes {
  readonly byName: ReadonlyMap<string, CompositeCost>;
  readonly classOf: ReadonlyMap<CompositeCost, number>;
  readonly members: readonly (readonly CompositeCost[])[];
}

const possibleTypeTables = new WeakMap<CompositeCost, PossibleTypes>();

/** An abstract type's possible types by name, and the members of each of its classes: built once per schema. */
export function possibleTypesOf(type: CompositeCost): PossibleTypes {
  let tables = possibleTypeTables.get(type);
  if (tables === undefined) {
    const byName = new Map<string, CompositeCost>();
    const classOf = new Map<CompositeCost, number>();
    const members: CompositeCost[][] = (type.representatives ?? []).map(() => []);
    type.possibleTypes!.forEach((possible, i) => {
      byName.set(possible.name, possible);
      classOf.set(possible, type.classes![i]!);
      members[type.classes![i]!]?.push(possible);
    });
    possibleTypeTables.set(type, (tables = { byName, classOf, members }));
  }
  return tables;
}

const abstractByName = new WeakMap<SchemaCosts, ReadonlyMap<string, CompositeCost>>();

/** The interface or union of that name, or undefined. */
export function abstractNamed(costs: SchemaCosts, name: string): CompositeCost | undefined {
  let byName = abstractByName.get(costs);
  if (byName === undefined) {
    const map = new Map<string, CompositeCost>();
    for (const composite of costs.types.values()) if (composite.possibleTypes !== null) map.set(composite.name, composite);
    abstractByName.set(costs, (byName = map));
  }
  return byName.get(name);
}

/** The possible types of an abstract type to price a selection on, and which of them stands for each possible type. */
export class PricedTypes {
  constructor(
    readonly types: readonly CompositeCost[],
    private readonly named: ReadonlySet<CompositeCost> | null,
    private readonly standIns: readonly (CompositeCost | undefined)[],
    private readonly classOf: ReadonlyMap<CompositeCost, number>,
  ) {}

  /** The type of `types` that prices a selection as `possible` does: itself, or a type of its class that no condition names either. */
  standIn(possible: CompositeCost): CompositeCost {
    if (this.named === null || this.named.has(possible)) return possible;
    const index = this.classOf.get(possible);
    return (index === undefined ? undefined : this.standIns[index]) ?? possible;
  }
}

/**
 * What to price a selection on the abstract `type` on, given the narrower
 * type conditions it names (null: types it cannot tell apart): every object
 * type a condition names, and of each class of the other possible types,
 * one that stands for the rest of its class. A class holds types that price
 * the abstract type's own fields alike (schema-costs.ts) and, where the
 * selection has conditions on other interfaces or unions, that each of
 * those applies to or not alike and that are of one class of it. Built from
 * the names and the classes, not from every possible type: a selection
 * naming one type of an interface of thousands prices two types, and one
 * with `... on Timestamped` a few more, not every type that implements it.
 * `refinements` keeps the classes per set of those other types.
 */
export function pricedTypes(
  costs: SchemaCosts,
  type: CompositeCost,
  names: ReadonlySet<string> | null,
  refinements: Map<string, Classes>,
): PricedTypes {
  const possibleTypes = type.possibleTypes!;
  const tables = possibleTypesOf(type);
  if (names === null) return new PricedTypes(possibleTypes, null, [], tables.classOf);
  const named = new Set<CompositeCost>();
  const abstracts: CompositeCost[] = [];
  for (const name of names) {
    const possible = tables.byName.get(name);
    if (possible !== undefined) {
      named.add(possible);
      continue;
    }
    const abstract = abstractNamed(costs, name);
    if (abstract !== undefined && abstract !== type) abstracts.push(abstract);
  }
  const classes = abstracts.length === 0 ? tables : refine(type, tables, abstracts, refinements);
  const types = [...named];
  const standIns = classes.members.map((members) => {
    const unnamed = members.find((member) => !named.has(member));
    if (unnamed !== undefined) types.push(unnamed);
    return unnamed;
  });
  return new PricedTypes(types, named, standIns, classes.classOf);
}

/** Possible types in classes: the class of each, and the members of each. */
export interface Classes {
  readonly classOf: ReadonlyMap<CompositeCost, number>;
  readonly members: readonly (readonly CompositeCost[])[];
}

/** The classes of `type`'s possible types split by whether each of `abstracts` applies to them, and by their class in it. */
function refine(type: CompositeCost, tables: PossibleTypes, abstracts: CompositeCost[], refinements: Map<string, Classes>): Classes {
  abstracts.sort((a, b) => a.index - b.index);
  const key = `${type.index}:${abstracts.map((a) => a.index).join(',')}`;
  let classes = refinements.get(key);
  if (classes === undefined) {
    const inner = abstracts.map((abstract) => possibleTypesOf(abstract).classOf);
    const bySignature = new Map<string, number>();
    const classOf = new Map<CompositeCost, number>();
    const members: CompositeCost[][] = [];
    for (const possible of type.possibleTypes!) {
      let signature = String(tables.classOf.get(possible));
      inner.forEach((of, i) => {
        signature += possible.abstractTypes.has(abstracts[i]!.name) ? `,${of.get(possible) ?? '?'}` : ',-';
      });
      let index = bySignature.get(signature);
      if (index === undefined) {
        bySignature.set(signature, (index = members.length));
        members.push([]);
      }
      classOf.set(possible, index);
      members[index]!.push(possible);
    }
    refinements.set(key, (classes = { classOf, members }));
  }
  return classes;
}

/** Whether fields of that name on an abstract type's possible types are priced alike by its classes: `__typename`, or one it declares. */
export function declares(type: CompositeCost, name: string): boolean {
  if (name === '__typename' || type.possibleTypes === null) return true;
  const declared = type.type;
  return isInterfaceType(declared) && Object.prototype.hasOwnProperty.call(declared.getFields(), name);
}

/** Per selection set and abstract type: the narrower type conditions it names, kept per content number and type. */
export class NarrowerConditions {
  private readonly known = new Map<number, ReadonlySet<string> | null>();

  constructor(
    private readonly costs: SchemaCosts,
    private readonly fragments: ReadonlyMap<string, FragmentDefinitionNode>,
    private readonly ids: ReadonlyMap<SelectionSetNode, number>,
    private readonly typeCount: number,
  ) {}

  /**
   * The type conditions other than `type` named at `selectionSet`'s own
   * level, through inline fragments and the fragments it spreads, and
   * inside conditions on other interfaces and unions too (null: a field
   * the type whose selection holds it does not declare, which only
   * validation turned off lets through, or a fragment cycle). However many
   * it names, only those are priced apart: a set naming 65 types of an
   * interface of 2,000 prices 65 and one per class, not 2,000. What a
   * narrower condition on an object type holds applies only to that type.
   */
  of(selectionSet: SelectionSetNode, type: CompositeCost): ReadonlySet<string> | null {
    const count = this.typeCount;
    // A set's answer depends on the type whose fields it selects: `type`, or another interface or union it is a fragment on.
    const keyOf = (set: SelectionSetNode, on: CompositeCost): number => {
      const id = this.ids.get(set);
      return id === undefined ? -1 : (id * count + type.index) * count + on.index;
    };
    const rootKey = keyOf(selectionSet, type);
    if (rootKey < 0) return null;
    const known = this.known;
    interface Pending {
      readonly set: SelectionSetNode;
      readonly on: CompositeCost;
      readonly key: number;
    }
    interface Level {
      readonly names: Set<string>;
      readonly spreads: Pending[];
      undeclared: boolean;
    }
    // Selection sets whose answer waits on the fragments they spread, each with its own conditions and those fragments' sets.
    const pending: Pending[] = [{ set: selectionSet, on: type, key: rootKey }];
    const open = new Set<number>([rootKey]);
    const own = new Map<number, Level>();
    const done = (): void => void open.delete(pending.pop()!.key);
    while (pending.length > 0) {
      const current = pending[pending.length - 1]!;
      const key = current.key;
      if (known.has(key)) {
        done();
        continue;
      }
      let level = own.get(key);
      if (level === undefined) {
        const made: Level = { names: new Set(), spreads: [], undeclared: false };
        level = made;
        const lists: { readonly selections: readonly SelectionNode[]; readonly on: CompositeCost }[] = [{ selections: current.set.selections, on: current.on }];
        // What a condition on another interface or union holds is priced by that type's classes: read inside it too.
        const inside = (condition: string): CompositeCost | undefined => {
          made.names.add(condition);
          return condition === type.name ? type : abstractNamed(this.costs, condition);
        };
        while (lists.length > 0) {
          const { selections, on } = lists.pop()!;
          for (const selection of selections) {
            if (selection.kind === Kind.FIELD) {
              // A field the type does not declare (validation off) runs on the types that have it: they are told apart by it.
              if (!declares(on, selection.name.value)) made.undeclared = true;
            } else if (selection.kind === Kind.INLINE_FRAGMENT) {
              const condition = selection.typeCondition?.name.value;
              const below = condition === undefined ? on : condition === type.name ? type : inside(condition);
              if (below !== undefined) lists.push({ selections: selection.selectionSet.selections, on: below });
            } else if (selection.kind === Kind.FRAGMENT_SPREAD) {
              const fragment = this.fragments.get(selection.name.value);
              if (fragment === undefined) continue;
              const condition = fragment.typeCondition.name.value;
              const below = condition === type.name ? type : inside(condition);
              if (below !== undefined) {
                const spreadKey = keyOf(fragment.selectionSet, below);
                if (spreadKey < 0) made.undeclared = true;
                else made.spreads.push({ set: fragment.selectionSet, on: below, key: spreadKey });
              }
            }
          }
        }
        made.names.delete(type.name);
        own.set(key, made);
      }
      let names: Set<string> | null = level.names;
      let blocked = false;
      for (const spread of level.undeclared ? [] : level.spreads) {
        const below = known.get(spread.key);
        if (below === undefined) {
          // A fragment spread inside itself (an invalid operation): every type is priced.
          if (open.has(spread.key)) {
            names = null;
            break;
          }
          pending.push(spread);
          open.add(spread.key);
          blocked = true;
          break;
        }
        if (below === null) {
          names = null;
          break;
        }
        if (below.size > 0) {
          if (names === level.names) names = new Set(names);
          for (const name of below) names.add(name);
        }
      }
      if (blocked) continue;
      known.set(key, level.undeclared ? null : names);
      done();
    }
    return known.get(rootKey) ?? null;
  }
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
