import { Kind } from 'graphql';
import type { DirectiveNode, FieldNode, FragmentDefinitionNode, SelectionNode, SelectionSetNode } from 'graphql';
import type { CompositeCost, FieldCost, SchemaCosts } from './schema-costs.js';
import { applies, declares, included, possibleTypesOf } from './selections.js';

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
 * selection set are taken out of it and merged there. Fragments spread
 * together are merged among themselves once (a combination), and a large
 * plan is a tree of segments, so a fragment less a key is priced again only
 * along that key's segments. A deferred fragment (`@defer`) merges with
 * nothing outside it: an executor with incremental delivery runs it apart.
 * Plans are built without recursion, so no nesting of fragments overflows
 * the stack.
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

/**
 * A fragment spread priced whole, but for the response keys `excluded`
 * (merged in the plan that spreads it); or, with `segment`, a part of a
 * large plan's items (see `finish`).
 */
export interface SpreadItem {
  readonly spread: true;
  readonly segment: boolean;
  /** A fragment under an active `@defer`: its keys merge with nothing outside it. */
  readonly deferred: boolean;
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
  /** The shallowest open plan this one, or one it spreads, was cut at (a fragment spread inside itself): its own depth when none. */
  low: number;
}

/** A plan cut at a fragment still open where it was built: right only below that fragment. */
interface PartialPlan {
  readonly plan: Plan;
  /** The open fragment it was cut at, or null when that is no longer known. */
  readonly cutAt: Group | null;
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

/** Items per segment of a large plan. */
const SEGMENT = 16;

/** The keys of `merged` that `plan` holds, as an exclusion; null for none. */
function exclusionOf(merged: ReadonlySet<string> | null, plan: Plan, collector: FieldCollector): Exclusion | null {
  if (merged === null) return null;
  const keys = collector.keysOf(plan);
  const out: string[] = [];
  for (const key of merged) if (keys.has(key)) out.push(key);
  return out.length === 0 ? null : { keys: new Set(out), id: out.sort().join('\u0000') };
}

/** A selection list's positions: those without a type condition, and the others by the type they name. */
interface ConditionIndex {
  readonly always: number[];
  readonly byCondition: Map<string, number[]>;
}

/** A list with no type condition: every selection applies to every type. */
const NO_CONDITIONS: ConditionIndex = { always: [], byCondition: new Map() };

/**
 * A group on an abstract type, split: its plain fields (those each of its
 * selection sets selects on the abstract type itself, which it declares),
 * priced alike by every type of a class of it, and the rest (type
 * conditions, fragments, fields it does not declare), priced per type.
 */
interface Split {
  readonly plain: Group;
  readonly rest: Group;
  /** The plain field nodes by response key, each with its place: set index × 2^32 + position. */
  readonly plainNodes: ReadonlyMap<string, readonly { readonly at: number; readonly node: FieldNode }[]>;
  /** Per selection set of the group: the position of each of its other selections. */
  readonly positions: readonly ReadonlyMap<SelectionNode, number>[];
  /** The plan on each possible type priced so far. */
  readonly plans: Map<CompositeCost, Plan>;
}

const PLACE = 2 ** 32;

export class FieldCollector {
  private readonly groups = new Map<string, Group>();
  /** Content numbers for selection sets the document numbering did not reach (a hand-built document holding itself). */
  private readonly extraIds = new Map<SelectionSetNode, number>();
  private readonly shared = new Map<string, readonly string[]>();
  /** Plans of several fragments spread in one selection set, merged once for every set that spreads them together. */
  private readonly combinations = new Map<string, Plan>();
  /** Per selection list: the positions of the selections without a type condition, and of the others by the type they name. */
  private readonly conditionIndexes = new Map<readonly SelectionNode[], ConditionIndex>();
  private plans = 0;
  private groupCount = 0;
  /** Per group and abstract type (by number): how it splits, or null where it does not. */
  private readonly splits = new Map<number, Split | null>();
  /** While `walk` reads a selection of a group's own sets: that set's index and the selection (else -1). */
  private topSet = -1;
  private topSelection: SelectionNode | null = null;
  /** While `plan` builds: the plans it cut at a fragment spread inside itself. */
  private partial: Map<Group, PartialPlan> | null = null;

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
      group = { id: this.groupCount++, selectionSets: kept, plans: new Map() };
      this.groups.set(key, group);
    }
    return group;
  }

  /** Whether a group's content sits at one place only: then nothing reads a memo entry of it twice. */
  contentIdOf(group: Group): number | undefined {
    return group.selectionSets.length === 1 ? this.contentIds.get(group.selectionSets[0]!) : undefined;
  }

  /**
   * The plan of `group` on the object type `type`, with those of the
   * fragments it spreads, as graphql-js collects them for a field's
   * selection (a fresh set of visited fragments).
   *
   * A fragment spread inside itself (validation off) is cut where it is met
   * again: graphql-js skips a fragment it visited. A plan cut so is right
   * only below the fragment it was cut at, which holds the rest: it is kept
   * for this call alone, not as the fragment's plan (spread afresh
   * elsewhere, graphql-js runs the whole cycle from there).
   */
  plan(group: Group, type: CompositeCost): Plan {
    const known = group.plans.get(type);
    if (known !== undefined) return known;
    // Depth first without recursion: a plan is built once the plans of the fragments it spreads are.
    const pending: Scan[] = [{ group, type, spreads: this.spreadsOf(group, type), low: 0 }];
    const depths = new Map<Group, number>([[group, 0]]);
    const partial = new Map<Group, PartialPlan>();
    this.partial = partial;
    try {
      while (pending.length > 0) {
        const depth = pending.length - 1;
        const top = pending[depth]!;
        let waiting = false;
        while (top.spreads.length > 0) {
          const fragmentGroup = this.group([top.spreads[top.spreads.length - 1]!]);
          const open = depths.get(fragmentGroup);
          const cut = partial.get(fragmentGroup);
          if (open !== undefined || cut !== undefined) {
            const at = open ?? (cut!.cutAt === null ? undefined : depths.get(cut!.cutAt));
            top.low = Math.min(top.low, at ?? -1);
          }
          if (fragmentGroup.plans.has(type) || open !== undefined || cut !== undefined) {
            top.spreads.pop();
            continue;
          }
          pending.push({ group: fragmentGroup, type, spreads: this.spreadsOf(fragmentGroup, type), low: depth + 1 });
          depths.set(fragmentGroup, depth + 1);
          waiting = true;
          break;
        }
        if (waiting) continue;
        pending.pop();
        depths.delete(top.group);
        if (depth > 0 && top.low < depth) {
          // Cut at a fragment above it: a plan of this call only, under a group of its own.
          const cutAt = top.low >= 0 ? pending[top.low]!.group : null;
          partial.set(top.group, { plan: this.build(top.group, type, this.syntheticGroup()), cutAt });
          const parent = pending[depth - 1]!;
          parent.low = Math.min(parent.low, top.low);
        } else {
          top.group.plans.set(type, this.build(top.group, type, top.group));
        }
      }
    } finally {
      this.partial = null;
    }
    return group.plans.get(type)!;
  }

  /**
   * The plan of `group` on `type`, a possible type of the interface or
   * union `abstract` the group selects on: its plain fields as one plan on
   * the first type of `type`'s class, which prices them alike (so they are
   * priced once per class, however many types its conditions name), beside
   * the rest on `type`. A response key both hold is taken out of both and
   * merged here, its field nodes in execution order, as graphql-js merges
   * it on `type`.
   */
  planOn(group: Group, type: CompositeCost, abstract: CompositeCost): Plan {
    const split = this.splitOf(group, abstract);
    if (split === null) return this.plan(group, type);
    const known = split.plans.get(type);
    if (known !== undefined) return known;
    const tables = possibleTypesOf(abstract);
    const index = tables.classOf.get(type);
    const standIn = (index === undefined ? undefined : tables.members[index]?.[0]) ?? type;
    const plain = this.plan(split.plain, standIn);
    const rest = this.plan(split.rest, type);
    let merged: Set<string> | null = null;
    for (const key of this.keysOf(rest)) if (split.plainNodes.has(key)) (merged ??= new Set()).add(key);
    const items: PlanItem[] = [];
    const byKey = new Map<string, FieldItem>();
    if (merged !== null) {
      const colliding = this.collidingNodes(split, type, merged);
      // A fragment cut where it spreads itself (validation off): the whole group on this type, as before.
      if (colliding === null) {
        const whole = this.plan(group, type);
        split.plans.set(type, whole);
        return whole;
      }
      for (const [key, nodes] of colliding) this.addField(items, byKey, type, key, nodes);
    }
    items.push({ spread: true, segment: false, deferred: false, plan: plain, excluded: exclusionOf(merged, plain, this) });
    items.push({ spread: true, segment: false, deferred: false, plan: rest, excluded: exclusionOf(merged, rest, this) });
    const plan = this.finish(this.syntheticGroup(), type, items, byKey);
    split.plans.set(type, plan);
    return plan;
  }

  /** How `group` splits on `abstract` (see `planOn`): null without plain fields, or without anything else. */
  private splitOf(group: Group, abstract: CompositeCost): Split | null {
    const id = group.id * this.costs.types.size + abstract.index;
    const known = this.splits.get(id);
    if (known !== undefined) return known;
    const plainSets: SelectionSetNode[] = [];
    const restSets: SelectionSetNode[] = [];
    const positions: Map<SelectionNode, number>[] = [];
    const plainNodes = new Map<string, { at: number; node: FieldNode }[]>();
    let others = 0;
    let repeated = false;
    group.selectionSets.forEach((selectionSet, s) => {
      const plain: SelectionNode[] = [];
      const rest: SelectionNode[] = [];
      const at = new Map<SelectionNode, number>();
      selectionSet.selections.forEach((selection, position) => {
        if (selection.kind === Kind.FIELD && declares(abstract, selection.name.value)) {
          // A field left out by `@skip`/`@include` runs on no type.
          if (selection.directives !== undefined && selection.directives.length > 0 && !included(selection.directives, this.variables)) return;
          plain.push(selection);
          const key = selection.alias?.value ?? selection.name.value;
          let nodes = plainNodes.get(key);
          if (nodes === undefined) plainNodes.set(key, (nodes = []));
          nodes.push({ at: s * PLACE + position, node: selection });
          return;
        }
        // One node twice in a list (only a hand-built document): its places are not told apart.
        if (at.has(selection)) repeated = true;
        at.set(selection, position);
        rest.push(selection);
        others++;
      });
      plainSets.push({ kind: Kind.SELECTION_SET, selections: plain });
      restSets.push({ kind: Kind.SELECTION_SET, selections: rest });
      positions.push(at);
    });
    const split: Split | null =
      plainNodes.size === 0 || others === 0 || repeated
        ? null
        : { plain: this.group(plainSets), rest: this.group(restSets), plainNodes, positions, plans: new Map() };
    this.splits.set(id, split);
    return split;
  }

  /**
   * For each key of `merged`, its field nodes on `type` in execution order:
   * the plain ones and the rest's, by their places. Null where a fragment
   * the rest spreads has no plan of its own on `type` (cut in a cycle).
   */
  private collidingNodes(split: Split, type: CompositeCost, merged: ReadonlySet<string>): Map<string, FieldNode[]> | null {
    const found = new Map<string, { at: number; node: FieldNode }[]>();
    for (const key of merged) found.set(key, []);
    const seen = new Set<FieldNode>();
    const place = (): number => this.topSet * PLACE + (split.positions[this.topSet]?.get(this.topSelection!) ?? 0);
    let cut = false;
    const add = (key: string, node: FieldNode, at: number): void => {
      if (seen.has(node)) return;
      seen.add(node);
      found.get(key)?.push({ at, node });
    };
    this.walk(
      split.rest,
      type,
      (node) => {
        const key = node.alias?.value ?? node.name.value;
        if (merged.has(key)) add(key, node, place());
      },
      (selectionSet, deferred) => {
        if (deferred) return;
        const fragmentGroup = this.group([selectionSet]);
        const plan = fragmentGroup.plans.get(type);
        if (plan === undefined) {
          cut = true;
          return;
        }
        const keys = this.keysOf(plan);
        const at = place();
        const [few, many] = keys.size <= merged.size ? [keys, merged] : [merged, keys];
        for (const key of few) if (many.has(key)) for (const node of this.nodesOf(plan, key)) add(key, node, at);
      },
    );
    if (cut) return null;
    const nodes = new Map<string, FieldNode[]>();
    for (const [key, rest] of found) {
      const plain = split.plainNodes.get(key) ?? [];
      const out: FieldNode[] = [];
      for (let i = 0, j = 0; i < plain.length || j < rest.length; ) {
        if (j >= rest.length || (i < plain.length && plain[i]!.at < rest[j]!.at)) out.push(plain[i++]!.node);
        else out.push(rest[j++]!.node);
      }
      nodes.set(key, out);
    }
    return nodes;
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
        else if (!item.deferred && !seen.has(item.plan)) {
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
        if (item.spread && !item.deferred && this.keysOf(item.plan).has(key)) {
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
    this.walk(group, type, null, (selectionSet) => void spreads.push(selectionSet));
    return spreads;
  }

  private build(group: Group, type: CompositeCost, owner: Group): Plan {
    // In execution order: each field node, and each fragment spread (as its plan).
    const sequence: (FieldNode | Plan)[] = [];
    const own = new Map<string, FieldNode[]>();
    const spreadPlans: Plan[] = [];
    // Deferred fragments run on their own (an executor with @defer collects them apart): priced apart, merged with nothing.
    const deferredPlans: Plan[] = [];
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
      (selectionSet, deferred) => {
        const fragmentGroup = this.group([selectionSet]);
        const plan = this.partial?.get(fragmentGroup)?.plan ?? fragmentGroup.plans.get(type);
        // Absent only for a fragment spread inside itself (an invalid operation): cut there.
        if (plan === undefined) return;
        if (deferred) {
          deferredPlans.push(plan);
          return;
        }
        // Two fragments of equal content merge into one.
        if (!spreadPlans.includes(plan)) spreadPlans.push(plan);
        sequence.push(plan);
      },
    );
    // The fragments together, merged among themselves once for every set that spreads the same ones.
    const spreads = spreadPlans.length === 0 ? null : spreadPlans.length === 1 ? spreadPlans[0]! : this.combine(spreadPlans, type);

    // The own fields that share a key with the fragments: merged here, taken out of them.
    let merged: Set<string> | null = null;
    if (spreads !== null && own.size > 0) {
      const keys = this.keysOf(spreads);
      for (const key of own.keys()) if (keys.has(key)) (merged ??= new Set()).add(key);
    }
    const items: PlanItem[] = [];
    const byKey = new Map<string, FieldItem>();
    for (const [key, nodes] of own) if (merged === null || !merged.has(key)) this.addField(items, byKey, type, key, nodes);
    if (merged !== null) for (const [key, nodes] of this.mergedNodes(merged, sequence)) this.addField(items, byKey, type, key, nodes);
    if (spreads !== null) items.push({ spread: true, segment: false, deferred: false, plan: spreads, excluded: exclusionOf(merged, spreads, this) });
    for (const plan of deferredPlans) items.push({ spread: true, segment: false, deferred: true, plan, excluded: null });
    return this.finish(owner, type, items, byKey);
  }

  /** Several fragment plans as one: the keys they share merged, each of them less those keys. */
  private combine(plans: readonly Plan[], type: CompositeCost): Plan {
    const id = plans.map((plan) => plan.id).join(',');
    let combined = this.combinations.get(id);
    if (combined === undefined) {
      let merged: Set<string> | null = null;
      for (let i = 0; i < plans.length; i++) {
        for (let j = i + 1; j < plans.length; j++) {
          for (const key of this.sharedKeys(plans[i]!, plans[j]!)) (merged ??= new Set()).add(key);
        }
      }
      const items: PlanItem[] = [];
      const byKey = new Map<string, FieldItem>();
      if (merged !== null) for (const [key, nodes] of this.mergedNodes(merged, plans)) this.addField(items, byKey, type, key, nodes);
      for (const plan of plans) items.push({ spread: true, segment: false, deferred: false, plan, excluded: exclusionOf(merged, plan, this) });
      combined = this.finish(this.syntheticGroup(), type, items, byKey);
      this.combinations.set(id, combined);
    }
    return combined;
  }

  /**
   * For each key of `merged`, its field nodes in execution order through
   * `parts` (field nodes and plans), each once: a fragment reached along
   * several paths (each of 30 fragments spreading the next two) holds the
   * same nodes along each, and graphql-js collects it once.
   */
  private mergedNodes(merged: ReadonlySet<string>, parts: readonly (FieldNode | Plan)[]): Map<string, FieldNode[]> {
    const nodes = new Map<string, FieldNode[]>();
    const seen = new Set<FieldNode>();
    const add = (key: string, node: FieldNode): void => {
      if (seen.has(node)) return;
      seen.add(node);
      nodes.get(key)?.push(node);
    };
    for (const key of merged) nodes.set(key, []);
    for (const part of parts) {
      if ('kind' in part) {
        add(part.alias?.value ?? part.name.value, part);
      } else {
        const keys = this.keysOf(part);
        for (const key of merged) if (keys.has(key)) for (const node of this.nodesOf(part, key)) add(key, node);
      }
    }
    return nodes;
  }

  private addField(items: PlanItem[], byKey: Map<string, FieldItem>, type: CompositeCost, key: string, nodes: readonly FieldNode[]): void {
    const first = nodes[0];
    if (first === undefined) return;
    const name = first.name.value;
    const field = type.fields?.get(name) ?? this.costs.metaFields.get(name);
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
  }

  /**
   * The plan, its items split into a tree of segments of at most SEGMENT
   * items: a fragment spread where one of its keys is merged is priced
   * again only along the segments holding that key, the others read from
   * the memo, so a large fragment less a key costs a few segments, not the
   * whole fragment again.
   */
  private finish(group: Group, type: CompositeCost, items: PlanItem[], byKey: ReadonlyMap<string, FieldItem>): Plan {
    if (items.length <= SEGMENT) {
      const plan: Plan = { id: this.plans++, group, type, items, byKey, keys: null };
      group.plans.set(type, plan);
      return plan;
    }
    let level: PlanItem[] = items;
    while (level.length > SEGMENT) {
      const next: PlanItem[] = [];
      for (let start = 0; start < level.length; start += SEGMENT) {
        const slice = level.slice(start, start + SEGMENT);
        const own = new Map<string, FieldItem>();
        for (const item of slice) if (!item.spread) own.set(item.key, item);
        const plan: Plan = { id: this.plans++, group: this.syntheticGroup(), type, items: slice, byKey: own, keys: null };
        plan.group.plans.set(type, plan);
        next.push({ spread: true, segment: true, deferred: false, plan, excluded: null });
      }
      level = next;
    }
    const plan: Plan = { id: this.plans++, group, type, items: level, byKey, keys: null };
    group.plans.set(type, plan);
    return plan;
  }

  /** A group of no selection set of its own, for a combination or segment plan: its number keys the walk's memo. */
  private syntheticGroup(): Group {
    return { id: this.groupCount++, selectionSets: [], plans: new Map() };
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
    onSpread: (selectionSet: SelectionSetNode, deferred: boolean) => void,
  ): void {
    const visited = new Set<string>();
    const lists: (readonly SelectionNode[])[] = [];
    const cursors: number[] = [];
    const sets = group.selectionSets;
    for (let s = sets.length - 1; s >= 0; s--) {
      lists.push(this.applicable(sets[s]!.selections, type));
      cursors.push(0);
    }
    const variables = this.variables;
    // The lists below this many are the group's own sets: set s at sets.length - 1 - s.
    let setsLeft = sets.length;
    while (lists.length > 0) {
      const top = lists.length - 1;
      const list = lists[top]!;
      const cursor = cursors[top]!;
      if (cursor >= list.length) {
        lists.pop();
        cursors.pop();
        if (top < setsLeft) setsLeft = top;
        continue;
      }
      cursors[top] = cursor + 1;
      const selection = list[cursor]!;
      if (top < setsLeft) {
        this.topSet = sets.length - 1 - top;
        this.topSelection = selection;
      }
      if (selection.directives !== undefined && selection.directives.length > 0 && !included(selection.directives, variables)) continue;
      if (selection.kind === Kind.FIELD) {
        onField?.(selection);
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        if (selection.typeCondition === undefined || applies(selection.typeCondition.name.value, type)) {
          if (deferred(selection.directives, variables)) {
            onSpread(selection.selectionSet, true);
          } else {
            lists.push(this.applicable(selection.selectionSet.selections, type));
            cursors.push(0);
          }
        }
      } else {
        const name = selection.name.value;
        const defer = deferred(selection.directives, variables);
        if (!defer && visited.has(name)) continue;
        if (!defer) visited.add(name);
        const fragment = this.fragments.get(name);
        if (fragment !== undefined && applies(fragment.typeCondition.name.value, type)) onSpread(fragment.selectionSet, defer);
      }
    }
  }

  /**
   * The selections of a list that can apply to the object type `type`, in
   * their order: those without a type condition, and the fragments whose
   * condition names `type` or an abstract type it belongs to, found by name
   * (a list of fragments on a thousand types is not read whole for each).
   */
  private applicable(selections: readonly SelectionNode[], type: CompositeCost): readonly SelectionNode[] {
    let index = this.conditionIndexes.get(selections);
    if (index === undefined) {
      index = NO_CONDITIONS;
      for (let position = 0; position < selections.length; position++) {
        const selection = selections[position]!;
        let condition: string | undefined;
        if (selection.kind === Kind.INLINE_FRAGMENT) condition = selection.typeCondition?.name.value;
        else if (selection.kind === Kind.FRAGMENT_SPREAD) condition = this.fragments.get(selection.name.value)?.typeCondition.name.value ?? '';
        if (condition === undefined) {
          if (index !== NO_CONDITIONS) index.always.push(position);
          continue;
        }
        if (index === NO_CONDITIONS) index = { always: Array.from({ length: position }, (_, i) => i), byCondition: new Map() };
        let positions = index.byCondition.get(condition);
        if (positions === undefined) index.byCondition.set(condition, (positions = []));
        positions.push(position);
      }
      this.conditionIndexes.set(selections, index);
    }
    if (index === NO_CONDITIONS) return selections;
    const { always, byCondition } = index;
    const positions = [...always];
    const add = (condition: string): void => {
      const found = byCondition.get(condition);
      if (found !== undefined) for (const position of found) positions.push(position);
    };
    add(type.name);
    if (byCondition.size <= type.abstractTypes.size) {
      for (const condition of byCondition.keys()) if (type.abstractTypes.has(condition)) add(condition);
    } else {
      for (const condition of type.abstractTypes) add(condition);
    }
    if (positions.length === selections.length) return selections;
    positions.sort((a, b) => a - b);
    return positions.map((position) => selections[position]!);
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
