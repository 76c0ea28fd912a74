import { Kind } from 'graphql';
import type { FragmentDefinitionNode, SelectionNode, SelectionSetNode } from 'graphql';
import type { CompositeCost, FieldCost } from './schema-costs.js';
import { included } from './selections.js';

/** The lowest bit of a subgraph mask: the subgraph a planner would fetch such a field from. */
function lowest(graphs: bigint): bigint {
  return graphs & -graphs;
}

function bits(mask: bigint): number {
  let count = 0;
  for (let m = mask; m !== 0n; m &= m - 1n) count++;
  return count;
}

/**
 * Federation: how many entity fetches each object a field returns costs a
 * gateway. The object comes from the subgraphs that resolve the field; every
 * other subgraph that resolves a field selected on it is one more fetch
 * (`_entities`) per object, and a field with `@requires` is fetched on its
 * own after what it requires, from wherever that comes. This is the work
 * Apollo Router's planned cost counts per fetch, here counted per object,
 * so it scales with the lists that produce the entities.
 *
 * Each selection set (and fragment) is read once per type and subgraphs.
 */
export class EntityFetches {
  private readonly masks = new Map<SelectionSetNode, Map<string, bigint>>();
  /** Per field and its selection set (or the list of those merged): the answer, asked again for every object of a response. */
  private readonly answers = new Map<FieldCost, Map<SelectionSetNode | readonly (SelectionSetNode | undefined)[], number>>();
  private readonly types = new Map<SelectionSetNode | readonly (SelectionSetNode | undefined)[], readonly CompositeCost[]>();
  private readonly expanding = new Set<string>();
  private readonly possible = new Map<CompositeCost, Map<string, CompositeCost>>();
  private readonly fragmentConditions = new Map<string, Set<string>>();
  private readonly indexes = new Map<SelectionSetNode, SetIndex>();

  constructor(
    private readonly fragments: ReadonlyMap<string, FragmentDefinitionNode>,
    private readonly variables: Readonly<Record<string, unknown>>,
  ) {}

  /** Fetches per object `field` returns, for its selection sets (several where fields of one response key merge). */
  perObject(field: FieldCost, selectionSets: readonly (SelectionSetNode | undefined)[]): number {
    const target = field.target;
    if (field.graphs === 0n || target === null) return 0;
    const only = selectionSets.length === 1 ? selectionSets[0] : selectionSets;
    const known = only === undefined ? undefined : this.answers.get(field)?.get(only);
    if (known !== undefined) return known;
    let most = 0;
    for (const type of this.typesOf(target, selectionSets)) {
      // A field several subgraphs resolve (@shareable) comes from one of them, the one that leaves the fewest fetches.
      let fewest = Infinity;
      for (let rest = field.graphs; rest !== 0n; rest &= rest - 1n) {
        const producer = lowest(rest);
        let mask = 0n;
        for (const set of selectionSets) if (set !== undefined) mask |= this.mask(set, type, producer);
        fewest = Math.min(fewest, bits(mask));
      }
      most = Math.max(most, fewest);
    }
    if (only !== undefined) {
      let byNode = this.answers.get(field);
      if (byNode === undefined) this.answers.set(field, (byNode = new Map()));
      byNode.set(only, most);
    }
    return most;
  }

  /**
   * An object type, or for an interface or union one type per class of its
   * possible types and each type a condition names: the walk never goes over
   * every possible type of a type with thousands.
   */
  private typesOf(target: CompositeCost, selectionSets: readonly (SelectionSetNode | undefined)[]): readonly CompositeCost[] {
    if (target.fields !== null) return [target];
    const only = selectionSets.length === 1 ? selectionSets[0] : selectionSets;
    const known = only === undefined ? undefined : this.types.get(only);
    if (known !== undefined) return known;
    const types = new Set(target.representatives ?? []);
    const named = new Set<string>();
    for (const set of selectionSets) if (set !== undefined) for (const name of this.conditions(set.selections)) named.add(name);
    let byName = this.possible.get(target);
    if (byName === undefined) this.possible.set(target, (byName = new Map((target.possibleTypes ?? []).map((t) => [t.name, t]))));
    for (const name of named) {
      const possible = byName.get(name);
      if (possible !== undefined) types.add(possible);
    }
    const result = [...types];
    if (only !== undefined) this.types.set(only, result);
    return result;
  }

  /** The type conditions a selection names, through inline fragments and the fragments it spreads (each fragment read once). */
  private conditions(selections: readonly SelectionNode[], into = new Set<string>()): Set<string> {
    for (const selection of selections) {
      if (selection.kind === Kind.INLINE_FRAGMENT) {
        if (selection.typeCondition !== undefined) into.add(selection.typeCondition.name.value);
        this.conditions(selection.selectionSet.selections, into);
      } else if (selection.kind === Kind.FRAGMENT_SPREAD) {
        const name = selection.name.value;
        let known = this.fragmentConditions.get(name);
        if (known === undefined) {
          const fragment = this.fragments.get(name);
          // Registered first: a fragment spread inside itself is invalid, and must not loop.
          this.fragmentConditions.set(name, (known = new Set()));
          if (fragment !== undefined) {
            known.add(fragment.typeCondition.name.value);
            this.conditions(fragment.selectionSet.selections, known);
          }
        }
        for (const condition of known) into.add(condition);
      }
    }
    return into;
  }

  /**
   * A selection set's selections that `@skip`/`@include` leave in, split by
   * what they apply to: the fields and the fragments without a type
   * condition (every type), and the fragments by the type they name.
   */
  private indexOf(selectionSet: SelectionSetNode): SetIndex {
    let index = this.indexes.get(selectionSet);
    if (index !== undefined) return index;
    index = { always: [], byCondition: new Map() };
    for (const selection of selectionSet.selections) {
      if (selection.directives !== undefined && selection.directives.length > 0 && !included(selection.directives, this.variables)) continue;
      let condition: string | undefined;
      if (selection.kind === Kind.INLINE_FRAGMENT) condition = selection.typeCondition?.name.value;
      else if (selection.kind === Kind.FRAGMENT_SPREAD) condition = this.fragments.get(selection.name.value)?.typeCondition.name.value;
      if (condition === undefined) {
        if (selection.kind !== Kind.FRAGMENT_SPREAD) index.always.push(selection);
        continue;
      }
      let list = index.byCondition.get(condition);
      if (list === undefined) index.byCondition.set(condition, (list = []));
      list.push(selection);
    }
    this.indexes.set(selectionSet, index);
    return index;
  }

  /**
   * The subgraphs besides `producers` that the selection needs fetched on an
   * object of `type`. Only the fragments whose condition applies to `type`
   * are read: a set of fragments on a thousand types costs each type its own.
   */
  private mask(selectionSet: SelectionSetNode, type: CompositeCost, producers: bigint): bigint {
    const key = `${type.index}:${producers}`;
    let byKey = this.masks.get(selectionSet);
    const known = byKey?.get(key);
    if (known !== undefined) return known;
    let mask = 0n;
    if (type.fields !== null) {
      const index = this.indexOf(selectionSet);
      for (const selection of index.always) mask |= this.selectionMask(selection, type, producers);
      const add = (condition: string): void => {
        for (const selection of index.byCondition.get(condition) ?? []) mask |= this.selectionMask(selection, type, producers);
      };
      if (index.byCondition.size > 0) {
        add(type.name);
        if (index.byCondition.size <= type.abstractTypes.size) {
          for (const condition of index.byCondition.keys()) if (type.abstractTypes.has(condition)) add(condition);
        } else {
          for (const condition of type.abstractTypes) add(condition);
        }
      }
    }
    if (byKey === undefined) this.masks.set(selectionSet, (byKey = new Map()));
    byKey.set(key, mask);
    return mask;
  }

  /** One selection that applies to `type`: a field's subgraphs, or what a fragment's selections need. */
  private selectionMask(selection: SelectionNode, type: CompositeCost, producers: bigint): bigint {
    if (selection.kind === Kind.FIELD) return fieldMask(type.fields?.get(selection.name.value), producers);
    if (selection.kind === Kind.INLINE_FRAGMENT) return this.mask(selection.selectionSet, type, producers);
    const name = selection.name.value;
    const fragment = this.fragments.get(name);
    if (fragment === undefined || this.expanding.has(name)) return 0n;
    this.expanding.add(name);
    const mask = this.mask(fragment.selectionSet, type, producers);
    this.expanding.delete(name);
    return mask;
  }
}

interface SetIndex {
  readonly always: SelectionNode[];
  readonly byCondition: Map<string, SelectionNode[]>;
}

function fieldMask(field: FieldCost | undefined, producers: bigint): bigint {
  if (field === undefined || field.graphs === 0n) return 0n;
  let mask = (field.graphs & producers) === 0n ? lowest(field.graphs) : 0n;
  if (field.requiredGraphs !== null) {
    // Fetched again, on its own, once what it requires has arrived from its subgraphs.
    mask |= lowest(field.graphs & producers) || lowest(field.graphs);
    for (const graphs of field.requiredGraphs) if (graphs !== 0n && (graphs & producers) === 0n) mask |= lowest(graphs);
  }
  return mask;
}
