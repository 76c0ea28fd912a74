import { Kind } from 'graphql';
import type { FieldNode, FragmentDefinitionNode, SelectionNode, SelectionSetNode } from 'graphql';
import type { FetchCounts } from './fetch-counts.js';
import type { CompositeCost, FieldCost } from './schema-costs.js';
import { included } from './selections.js';

/**
 * What bounds a gateway's fetches besides which subgraphs serve each field
 * (`FieldCost.graphs`): how each subgraph finds an entity, and where a
 * subgraph's part depends on more than the supergraph says.
 */
export interface FederationModel {
  /** By type name (objects and interfaces). */
  readonly types: ReadonlyMap<string, FederatedType>;
  /** The root types' names. */
  readonly roots: ReadonlySet<string>;
}

export interface FederatedType {
  /** The subgraphs that hold the type, one bit each. */
  readonly graphs: bigint;
  /** Per field name: the subgraphs that serve it. */
  readonly fields: ReadonlyMap<string, bigint>;
  /**
   * Per subgraph (one bit): the keys a gateway finds the type by there, each
   * the names of its top-level fields. A subgraph without keys is never
   * fetched an entity from.
   */
  readonly keys: ReadonlyMap<bigint, readonly (readonly string[])[]>;
  /** An interface: the subgraphs that hold it as an object type (`@interfaceObject`), which cannot tell an object's own type. */
  readonly interfaceObjects: bigint;
  /** Per field name: the subgraphs that serve it or not by a progressive override's label, both sides. */
  readonly labelled: ReadonlyMap<string, bigint>;
}

/**
 * What a selection needs of an object: subgraphs it must be fetched from,
 * sets of which any one will do, and fetches of their own (each side of a
 * label, per field).
 */
interface Needs {
  readonly required: bigint;
  readonly choices: readonly bigint[];
  readonly separate: number;
}

const NONE: Needs = Object.freeze({ required: 0n, choices: Object.freeze([]), separate: 0 });

function lowest(graphs: bigint): bigint {
  return graphs & -graphs;
}

function bits(mask: bigint): number {
  let count = 0;
  for (let m = mask; m !== 0n; m &= m - 1n) count++;
  return count;
}

/**
 * Federation, where the gateway's plan is not known before it runs (Hive
 * Gateway's planner decides as it goes): a bound on the fetches any plan
 * makes per object. An object comes from one subgraph that serves its field
 * (a root field: the one that leaves the fewest fetches, as both gateways
 * choose; any other: the one that leaves the most). It is then fetched once
 * more from every subgraph in the smallest set that serves what is selected
 * on it: every subgraph of a field the producer does not serve (one of them
 * for a field several serve; each of them for an object field the producer
 * serves without all that is selected on it), one of the object's own
 * subgraphs when the producer cannot tell its type (an `@interfaceObject`),
 * the subgraphs a `@requires` field waits for, and every subgraph a key must
 * come from to reach any of these. A field a progressive override's label
 * moves costs a fetch from each side besides (the producer included: the
 * label is drawn wherever the planner reads it).
 *
 * Each selection set (and fragment) is read once per type and producers.
 */
export class EntityFetches implements FetchCounts {
  private readonly needs = new Map<SelectionSetNode, Map<string, Needs>>();
  /** Per field and its selection set (or the list of those merged): the answer, asked again for every object of a response. */
  private readonly answers = new Map<FieldCost, Map<SelectionSetNode | readonly (SelectionSetNode | undefined)[], number>>();
  private readonly types = new Map<SelectionSetNode | readonly (SelectionSetNode | undefined)[], readonly CompositeCost[]>();
  private readonly expanding = new Set<string>();
  private readonly possible = new Map<CompositeCost, Map<string, CompositeCost>>();
  private readonly fragmentConditions = new Map<string, Set<string>>();
  private readonly indexes = new Map<SelectionSetNode, SetIndex>();
  private readonly servedSets = new Map<SelectionSetNode, Map<string, boolean>>();
  private readonly reaches: Map<string, ReadonlyMap<bigint, bigint>>;

  constructor(
    private readonly model: FederationModel,
    private readonly fragments: ReadonlyMap<string, FragmentDefinitionNode>,
    private readonly variables: Readonly<Record<string, unknown>>,
  ) {
    this.reaches = reachesOf(model);
  }

  perObject(parent: CompositeCost, field: FieldCost, _node: FieldNode, selectionSets: readonly (SelectionSetNode | undefined)[]): number {
    const target = field.target;
    if (field.graphs === 0n || target === null) return 0;
    const only = selectionSets.length === 1 ? selectionSets[0] : selectionSets;
    const known = only === undefined ? undefined : this.answers.get(field)?.get(only);
    if (known !== undefined) return known;
    const root = this.model.roots.has(parent.name);
    let most = 0;
    for (const type of this.typesOf(target, selectionSets)) {
      let chosen = root ? Infinity : 0;
      for (let rest = field.graphs; rest !== 0n; rest &= rest - 1n) {
        const count = this.fetchesFrom(target, type, lowest(rest), selectionSets);
        chosen = root ? Math.min(chosen, count) : Math.max(chosen, count);
      }
      most = Math.max(most, chosen);
    }
    // A field several subgraphs serve, none all that is selected on it: its objects may come from each of them.
    if (!root && (field.graphs & (field.graphs - 1n)) !== 0n && !this.servesAll(target, selectionSets, field.graphs)) most += bits(field.graphs) - 1;
    if (only !== undefined) {
      let byNode = this.answers.get(field);
      if (byNode === undefined) this.answers.set(field, (byNode = new Map()));
      byNode.set(only, most);
    }
    return most;
  }

  /** The fetches an object of `type` (returned as `target`) from `producer` needs for the selection. */
  private fetchesFrom(target: CompositeCost, type: CompositeCost, producer: bigint, selectionSets: readonly (SelectionSetNode | undefined)[]): number {
    let producers = producer;
    let required = 0n;
    const own = this.model.types.get(type.name);
    if (own !== undefined && (own.graphs & producer) === 0n && target.fields === null) {
      // The producer holds the abstract type as an object: one of the type's subgraphs tells the object's type, found by the abstract type's keys.
      const reach = this.reach(target, producer);
      const owner = widest(own.graphs, reach);
      required = owner | (reach.get(owner) ?? 0n);
      producers |= owner;
    }
    const choices = new Set<bigint>();
    let separate = 0;
    for (const set of selectionSets) {
      if (set === undefined) continue;
      const needs = this.needsOf(set, type, producers);
      required |= needs.required;
      for (const choice of needs.choices) choices.add(choice);
      separate += needs.separate;
    }
    const reach = this.reach(type, producers);
    for (const choice of choices) if ((choice & (required | producers)) === 0n) required |= widest(choice, reach);
    let all = required;
    for (let rest = required & ~producers; rest !== 0n; rest &= rest - 1n) all |= reach.get(lowest(rest)) ?? 0n;
    return bits(all) + separate;
  }

  /**
   * Per subgraph an object of `type` can be fetched from, starting from
   * `producers`: the subgraphs its keys must come from first (0n when the
   * producers hold one of its keys). A subgraph none of whose keys can be
   * had is missing.
   */
  private reach(type: CompositeCost, producers: bigint): ReadonlyMap<bigint, bigint> {
    const key = `${type.name}:${producers}`;
    let known = this.reaches.get(key);
    if (known === undefined) this.reaches.set(key, (known = reach(this.model.types.get(type.name), producers)));
    return known;
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
   * What the selection needs on an object of `type` that `producers` hold.
   * Only the fragments whose condition applies to `type` are read: a set of
   * fragments on a thousand types costs each type its own.
   */
  private needsOf(selectionSet: SelectionSetNode, type: CompositeCost, producers: bigint): Needs {
    const key = `${type.index}:${producers}`;
    let byKey = this.needs.get(selectionSet);
    const known = byKey?.get(key);
    if (known !== undefined) return known;
    let required = 0n;
    const choices = new Set<bigint>();
    let separate = 0;
    const add = (selection: SelectionNode): void => {
      const needs = this.selectionNeeds(selection, type, producers);
      required |= needs.required;
      for (const choice of needs.choices) choices.add(choice);
      separate += needs.separate;
    };
    if (type.fields !== null) {
      const index = this.indexOf(selectionSet);
      for (const selection of index.always) add(selection);
      const addAll = (condition: string): void => {
        for (const selection of index.byCondition.get(condition) ?? []) add(selection);
      };
      if (index.byCondition.size > 0) {
        addAll(type.name);
        if (index.byCondition.size <= type.abstractTypes.size) {
          for (const condition of index.byCondition.keys()) if (type.abstractTypes.has(condition)) addAll(condition);
        } else {
          for (const condition of type.abstractTypes) addAll(condition);
        }
      }
    }
    const needs = required === 0n && choices.size === 0 && separate === 0 ? NONE : { required, choices: [...choices], separate };
    if (byKey === undefined) this.needs.set(selectionSet, (byKey = new Map()));
    byKey.set(key, needs);
    return needs;
  }

  /** One selection that applies to `type`: a field's needs, or what a fragment's selections need. */
  private selectionNeeds(selection: SelectionNode, type: CompositeCost, producers: bigint): Needs {
    if (selection.kind === Kind.FIELD) return this.fieldNeeds(type, selection, producers);
    if (selection.kind === Kind.INLINE_FRAGMENT) return this.needsOf(selection.selectionSet, type, producers);
    const name = selection.name.value;
    const fragment = this.fragments.get(name);
    if (fragment === undefined || this.expanding.has(name)) return NONE;
    this.expanding.add(name);
    const needs = this.needsOf(fragment.selectionSet, type, producers);
    this.expanding.delete(name);
    return needs;
  }

  private fieldNeeds(type: CompositeCost, node: FieldNode, producers: bigint): Needs {
    const name = node.name.value;
    const field = type.fields?.get(name);
    if (field === undefined || field.graphs === 0n) return NONE;
    const graphs = field.graphs;
    let required = 0n;
    const choices: bigint[] = [];
    const need = (from: bigint): void => {
      if ((from & (from - 1n)) === 0n) required |= from;
      else choices.push(from);
    };
    // A label may send the field to either side, whichever serves the object, and is drawn anew wherever it is read: each side a fetch of its own.
    const labelled = this.model.types.get(type.name)?.labelled.get(name) ?? 0n;
    if (labelled === 0n) {
      if ((graphs & producers) === 0n) need(graphs);
      else if (field.target !== null && node.selectionSet !== undefined && (graphs & ~producers) !== 0n && !this.servesAll(field.target, [node.selectionSet], graphs & producers)) {
        // A field the producer serves, but not all that is selected on it: the gateway may take it from each other subgraph too.
        required |= graphs & ~producers;
      }
    }
    if (field.requiredGraphs !== null) {
      // Fetched again, on its own, once what it requires has arrived from its subgraphs.
      required |= lowest(graphs & producers) || lowest(graphs);
      for (const from of field.requiredGraphs) if (from !== 0n && (from & producers) === 0n) need(from);
    }
    const separate = bits(labelled);
    return required === 0n && choices.length === 0 && separate === 0 ? NONE : { required, choices, separate };
  }

  /**
   * Whether one subgraph of `served` serves every field selected on an
   * object returned as `target` (its first level: through fragments, not
   * into the fields' own selections), none moved by a label.
   */
  private servesAll(target: CompositeCost, selectionSets: readonly (SelectionSetNode | undefined)[], served: bigint): boolean {
    for (const type of this.typesOf(target, selectionSets)) {
      for (let rest = served; rest !== 0n; rest &= rest - 1n) {
        const graph = lowest(rest);
        if (selectionSets.every((set) => set === undefined || this.served(set, type, graph))) return true;
      }
    }
    return false;
  }

  private served(selectionSet: SelectionSetNode, type: CompositeCost, graph: bigint): boolean {
    const key = `${type.index}:${graph}`;
    let byKey = this.servedSets.get(selectionSet);
    const known = byKey?.get(key);
    if (known !== undefined) return known;
    const labelled = this.model.types.get(type.name)?.labelled;
    const index = this.indexOf(selectionSet);
    const fields = type.fields;
    const serves = (selection: SelectionNode): boolean => {
      if (selection.kind === Kind.FIELD) {
        const field = fields?.get(selection.name.value);
        return field === undefined || field.graphs === 0n || ((field.graphs & graph) !== 0n && labelled?.get(selection.name.value) === undefined);
      }
      if (selection.kind === Kind.INLINE_FRAGMENT) return this.served(selection.selectionSet, type, graph);
      const fragment = this.fragments.get(selection.name.value);
      if (fragment === undefined || this.expanding.has(selection.name.value)) return true;
      this.expanding.add(selection.name.value);
      const answer = this.served(fragment.selectionSet, type, graph);
      this.expanding.delete(selection.name.value);
      return answer;
    };
    let answer = index.always.every(serves);
    for (const [condition, selections] of index.byCondition) {
      if (!answer) break;
      if (condition === type.name || type.abstractTypes.has(condition)) answer = selections.every(serves);
    }
    if (byKey === undefined) this.servedSets.set(selectionSet, (byKey = new Map()));
    byKey.set(key, answer);
    return answer;
  }
}

interface SetIndex {
  readonly always: SelectionNode[];
  readonly byCondition: Map<string, SelectionNode[]>;
}

/** Where a model's reaches are kept: computed once per type and producers, for every operation priced against it. */
const modelReaches = new WeakMap<FederationModel, Map<string, ReadonlyMap<bigint, bigint>>>();

function reachesOf(model: FederationModel): Map<string, ReadonlyMap<bigint, bigint>> {
  let reaches = modelReaches.get(model);
  if (reaches === undefined) modelReaches.set(model, (reaches = new Map()));
  return reaches;
}

/** Of `candidates`, the subgraph whose keys take the most fetches to reach (a bound picks the dearest). */
function widest(candidates: bigint, reach: ReadonlyMap<bigint, bigint>): bigint {
  let best = lowest(candidates);
  let most = -1;
  for (let rest = candidates; rest !== 0n; rest &= rest - 1n) {
    const graph = lowest(rest);
    const count = bits(reach.get(graph) ?? 0n);
    if (count > most) {
      most = count;
      best = graph;
    }
  }
  return best;
}

/**
 * Breadth first from `producers`: a subgraph is reached once one of its keys
 * is had, each key field from the subgraphs that first serve it (all of
 * them, and what they took to reach); of several keys, the dearest counts.
 */
function reach(type: FederatedType | undefined, producers: bigint): ReadonlyMap<bigint, bigint> {
  const reached = new Map<bigint, bigint>();
  if (type === undefined) return reached;
  const via = new Map<string, bigint>();
  for (const [name, graphs] of type.fields) if ((graphs & producers) !== 0n) via.set(name, 0n);
  let visited = producers;
  for (;;) {
    const level: [bigint, bigint][] = [];
    for (const [graph, keys] of type.keys) {
      if ((graph & visited) !== 0n) continue;
      let dearest: bigint | undefined;
      for (const key of keys) {
        let providers = 0n;
        let had = true;
        for (const name of key) {
          const from = via.get(name);
          if (from === undefined) {
            had = false;
            break;
          }
          providers |= from;
        }
        if (had && (dearest === undefined || bits(providers) > bits(dearest))) dearest = providers;
      }
      if (dearest !== undefined) level.push([graph, dearest]);
    }
    if (level.length === 0) return reached;
    const added = new Map<string, bigint>();
    for (const [graph, providers] of level) {
      reached.set(graph, providers);
      visited |= graph;
      for (const [name, graphs] of type.fields) {
        if ((graphs & graph) === 0n || via.has(name)) continue;
        added.set(name, (added.get(name) ?? 0n) | graph | providers);
      }
    }
    for (const [name, from] of added) via.set(name, from);
  }
}
