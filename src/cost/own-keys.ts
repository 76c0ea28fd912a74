import type { FieldNode, SelectionSetNode } from 'graphql';
import type { FlatEntry, Guard, Level, Levels, Occurrence, Part } from './levels.js';
import type { CompositeCost } from './schema-costs.js';
import type { FieldShapes } from './field-shapes.js';

/*
 * A level's own response keys, grouped by where they apply, so that a
 * level is priced on a type by reading only what that type changes:
 *
 * - the keys every type has (a selection without a condition), priced on a
 *   type as its field shapes say, so once per combination of shapes;
 * - per object type a condition names, the keys it adds or merges there;
 * - keys hoisted from parts (levels.ts) that apply only where those parts
 *   do, grouped by that set of types and priced once per group and shapes.
 */

/** One response key of a group, with the selections to merge for it on a type the group applies to. */
export class KeyEntry {
  /** The field name of the selection that runs (its first). */
  readonly name: string;
  /** The nodes whose size and arguments count: the first one's, or where which runs first depends on the type, all of them (the largest counts). */
  readonly heads: readonly FieldNode[];
  /** The sub-selections of all of them, merged; null for a leaf. */
  readonly selectionSets: readonly SelectionSetNode[] | null;
  /** Occurrences already priced in the level's group for every type, taken out again here: null for none. */
  readonly without: KeyEntry | null;
  /** How many response keys of its group it stands for: aliases of one field with the same arguments and sub-selections run alike, so they are priced once and counted. */
  count = 1;
  /** The level of its sub-selections on the last target asked for (`Levels` keeps the others, once per content and type). */
  private target: CompositeCost | null = null;
  private level: Level | null = null;

  constructor(occurrences: readonly Occurrence[], exact: boolean, without: KeyEntry | null) {
    const first = occurrences[0]!;
    this.name = first.node.name.value;
    const nodes: FieldNode[] = [];
    for (const occurrence of occurrences) if (!nodes.includes(occurrence.node)) nodes.push(occurrence.node);
    this.heads = exact ? [first.node] : nodes;
    const sets: SelectionSetNode[] = [];
    for (const node of nodes) if (node.selectionSet !== undefined) sets.push(node.selectionSet);
    this.selectionSets = sets.length === 0 ? null : sets;
    this.without = without;
  }

  /** The level of its merged sub-selections on the field's type (kept: types may return different types for one field). */
  levelOn(target: CompositeCost, levels: Levels): Level {
    if (target === this.target) return this.level!;
    const level = levels.levelOf(this.selectionSets ?? [], target);
    this.target = target;
    this.level = level;
    return level;
  }
}

export class OwnGroup {
  /** Per type, the shapes it gives the field names its keys select, as a memo key: built when first asked. */
  signatures: Map<CompositeCost, string> | null = null;
  private fieldNames: readonly string[] | null = null;

  constructor(
    readonly id: number,
    readonly keys: readonly KeyEntry[],
  ) {}

  /** The field names its keys select: what a type's shapes are read for. */
  get names(): readonly string[] {
    if (this.fieldNames === null) {
      const names = new Set<string>();
      for (const entry of this.keys) {
        for (const head of entry.heads) names.add(head.name.value);
        if (entry.without !== null) names.add(entry.without.name);
      }
      this.fieldNames = [...names];
    }
    return this.fieldNames;
  }
}

export class OwnPlan {
  constructor(
    /** Every object type a condition of the level names, its parts' included: priced on its own. */
    readonly named: readonly CompositeCost[],
    /** The groups for every type. */
    private readonly base: readonly OwnGroup[],
    /** The groups a condition adds on a type. */
    private readonly byType: ReadonlyMap<CompositeCost, readonly OwnGroup[]> | null,
  ) {}

  /** The groups that apply on a type. */
  groupsAt(type: CompositeCost): readonly OwnGroup[] {
    const more = this.byType?.get(type);
    return more === undefined ? this.base : [...this.base, ...more];
  }
}

/** The keys hoisted out of a part, as priced inside it: taken out of its price where it is added. */
export interface Excluded {
  readonly keys: readonly ExcludedKey[];
  readonly names: readonly string[];
  /** The conditions inside the part that restrict them, whose truth on a type changes their price. */
  readonly guards: readonly ReadonlySet<CompositeCost>[];
}

export interface ExcludedKey {
  readonly entries: readonly FlatEntry[];
  /** Whether every entry applies wherever the part does. */
  readonly plain: boolean;
  readonly entry: KeyEntry;
}

/** Per level, its own keys grouped by where they apply (kept with the document's levels). */
export class OwnKeys {
  private readonly plans = new Map<Level, OwnPlan>();
  private readonly excludedKeys = new Map<Part, Excluded>();

  constructor(
    private readonly levels: Levels,
    private readonly shapes: FieldShapes,
  ) {}

  of(level: Level): OwnPlan {
    let plan = this.plans.get(level);
    if (plan === undefined) {
      this.levels.prepared(level);
      plan = this.plan(level);
      this.plans.set(level, plan);
    }
    return plan;
  }

  /** What a type's price of a group depends on: its shapes of the group's field names. */
  signature(group: OwnGroup, type: CompositeCost): string {
    let signature = group.signatures?.get(type);
    if (signature === undefined) {
      signature = '';
      for (const name of group.names) signature += `${this.shapes.of(type.fields?.get(name))},`;
      (group.signatures ??= new Map()).set(type, signature);
    }
    return signature;
  }

  /** Whether a part is priced on each type of its level rather than as its most over a class: where a key hoisted out of it sits under a condition inside it, on its level's own type. */
  pricedOnType(part: Part, level: Level): boolean {
    return pricedOnType(part, level) && this.excluded(part).guards.length > 0;
  }

  /** The keys hoisted out of a part. */
  excluded(part: Part): Excluded {
    let known = this.excludedKeys.get(part);
    if (known === undefined) {
      const flat = this.levels.flat(part.level);
      const names = new Set<string>();
      const guards = new Set<ReadonlySet<CompositeCost>>();
      const keys: ExcludedKey[] = [];
      for (const key of part.excluded) {
        const entries = flat.get(key) ?? [];
        if (entries.length === 0) continue;
        let plain = true;
        for (const entry of entries) {
          names.add(entry.node.name.value);
          if (entry.guard !== null) {
            guards.add(entry.guard);
            plain = false;
          }
        }
        keys.push({ entries, plain, entry: new KeyEntry(entries.map(toOccurrence), true, null) });
      }
      this.excludedKeys.set(part, (known = { keys, names: [...names], guards: [...guards] }));
    }
    return known;
  }

  /** What a type's price of the keys hoisted out of a part depends on: its shapes of their field names, and which of their conditions apply. */
  excludedSignature(excluded: Excluded, type: CompositeCost): string {
    let signature = '';
    for (const name of excluded.names) signature += `${this.shapes.of(type.fields?.get(name))},`;
    for (const guard of excluded.guards) signature += guard.has(type) ? '1' : '0';
    return signature;
  }

  private plan(level: Level): OwnPlan {
    if (level.parts.length === 0 && simple(level)) {
      // The common level: every key on every type, nothing hoisted.
      const keys: KeyEntry[] = [];
      const alike = new Map<string, KeyEntry>();
      for (const occurrences of level.fields.values()) {
        const same = occurrences.length === 1 ? this.levels.sameRun(occurrences[0]!.node) : null;
        const known = same === null ? undefined : alike.get(same);
        if (known !== undefined) {
          known.count++;
          continue;
        }
        const entry = new KeyEntry(occurrences, true, null);
        if (same !== null) alike.set(same, entry);
        keys.push(entry);
      }
      return new OwnPlan(NO_TYPES, keys.length === 0 ? NONE : [new OwnGroup(0, keys)], null);
    }
    let ids = 0;
    const everywhere: KeyEntry[] = [];
    const byType = new Map<CompositeCost, KeyEntry[]>();
    const byGuard = new Map<ReadonlySet<CompositeCost>, KeyEntry[]>();
    const work = this.levels.work;
    for (const occurrences of level.fields.values()) {
      work.spend(1);
      if (occurrences.some((occurrence) => occurrence.from !== null)) {
        // Hoisted from parts: priced wherever any of them applies, on all their selections merged.
        const exact = occurrences.every((occurrence) => occurrence.guard === null);
        let union: Guard = occurrences[0]!.guard;
        for (const occurrence of occurrences) union = unite(union, occurrence.guard);
        const entry = new KeyEntry(occurrences, exact, null);
        if (union === null) everywhere.push(entry);
        else push(byGuard, union, entry);
        continue;
      }
      const plain = occurrences.filter((occurrence) => occurrence.guard === null);
      const common = plain.length > 0 ? new KeyEntry(plain, true, null) : null;
      if (common !== null) everywhere.push(common);
      if (plain.length === occurrences.length) continue;
      const types = new Set<CompositeCost>();
      for (const occurrence of occurrences) if (occurrence.guard !== null) for (const type of occurrence.guard) types.add(type);
      for (const type of types) {
        const applying = occurrences.filter((occurrence) => occurrence.guard === null || occurrence.guard.has(type));
        push(byType, type, new KeyEntry(applying, true, common));
      }
    }
    const base = everywhere.length > 0 ? [new OwnGroup(ids++, everywhere)] : NONE;
    // Per type, the group its conditions add, and the groups hoisted under a set holding it.
    const more = new Map<CompositeCost, OwnGroup[]>();
    for (const [type, keys] of byType) push(more, type, new OwnGroup(ids++, keys));
    for (const [guard, keys] of byGuard) {
      const made = new OwnGroup(ids++, keys);
      for (const type of guard) push(more, type, made);
    }
    const named = new Set<CompositeCost>(more.keys());
    for (const part of level.parts) {
      if (part.guard !== null) for (const type of part.guard) named.add(type);
      // A key hoisted out of a part under a condition inside it is taken out
      // at the price that condition gives it on each type, which the most of
      // the part over a class cannot be paired with: the part is priced on
      // the type itself (`pricedOnType`), and every type a condition inside
      // it names is told apart, so that it prices alike on the others.
      if (this.pricedOnType(part, level)) for (const entries of this.levels.flat(part.level).values()) for (const entry of entries) if (entry.guard !== null) for (const type of entry.guard) named.add(type);
    }
    return new OwnPlan([...named], base, more.size === 0 ? null : more);
  }
}

function pricedOnType(part: Part, level: Level): boolean {
  return part.excluded.length > 0 && part.level.type === level.type;
}

const NONE: readonly OwnGroup[] = [];
const NO_TYPES: readonly CompositeCost[] = [];

/** Whether no selection of the level is restricted by a condition. */
function simple(level: Level): boolean {
  for (const occurrences of level.fields.values()) for (const occurrence of occurrences) if (occurrence.guard !== null) return false;
  return true;
}

function toOccurrence(entry: FlatEntry): Occurrence {
  return { node: entry.node, guard: entry.guard, at: 0, inner: entry.at, from: null };
}

function push<K, V>(map: Map<K, V[]>, key: K, value: V): void {
  const list = map.get(key);
  if (list === undefined) map.set(key, [value]);
  else list.push(value);
}

const unions = new WeakMap<ReadonlySet<CompositeCost>, WeakMap<ReadonlySet<CompositeCost>, ReadonlySet<CompositeCost>>>();

/** Where either applies: null for everywhere. Kept per pair of sets, which are shared objects. */
function unite(a: Guard, b: Guard): Guard {
  if (a === null || b === null) return null;
  if (a === b) return a;
  let byB = unions.get(a);
  if (byB === undefined) unions.set(a, (byB = new WeakMap()));
  let union = byB.get(b);
  if (union === undefined) {
    const [small, large] = a.size <= b.size ? [a, b] : [b, a];
    let grows = false;
    for (const type of small) if (!large.has(type)) grows = true;
    union = grows ? new Set([...large, ...small]) : large;
    byB.set(b, union);
  }
  return union;
}
