import { Kind, print } from 'graphql';
import type { FieldNode, FragmentDefinitionNode, SelectionNode, SelectionSetNode } from 'graphql';
import { Work } from './budget.js';
import type { CompositeCost, SchemaCosts } from './schema-costs.js';
import { deferred, included } from './selections.js';
import { OwnKeys } from './own-keys.js';
import { covers, meet, typeNamed, within } from './type-tables.js';
import type { FieldShapes } from './field-shapes.js';

/*
 * A level is what graphql-js CollectFields gathers for a selection set (or
 * the selection sets of fields merged under one response key) on its static
 * type, the type validation gives it: the field selections through inline
 * fragments, each with the object types it is restricted to, and the
 * fragment spreads and conditions on other interfaces and unions as parts,
 * each a level of its own priced on its own static type and added. A part is
 * never copied into the levels that spread it: that is what keeps pricing
 * linear however often a fragment is spread, under however many types.
 *
 * Fields of one response key merge, across parts too (graphql-js collects
 * them once). A key the level and a part both hold, or two parts that can
 * apply together, is hoisted: the part's occurrences of it join the level's
 * own, and the part is priced less its own price of that key. Finding those
 * keys compares the level's keys with each part's, and parts pairwise, once
 * per pair, as graphql-js validation's overlapping-fields rule does.
 */

/** Where a selection applies: on every type of its level (null), or only on these object types. */
export type Guard = ReadonlySet<CompositeCost> | null;

/** One field selection of a response key at a level. */
export interface Occurrence {
  readonly node: FieldNode;
  readonly guard: Guard;
  /** Its place in execution order: the level's own selection's, or that of the part it was hoisted from. */
  readonly at: number;
  /** Its place within that part (0 for the level's own). */
  readonly inner: number;
  /** The part it was hoisted from, or null. */
  readonly from: Part | null;
}

/** A selection set priced on its own and added: a fragment spread, a condition on another interface or union, or a deferred fragment. */
export interface Part {
  readonly level: Level;
  /** The object types a condition restricts it to (null: none); it applies on the level's types that are possible types of its own. */
  guard: Guard;
  readonly at: number;
  /** Under an active `@defer`: runs on its own, merges with nothing. */
  readonly deferred: boolean;
  /** Its response keys hoisted into the level that spreads it. */
  readonly excluded: string[];
}

/** A selection set (or several merged) on its static type, collected when first read. */
export class Level {
  /** Set once its keys shared with its parts are hoisted. */
  hoisted = false;
  private collected = false;
  private ownFields: Map<string, Occurrence[]> | null = null;
  private ownParts: readonly Part[] = NO_PARTS;
  private told = false;

  constructor(
    readonly id: number,
    readonly type: CompositeCost,
    readonly selectionSets: readonly SelectionSetNode[],
    /** Whether its content sits at several places of the document (or merges several): then it is met more than once. */
    readonly repeated: boolean,
    private readonly levels: Levels,
  ) {}

  /** Every occurrence of each response key at the level, its own and those hoisted from its parts, in execution order. */
  get fields(): Map<string, Occurrence[]> {
    if (!this.collected) this.collect();
    return this.ownFields!;
  }

  get parts(): readonly Part[] {
    if (!this.collected) this.collect();
    return this.ownParts;
  }

  /** A field selected on the abstract type itself that it does not declare (validation off): its possible types are then told apart by it. */
  get undeclared(): boolean {
    if (!this.collected) this.collect();
    return this.told;
  }

  private collect(): void {
    this.collected = true;
    const { fields, parts, undeclared } = this.levels.collect(this);
    this.ownFields = fields;
    this.ownParts = parts;
    this.told = undeclared;
  }
}

const NO_PARTS: readonly Part[] = Object.freeze([]);

/** Every field selection a level collects, through its parts, by response key: for hoisting and for reading a response. */
export type Flat = ReadonlyMap<string, readonly FlatEntry[]>;

export interface FlatEntry {
  readonly node: FieldNode;
  readonly guard: Guard;
  /** Execution order within the flattened level. */
  readonly at: number;
}

/** Units of work a level past the document's own selection sets spends: what it keeps is worth that many map reads. */
export const KEPT_LEVEL_UNITS = 160;

/** Levels read outside a pricing (none are): no budget. */
const UNLIMITED = new Work(Number.POSITIVE_INFINITY);

interface Pending {
  readonly selections: readonly SelectionNode[];
  readonly guard: Guard;
  next: number;
}

/**
 * The levels of one document for one reading of its `@skip`/`@include`/
 * `@defer` variables, built as pricing first needs them and kept with the
 * document.
 */
export class Levels {
  private readonly levels = new Map<string, Level>();
  private readonly flats = new Map<Level, Flat>();
  private readonly singletons = new Map<CompositeCost, ReadonlySet<CompositeCost>>();
  private readonly intersections = new WeakMap<ReadonlySet<CompositeCost>, WeakMap<ReadonlySet<CompositeCost>, Guard | undefined>>();
  private readonly shared = new Map<string, readonly string[]>();
  /** Content numbers for selection sets the document numbering did not reach (a hand-built document holding itself). */
  private readonly extraIds = new Map<SelectionSetNode, number>();
  private count = 0;
  /** The budget of the pricing now reading these levels. */
  work: Work = UNLIMITED;

  /** Each level's own keys, grouped by where they apply. */
  readonly own: OwnKeys;

  constructor(
    private readonly costs: SchemaCosts,
    private readonly fragments: ReadonlyMap<string, FragmentDefinitionNode>,
    private readonly variables: Readonly<Record<string, unknown>>,
    private readonly contentIds: ReadonlyMap<SelectionSetNode, number>,
    /** Per content number: 1 where selection sets of that content sit at several places. */
    private readonly repeated: Uint8Array,
    shapes: FieldShapes,
  ) {
    this.own = new OwnKeys(this, shapes);
  }

  /** Whether they are few enough to keep with the document: at most twice its selection sets (and 64), so that what a document keeps between pricings is linear in it. */
  get keepable(): boolean {
    return this.count <= 2 * this.contentIds.size + 64;
  }

  /** The level of these selection sets on `type`; sets of equal content (`a: f { x } a: f { x }`) count once, as they collect alike. */
  levelOf(selectionSets: readonly SelectionSetNode[], type: CompositeCost): Level {
    let key = `${type.index}:`;
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
    let level = this.levels.get(key);
    if (level === undefined) {
      // One level per selection set of the document is linear in it; those past it (a selection set met again on
      // another type: a field whose type an implementation narrows) are what grows with the schema's types, and
      // each keeps about a kilobyte: the budget bounds them in memory as well as in time.
      if (this.count >= this.contentIds.size) this.work.spend(KEPT_LEVEL_UNITS);
      const content = kept.length === 1 ? this.contentIds.get(kept[0]!) : undefined;
      level = new Level(this.count++, type, kept, content === undefined || this.repeated[content] === 1, this);
      this.levels.set(key, level);
    }
    return level;
  }

  /**
   * The level with its keys shared with its parts hoisted: each part's
   * occurrences of such a key join the level's own, and the key is taken
   * out of the part. A key is looked up on the smaller side, and two parts
   * are compared once per pair of levels, whatever they are spread in.
   */
  prepared(level: Level): Level {
    const work = this.work;
    if (level.hoisted) return level;
    level.hoisted = true;
    if (level.parts.length === 0) return level;
    const merging = level.parts.filter((part) => !part.deferred);
    if (merging.length === 0) return level;
    const marked = new Map<Part, Set<string>>();
    const mark = (part: Part, key: string): void => {
      let keys = marked.get(part);
      if (keys === undefined) marked.set(part, (keys = new Set()));
      keys.add(key);
    };
    const own = level.fields;
    // An own key the part holds, where some of its selections can apply together with the part.
    const meets = (part: Part, key: string): void => {
      if (own.get(key)!.some((occurrence) => this.together(occurrence.guard, part.guard))) mark(part, key);
    };
    for (const part of merging) {
      const flat = this.flat(part.level);
      work.spend(Math.min(own.size, flat.size));
      if (own.size <= flat.size) {
        for (const key of own.keys()) if (flat.has(key)) meets(part, key);
      } else {
        for (const key of flat.keys()) if (own.has(key)) meets(part, key);
      }
    }
    for (let i = 0; i < merging.length; i++) {
      for (let j = i + 1; j < merging.length; j++) {
        const a = merging[i]!;
        const b = merging[j]!;
        this.work.spend(1);
        if (a.level === b.level || !this.together(a.guard, b.guard)) continue;
        for (const key of this.sharedKeys(a.level, b.level)) {
          mark(a, key);
          mark(b, key);
        }
      }
    }
    for (const [part, keys] of marked) {
      const flat = this.flat(part.level);
      for (const key of keys) {
        let occurrences = own.get(key);
        if (occurrences === undefined) own.set(key, (occurrences = []));
        for (const entry of flat.get(key) ?? []) {
          const guard = this.intersect(part.guard, entry.guard);
          if (guard === undefined) continue;
          occurrences.push({ node: entry.node, guard, at: part.at, inner: entry.at, from: part });
        }
        part.excluded.push(key);
      }
    }
    // In execution order: graphql-js runs the first field of a key.
    for (const key of new Set([...marked.values()].flatMap((keys) => [...keys]))) own.get(key)!.sort((a, b) => a.at - b.at || a.inner - b.inner);
    return level;
  }

  /**
   * Every field selection of `level` through its parts (not deferred ones),
   * by response key, with where each applies among the level's types. Built
   * once per level, parts first, without recursion; a part met again while
   * its own flattening is open (a fragment spread inside itself, validation
   * off) adds nothing there, as graphql-js skips a fragment it visited.
   */
  flat(level: Level): Flat {
    const known = this.flats.get(level);
    if (known !== undefined) return known;
    const open = new Set<Level>([level]);
    const stack: Level[] = [level];
    while (stack.length > 0) {
      const top = stack[stack.length - 1]!;
      let waiting = false;
      for (const part of top.parts) {
        if (part.deferred || this.flats.has(part.level) || open.has(part.level)) continue;
        open.add(part.level);
        stack.push(part.level);
        waiting = true;
        break;
      }
      if (waiting) continue;
      stack.pop();
      open.delete(top);
      this.flats.set(top, this.flatten(top));
    }
    return this.flats.get(level)!;
  }

  private flatten(level: Level): Flat {
    const work = this.work;
    const flat = new Map<string, FlatEntry[]>();
    const seen = new Set<FieldNode>();
    let at = 0;
    const add = (key: string, node: FieldNode, guard: Guard): void => {
      if (seen.has(node)) return;
      seen.add(node);
      let entries = flat.get(key);
      if (entries === undefined) flat.set(key, (entries = []));
      entries.push({ node, guard, at: at++ });
    };
    // The level's own selections and its parts in execution order.
    const items: (Occurrence | Part)[] = [];
    for (const occurrences of level.fields.values()) for (const occurrence of occurrences) if (occurrence.from === null) items.push(occurrence);
    for (const part of level.parts) if (!part.deferred) items.push(part);
    items.sort((a, b) => a.at - b.at);
    for (const item of items) {
      if ('node' in item) {
        add(item.node.alias?.value ?? item.node.name.value, item.node, item.guard);
        continue;
      }
      const inner = this.flats.get(item.level);
      if (inner === undefined) continue; // open: a fragment inside itself
      work.spend(inner.size);
      for (const [key, entries] of inner) {
        for (const entry of entries) {
          const guard = this.intersect(item.guard, entry.guard);
          if (guard !== undefined) add(key, entry.node, guard);
        }
      }
    }
    return flat;
  }

  /** The response keys two levels both hold: the smaller one's keys looked up in the other, once per pair. */
  private sharedKeys(a: Level, b: Level): readonly string[] {
    const work = this.work;
    const id = a.id < b.id ? `${a.id},${b.id}` : `${b.id},${a.id}`;
    let keys = this.shared.get(id);
    if (keys === undefined) {
      const fa = this.flat(a);
      const fb = this.flat(b);
      const [small, large] = fa.size <= fb.size ? [fa, fb] : [fb, fa];
      work.spend(small.size);
      const found: string[] = [];
      for (const key of small.keys()) if (large.has(key)) found.push(key);
      this.shared.set(id, (keys = found));
    }
    return keys;
  }

  /** Whether two parts can apply on one type. */
  private together(a: Guard, b: Guard): boolean {
    if (a === null || b === null) return true;
    return this.intersect(a, b) !== undefined;
  }

  /** Where both apply: null for everywhere, undefined for nowhere. Kept per pair of sets, which are shared objects. */
  intersect(a: Guard, b: Guard): Guard | undefined {
    if (a === null) return b;
    if (b === null || a === b) return a;
    let byB = this.intersections.get(a);
    if (byB === undefined) this.intersections.set(a, (byB = new WeakMap()));
    if (byB.has(b)) return byB.get(b);
    const [small, large] = a.size <= b.size ? [a, b] : [b, a];
    const both = new Set<CompositeCost>();
    for (const type of small) if (large.has(type)) both.add(type);
    const result = both.size === 0 ? undefined : both.size === small.size ? small : both;
    byB.set(b, result);
    return result;
  }

  /** The set holding one object type, one object per type. */
  private single(type: CompositeCost): ReadonlySet<CompositeCost> {
    let set = this.singletons.get(type);
    if (set === undefined) this.singletons.set(type, (set = new Set([type])));
    return set;
  }

  /**
   * CollectFields of `selectionSets` on their static `type`, without
   * following fragment spreads: fields by response key, with the object
   * type a condition restricts them to; fragment spreads and conditions on
   * other abstract types as parts.
   */
  collect(level: Level): { fields: Map<string, Occurrence[]>; parts: readonly Part[]; undeclared: boolean } {
    const work = this.work;
    const { selectionSets, type } = level;
    const fields = new Map<string, Occurrence[]>();
    let parts: Map<string, Part> | null = null;
    const partList: Part[] = [];
    let undeclared = false;
    let at = 0;
    // Guards this collection made and may still add to (never a shared one).
    let grown: Set<Guard> | null = null;
    const addPart = (level: Level, guard: Guard, isDeferred: boolean): void => {
      const key = `${level.id}:${isDeferred ? at : ''}`;
      parts ??= new Map();
      const known = parts.get(key);
      if (known !== undefined) {
        // Spread again under another condition: it applies wherever either does (once, as graphql-js visits a fragment once).
        if (known.guard === null) return;
        if (guard === null) {
          known.guard = null;
        } else {
          if (grown?.has(known.guard) !== true) {
            known.guard = new Set(known.guard);
            (grown ??= new Set()).add(known.guard);
          }
          for (const type of guard) (known.guard as Set<CompositeCost>).add(type);
        }
        return;
      }
      const part: Part = { level, guard, at: at++, deferred: isDeferred, excluded: [] };
      parts.set(key, part);
      partList.push(part);
    };
    const pending: Pending[] = [];
    for (let s = selectionSets.length - 1; s >= 0; s--) pending.push({ selections: selectionSets[s]!.selections, guard: null, next: 0 });
    const variables = this.variables;
    while (pending.length > 0) {
      const top = pending[pending.length - 1]!;
      if (top.next >= top.selections.length) {
        pending.pop();
        continue;
      }
      const selection = top.selections[top.next++]!;
      work.spend(1);
      if (selection.directives !== undefined && selection.directives.length > 0 && !included(selection.directives, variables)) continue;
      const guard = top.guard;
      // The type selections here apply to: the one a condition restricts them to, else the level's.
      const view = guard === null ? type : guard.values().next().value!;
      if (selection.kind === Kind.FIELD) {
        const key = selection.alias?.value ?? selection.name.value;
        let occurrences = fields.get(key);
        if (occurrences === undefined) fields.set(key, (occurrences = []));
        occurrences.push({ node: selection, guard, at: at++, inner: 0, from: null });
        if (guard === null && type.possibleTypes !== null && !declares(type, selection.name.value)) undeclared = true;
        continue;
      }
      const isDeferred = deferred(selection.directives, variables);
      let condition: CompositeCost | undefined;
      let selectionSet: SelectionSetNode;
      let fragment: string | null = null;
      if (selection.kind === Kind.INLINE_FRAGMENT) {
        const name = selection.typeCondition?.name.value;
        condition = name === undefined ? view : this.composite(name);
        selectionSet = selection.selectionSet;
      } else {
        const definition = this.fragments.get(selection.name.value);
        if (definition === undefined) continue;
        fragment = selection.name.value;
        condition = this.composite(definition.typeCondition.name.value);
        selectionSet = definition.selectionSet;
      }
      if (condition === undefined) continue;
      // Where the condition narrows what the selections apply to.
      let narrowed: Guard | undefined;
      if (covers(condition, view)) narrowed = guard;
      else if (condition.possibleTypes === null) narrowed = view.possibleTypes !== null && within(condition, view) ? this.single(condition) : undefined;
      else narrowed = view.possibleTypes !== null && meet(view, condition) ? null : undefined;
      if (narrowed === undefined) continue;
      if (fragment === null && !isDeferred && (narrowed !== null || condition === view)) {
        // An inline fragment without a condition, or one that narrows to an object type: its selections are the level's.
        // (One on another interface or union is a part: the types of one class of the level may price its fields unlike.)
        pending.push({ selections: selectionSet.selections, guard: narrowed, next: 0 });
        continue;
      }
      // A fragment (shared, priced once) or a condition on another interface or union: a part on its own static type,
      // applying on the types of the level it is a possible type of (and, under a condition, on that one).
      const static_ = fragment === null && narrowed !== null ? narrowed.values().next().value! : condition;
      addPart(this.levelOf([selectionSet], static_), narrowed, isDeferred);
    }
    return { fields, parts: partList.length === 0 ? NO_PARTS : partList, undeclared };
  }

  private composite(name: string): CompositeCost | undefined {
    return typeNamed(this.costs, name);
  }

  /**
   * What a lone field selection runs, as a string equal for selections that
   * run alike whatever their response key: its name, arguments and
   * sub-selections' content; null for one with directives (they may say more).
   */
  sameRun(node: FieldNode): string | null {
    if (node.directives !== undefined && node.directives.length > 0) return null;
    const args = node.arguments === undefined || node.arguments.length === 0 ? '' : node.arguments.map((argument) => print(argument)).join(',');
    return `${node.name.value}(${args})${node.selectionSet === undefined ? '' : this.contentId(node.selectionSet)}`;
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

/** Whether an abstract type declares a field of that name (`__typename` always). */
export function declares(type: CompositeCost, name: string): boolean {
  if (name === '__typename' || type.possibleTypes === null) return true;
  const declared = type.type;
  return 'getFields' in declared && Object.prototype.hasOwnProperty.call(declared.getFields(), name);
}
