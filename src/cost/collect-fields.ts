import { Kind } from 'graphql';
import type { FieldNode, FragmentDefinitionNode, SelectionNode, SelectionSetNode } from 'graphql';
import type { CompositeCost, FieldCost, SchemaCosts } from './schema-costs.js';
import { applies, included } from './selections.js';

/*
 * graphql-js CollectFields, for pricing: the fields of one selection set on
 * an object type, by response key, after inline fragments, fragment spreads
 * and `@skip`/`@include`. Fields sharing a response key run once, with the
 * first one's arguments and all their sub-selections merged, so they are
 * priced once.
 *
 * To stay linear however often a fragment is spread, a fragment is kept
 * whole in the plan that spreads it (a `SpreadItem`, priced once per type
 * and reused): only the response keys it shares with the rest of that
 * selection set are taken out of it and merged there. Plans are built
 * without recursion, so no nesting of fragments overflows the stack.
 */

/** Selection sets whose fields merge: a field's own, or those of every field sharing one response key. Equal content, one group. */
export interface Group {
  readonly id: number;
  readonly selectionSets: readonly SelectionSetNode[];
  readonly plans: Map<CompositeCost, Plan>;
}

/** One response key: the fields that share it, priced as the first with their sub-selections merged. */
export interface FieldItem {
  readonly spread: false;
  readonly key: string;
  readonly field: FieldCost;
  /** Every field node of this key, in execution order; the first one's arguments run. */
  readonly nodes: readonly FieldNode[];
  /** The merged sub-selections, or null for a leaf. */
  readonly child: Group | null;
}

/** A fragment spread priced whole, but for the response keys `excluded` (merged in the plan that spreads it). */
export interface SpreadItem {
  readonly spread: true;
  readonly plan: Plan;
  readonly excluded: Exclusion | null;
}

export interface Exclusion {
  readonly keys: ReadonlySet<string>;
  /** The keys, sorted and joined: equal for equal exclusions, for memo keys. */
  readonly id: string;
}

export type PlanItem = FieldItem | SpreadItem;

/** CollectFields of one group on one object type. */
export interface Plan {
  readonly id: number;
  readonly group: Group;
  readonly type: CompositeCost;
  readonly items: readonly PlanItem[];
  /** This plan's own field items by response key. */
  readonly byKey: ReadonlyMap<string, FieldItem>;
  /** Every response key the plan produces, its spreads' included; built when first asked. */
  keys: ReadonlySet<string> | null;
}

interface Scan {
  readonly group: Group;
  readonly type: CompositeCost;
  /** Fragment plans this one waits for. */
  readonly spreads: SelectionSetNode[];
}

export class FieldCollector {
  private readonly groups = new Map<string, Group>();
  /** Content numbers for selection sets the document numbering did not reach (a hand-built document holding itself). */
  private readonly extraIds = new Map<SelectionSetNode, number>();
  private readonly shared = new Map<string, readonly string[]>();
  private plans = 0;

  constructor(
    private readonly costs: SchemaCosts,
    private readonly fragments: ReadonlyMap<string, FragmentDefinitionNode>,
    private readonly variables: Readonly<Record<string, unknown>>,
    private readonly contentIds: ReadonlyMap<SelectionSetNode, number>,
  ) {}

  /** The group of these selection sets: sets of equal content (`a: f { x } a: f { x }`) count once, as they price alike. */
  group(selectionSets: readonly SelectionSetNode[]): Group {
    let key = '';
    const kept: SelectionSetNode[] = [];
    const seen = selectionSets.length > 1 ? new Set<number>() : null;
    for (const selectionSet of selectionSets) {
      const id = this.contentId(selectionSet);
      if (seen !== null) {
        if (seen.has(id)) continue;
        seen.add(id);
      }
      kept.push(selectionSet);
      key += `${id},`;
    }
    let group = this.groups.get(key);
    if (group === undefined) {
      group = { id: this.groups.size, selectionSets: kept, plans: new Map() };
      this.groups.set(key, group);
    }
    return group;
  }

  /** Whether a group's content sits at one place only: then nothing reads a memo entry of it twice. */
  contentIdOf(group: Group): number | undefined {
    return group.selectionSets.length === 1 ? this.contentIds.get(group.selectionSets[0]!) : undefined;
  }

  /** The plan of `group` on the object type `type`, with those of the fragments it spreads. */
  plan(group: Group, type: CompositeCost): Plan {
    const known = group.plans.get(type);
    if (known !== undefined) return known;
    // Depth first without recursion: a plan is built once the plans of the fragments it spreads are.
    const pending: Scan[] = [{ group, type, spreads: this.spreadsOf(group, type) }];
    const open = new Set<Group>([group]);
    while (pending.length > 0) {
      const top = pending[pending.length - 1]!;
      let waiting = false;
      while (top.spreads.length > 0) {
        const fragmentGroup = this.group([top.spreads[top.spreads.length - 1]!]);
        if (fragmentGroup.plans.has(type) || open.has(fragmentGroup)) {
          top.spreads.pop();
          continue;
        }
        pending.push({ group: fragmentGroup, type, spreads: this.spreadsOf(fragmentGroup, type) });
        open.add(fragmentGroup);
        waiting = true;
        break;
      }
      if (waiting) continue;
      pending.pop();
      open.delete(top.group);
      top.group.plans.set(type, this.build(top.group, type));
    }
    return group.plans.get(type)!;
  }

  /** Every response key `plan` produces, through its spreads. */
  keysOf(plan: Plan): ReadonlySet<string> {
    if (plan.keys !== null) return plan.keys;
    const keys = new Set<string>();
    const seen = new Set<Plan>([plan]);
    const pending: Plan[] = [plan];
    for (let current = pending.pop(); current !== undefined; current = pending.pop()) {
      if (current.keys !== null && current !== plan) {
        for (const key of current.keys) keys.add(key);
        continue;
      }
      for (const item of current.items) {
        if (!item.spread) keys.add(item.key);
        else if (!seen.has(item.plan)) {
          seen.add(item.plan);
          pending.push(item.plan);
        }
      }
    }
    plan.keys = keys;
    return keys;
  }

  /** The field nodes `plan` holds under `key`, in execution order (none when it has no such key). */
  private nodesOf(plan: Plan, key: string): readonly FieldNode[] {
    for (let current: Plan | null = plan; current !== null; ) {
      const own = current.byKey.get(key);
      if (own !== undefined) return own.nodes;
      let next: Plan | null = null;
      for (const item of current.items) {
        if (item.spread && this.keysOf(item.plan).has(key)) {
          next = item.plan;
          break;
        }
      }
      current = next;
    }
    return [];
  }

  /** The response keys two fragment plans share. */
  private sharedKeys(a: Plan, b: Plan): readonly string[] {
    const id = a.id < b.id ? `${a.id},${b.id}` : `${b.id},${a.id}`;
    let keys = this.shared.get(id);
    if (keys === undefined) {
      const ka = this.keysOf(a);
      const kb = this.keysOf(b);
      const [small, large] = ka.size <= kb.size ? [ka, kb] : [kb, ka];
      const found: string[] = [];
      for (const key of small) if (large.has(key)) found.push(key);
      this.shared.set(id, (keys = found));
    }
    return keys;
  }

  /** The selection sets of the fragments `group` spreads on `type` (those its plan needs first). */
  private spreadsOf(group: Group, type: CompositeCost): SelectionSetNode[] {
    const spreads: SelectionSetNode[] = [];
    this.walk(group, type, null, (fragment) => void spreads.push(fragment.selectionSet));
    return spreads;
  }

  private build(group: Group, type: CompositeCost): Plan {
    const fields = type.fields ?? new Map<string, FieldCost>();
    // In execution order: each field node, and each fragment spread (as its plan).
    const sequence: (FieldNode | Plan)[] = [];
    const own = new Map<string, FieldNode[]>();
    const spreadPlans: Plan[] = [];
    this.walk(
      group,
      type,
      (node) => {
        const key = node.alias?.value ?? node.name.value;
        const nodes = own.get(key);
        if (nodes === undefined) own.set(key, [node]);
        else nodes.push(node);
        sequence.push(node);
      },
      (fragment) => {
        const plan = this.group([fragment.selectionSet]).plans.get(type);
        // Absent only for a fragment spread inside itself (an invalid operation): cut there.
        if (plan === undefined) return;
        spreadPlans.push(plan);
        sequence.push(plan);
      },
    );

    // Keys that more than one part (own fields, each spread) holds: merged here, taken out of the spreads.
    let merged: Set<string> | null = null;
    if (spreadPlans.length > 0 && (own.size > 0 || spreadPlans.length > 1)) {
      for (const key of own.keys()) {
        for (const plan of spreadPlans) {
          if (this.keysOf(plan).has(key)) {
            (merged ??= new Set()).add(key);
            break;
          }
        }
      }
      for (let i = 0; i < spreadPlans.length; i++) {
        for (let j = i + 1; j < spreadPlans.length; j++) {
          for (const key of this.sharedKeys(spreadPlans[i]!, spreadPlans[j]!)) (merged ??= new Set()).add(key);
        }
      }
    }

    let mergedNodes: Map<string, FieldNode[]> | null = null;
    if (merged !== null) {
      mergedNodes = new Map();
      for (const key of merged) mergedNodes.set(key, []);
      for (const part of sequence) {
        if ('kind' in part) {
          const key = part.alias?.value ?? part.name.value;
          mergedNodes.get(key)?.push(part);
        } else {
          for (const key of merged) if (this.keysOf(part).has(key)) mergedNodes.get(key)!.push(...this.nodesOf(part, key));
        }
      }
    }

    const items: PlanItem[] = [];
    const byKey = new Map<string, FieldItem>();
    const addField = (key: string, nodes: readonly FieldNode[]): void => {
      const first = nodes[0]!;
      const name = first.name.value;
      const field = fields.get(name) ?? this.costs.metaFields.get(name);
      if (field === undefined) return;
      let child: Group | null = null;
      if (field.target !== null) {
        const sets: SelectionSetNode[] = [];
        for (const node of nodes) if (node.selectionSet !== undefined) sets.push(node.selectionSet);
        if (sets.length > 0) child = this.group(sets);
      }
      const item: FieldItem = { spread: false, key, field, nodes, child };
      items.push(item);
      byKey.set(key, item);
    };
    for (const [key, nodes] of own) if (merged === null || !merged.has(key)) addField(key, nodes);
    if (mergedNodes !== null) for (const [key, nodes] of mergedNodes) addField(key, nodes);
    for (const plan of spreadPlans) {
      let excluded: Exclusion | null = null;
      if (merged !== null) {
        const keys = this.keysOf(plan);
        const out: string[] = [];
        for (const key of merged) if (keys.has(key)) out.push(key);
        if (out.length > 0) excluded = { keys: new Set(out), id: out.sort().join('\u0000') };
      }
      items.push({ spread: true, plan, excluded });
    }
    return { id: this.plans++, group, type, items, byKey, keys: null };
  }

  /**
   * The selections of `group` that apply to `type`, in execution order: each
   * included field to `onField`, each fragment spread (once per name, as
   * graphql-js collects them) whose type condition applies to `onSpread`.
   */
  private walk(
    group: Group,
    type: CompositeCost,
    onField: ((node: FieldNode) => void) | null,
    onSpread: (fragment: FragmentDefinitionNode) => void,
  ): void {
    const visited = new Set<string>();
    const lists: (readonly SelectionNode[])[] = [];
    const cursors: number[] = [];
    const sets = group.selectionSets;
    for (let s = sets.length - 1; s >= 0; s--) {
      lists.push(sets[s]!.selections);
      cursors.push(0);
    }
    const variables = this.variables;
    while (lists.length > 0) {
      const top = lists.length - 1;
      const list = lists[top]!;
      const cursor = cursors[top]!;
      if (cursor >= list.length) {
        lists.pop();
        cursors.pop();
        continue;
      }
      cursors[top] = cursor + 1;
      const selection = list[cursor]!;
      if (selection.directives !== undefined && selection.directives.length > 0 && !included(selection.directives, variables)) continue;
      if (selection.kind === Kind.FIELD) {
        onField?.(selection);
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        if (selection.typeCondition === undefined || applies(selection.typeCondition.name.value, type)) {
          lists.push(selection.selectionSet.selections);
          cursors.push(0);
        }
      } else {
        const name = selection.name.value;
        if (visited.has(name)) continue;
        visited.add(name);
        const fragment = this.fragments.get(name);
        if (fragment !== undefined && applies(fragment.typeCondition.name.value, type)) onSpread(fragment);
      }
    }
  }

  private contentId(selectionSet: SelectionSetNode): number {
    const id = this.contentIds.get(selectionSet);
    if (id !== undefined) return id;
    let extra = this.extraIds.get(selectionSet);
    // Past every document number: never equal to one.
    if (extra === undefined) this.extraIds.set(selectionSet, (extra = -1 - this.extraIds.size));
    return extra;
  }
}
