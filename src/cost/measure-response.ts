import { Kind } from 'graphql';
import type { FieldNode, FragmentDefinitionNode, SelectionNode, SelectionSetNode } from 'graphql';
import type { FetchCounts } from './fetch-counts.js';
import type { ArgumentPricer } from './argument-costs.js';
import { chargeKey } from './schema-costs.js';
import type { CompositeCost, FieldCost, InputCost, SchemaCosts } from './schema-costs.js';
import { deferred } from './collect-fields.js';
import { NarrowerConditions, applies, declares, included, possibleTypesOf, pricedTypes, sat } from './selections.js';
import type { Classes, PricedTypes } from './selections.js';

const FIELD = Kind.FIELD;
const INLINE_FRAGMENT = Kind.INLINE_FRAGMENT;
const FRAGMENT_SPREAD = Kind.FRAGMENT_SPREAD;
const INITIAL_DEPTH = 16;

/*
 * Prices a response the way the static walk prices an operation, with each
 * list's size replaced by the number of items it holds: the same formula,
 * walked over the data instead of the document. graphql-js merges the
 * selections of one response key (CollectFields); so does this walk, so a
 * field that ran once is charged once per place it appears.
 *
 * Where an object's type is abstract, its type is one whose selections
 * produce exactly the object's keys and whose `__typename`, where selected,
 * it holds; where several could, the most expensive of them is charged,
 * each set of types whose plans price alike priced once. Like the static
 * walk it never recurses, and its plans (what to read in an object of a
 * type) are built once per (selection, type), as graphql-js builds its own,
 * so the work is linear in the response.
 */

/** Field selections merged under one response key: their sub-selections, as graphql-js merges them. */
interface Group {
  readonly id: number;
  readonly selectionSets: readonly SelectionSetNode[];
  readonly plans: Map<CompositeCost, Plan>;
  /** An abstract type's possible types that fit an object, by the object's keys. */
  readonly candidates: Map<string, Candidates>;
  /** Per abstract type: a key that holds `__typename` for every possible type that has it, or null. */
  readonly typenameKeys: Map<CompositeCost, string | null>;
  /** Per abstract type: the possible types that price this group unlike each other (see `priced`). */
  readonly priced: Map<CompositeCost, PricedTypes>;
}

/**
 * A group on an abstract type, split: its plain fields (those its selection
 * sets select on the abstract type itself, which it declares), priced alike
 * by every type of a class of it, and the rest (type conditions, fragments,
 * fields with directives or it does not declare), read per type.
 */
interface Split {
  readonly plain: Group;
  readonly rest: Group;
  /** The plain fields' response keys, each with its first node's place (set index × 2^32 + position) and field name. */
  readonly plainKeys: ReadonlyMap<string, { readonly at: number; readonly name: string }>;
  /** The place of the rest's first selection. */
  readonly restAt: number;
  /** Per possible type, the rest's plan without the keys merged into the plain fields' (`planOn`). */
  readonly rests: Group;
  /** The plan on each possible type built so far. */
  readonly plans: Map<CompositeCost, Plan>;
}

/** The possible types whose selections give one set of keys. */
interface Candidates {
  readonly fitting: readonly CompositeCost[];
  /** One of the fitting types per plan shape: the others would price any object alike. */
  readonly distinct: readonly CompositeCost[];
  /** Whether a fitting type selects `__typename`: then an object's value there narrows them. */
  readonly named: boolean;
}

interface PlanEntry {
  readonly key: string;
  readonly field: FieldCost;
  /** The first node: its arguments are the field's (merged fields have equal arguments). */
  readonly node: FieldNode;
  readonly child: Group | null;
}

/** What an object of one type holds for a group: the response keys in order, with the field each one is. */
interface Plan {
  readonly entries: readonly PlanEntry[];
  readonly keys: ReadonlySet<string>;
  /** A key holding `__typename`, or null. */
  readonly typename: string | null;
  /** Every key holding `__typename`. */
  readonly typenames: ReadonlySet<string>;
  /** Equal for two plans that price every object alike (the same keys, fields priced alike, the same groups below). */
  readonly shape: string;
  /**
   * A possible type's plan on an abstract type whose group splits (`Split`):
   * the entries, keys and typenames above are the plain fields' (on the type
   * standing for its class), these the rest's on the type itself; no key in both.
   */
  readonly rest: Plan | null;
  /** How many of the entries, from the first, were collected outside an active `@defer`. */
  readonly main: number;
}

/** What a fragment collects on one type by itself. */
interface Collected {
  readonly fields: readonly FieldNode[];
  readonly deferred: readonly SelectionSetNode[];
  readonly visited: ReadonlySet<string>;
}

export interface ResponseInput {
  readonly costs: SchemaCosts;
  readonly fragments: ReadonlyMap<string, FragmentDefinitionNode>;
  /** Selection sets numbered by content (selections.ts): equal numbers collect alike, so they share one group. */
  readonly selectionSetIds: ReadonlyMap<SelectionSetNode, number>;
  readonly variables: Readonly<Record<string, unknown>>;
  readonly arguments: ArgumentPricer;
  /** Federation: the fetches a gateway makes per object beyond the one that returned it. */
  readonly fetches?: FetchCounts | undefined;
}

export interface ResponseMeasure {
  readonly complexity: number;
  /** Per bucket index; fractional until the caller rounds up. */
  readonly charges: Float64Array;
}

export function measureResponse(input: ResponseInput, selectionSet: SelectionSetNode, root: CompositeCost, data: unknown): ResponseMeasure {
  const walk = new ResponseWalk(input);
  walk.run(selectionSet, root, data);
  return { complexity: walk.stack[0] ?? 0, charges: walk.stack.slice(1, walk.width) };
}

const OBJECT_VALUE = 0;
const ABSTRACT_VALUE = 1;
const FIELD_VALUE = 2;
/** The candidates of one class of a split group (`Split`): its plain fields once, plus the most of their rests. */
const CLASS_VALUE = 3;
/** A place in a group's selection sets: set index × PLACE + position. */
const PLACE = 2 ** 32;

/** Candidates of one class of a split group: the type standing for it, and those the rest prices apart. */
interface ClassCandidates {
  readonly split: Split;
  readonly standIn: CompositeCost;
  readonly types: CompositeCost[];
}

class Frame {
  kind = OBJECT_VALUE;
  group: Group | null = null;
  type: CompositeCost | null = null;
  value: Record<string, unknown> | null = null;
  /** Object: the plan read and the next entry. */
  plan: Plan | null = null;
  next = 0;
  /** Abstract: the possible types that fit, and the next one to price; or the classes of a split group's. */
  candidates: readonly CompositeCost[] = [];
  classes: readonly (CompositeCost | ClassCandidates)[] | null = null;
  /** Class: its candidates, and the next part to price (0 the plain fields, 1 the rests). */
  of: ClassCandidates | null = null;
  /** Memoize this frame's result (below an object of undecided type, the same object is priced once per candidate). */
  memoize = false;
  ambiguous = false;
  /** Field: the entry, and a cursor through its nested lists. */
  entry: PlanEntry | null = null;
  readonly lists: unknown[][] = [];
  readonly cursors: number[] = [];
  top = -1;
  /** Field: the list slots met (each costs the field's weight). */
  slots = 0;
  /** Field: the objects met (each costs the field's entity fetches, in a federated graph). */
  objects = 0;
}


class ResponseWalk {
  readonly width: number;
  stack: Float64Array;
  private readonly frames: Frame[] = [];
  private depth = -1;
  private readonly groups = new Map<string, Group>();
  /** Numbers for selection sets the document numbering did not reach (a hand-built document holding itself). */
  private readonly extraIds = new Map<SelectionSetNode, number>();
  private readonly conditions: NarrowerConditions;
  /** How many frames below an object of undecided type are open: then objects are memoized. */
  private ambiguity = 0;
  /** Per object: where its price for (group, type) was saved, by `group.id × typeCount + type.index`. */
  private memo: Map<object, Map<number, number>> | null = null;
  private readonly typeCount: number;
  /** An abstract type's possible types by name. */
  private readonly byName = new Map<CompositeCost, Map<string, CompositeCost>>();
  /** Numbers for fields that price a response alike (see `fieldShape`). */
  private readonly fieldShapes = new Map<FieldCost, number>();
  private readonly shapeKeys = new Map<string, number>();
  private readonly inputKeys = new Map<InputCost, string>();
  private readonly nodeIds = new Map<FieldNode, number>();
  private saved: Float64Array | null = null;
  private savedLength = 0;
  /** Classes of possible types split by conditions on other interfaces and unions, per set of them. */
  private readonly refinements = new Map<string, Classes>();
  /** What each fragment collects on each type, by type number and name. */
  private readonly fragmentFields = new Map<string, Collected>();
  /** Per group and abstract type (by number): how it splits, or null where it does not. */
  private readonly splits = new Map<number, Split | null>();
  private readonly planShapes = new Map<string, number>();

  constructor(private readonly input: ResponseInput) {
    this.width = input.costs.bucketNames.length + 1;
    this.stack = new Float64Array(this.width * INITIAL_DEPTH);
    this.typeCount = input.costs.types.size;
    this.conditions = new NarrowerConditions(input.costs, input.fragments, input.selectionSetIds, this.typeCount);
  }

  run(selectionSet: SelectionSetNode, root: CompositeCost, data: unknown): void {
    if (!isObject(data)) return;
    this.enterValue(this.group([selectionSet]), root, data);
    while (this.depth >= 0) this.step();
  }

  private push(kind: number): Frame {
    const width = this.width;
    const depth = ++this.depth;
    const at = depth * width;
    if (at + 2 * width > this.stack.length) this.grow(at + 2 * width);
    const stack = this.stack;
    for (let i = at; i < at + width; i++) stack[i] = 0;
    let frame = this.frames[depth];
    if (frame === undefined) this.frames[depth] = frame = new Frame();
    frame.kind = kind;
    frame.memoize = false;
    frame.ambiguous = false;
    return frame;
  }

  /** Starts pricing the object `value` of `type` (object or abstract) for `group`, or hands back its memoized price. */
  private enterValue(group: Group, type: CompositeCost, value: Record<string, unknown>, abstract: CompositeCost | null = null): void {
    const memoize = this.ambiguity > 0;
    if (memoize && this.memo !== null) {
      const saved = this.memo.get(value)?.get(group.id * this.typeCount + type.index);
      if (saved !== undefined) {
        const at = (this.depth + 1) * this.width;
        if (at + this.width > this.stack.length) this.grow(at + 2 * this.width);
        this.stack.set(this.saved!.subarray(saved, saved + this.width), at);
        this.resume();
        return;
      }
    }
    if (type.possibleTypes !== null) {
      const candidates = this.candidatesOf(group, type, value);
      const frame = this.push(ABSTRACT_VALUE);
      frame.group = group;
      frame.type = type;
      frame.value = value;
      frame.candidates = candidates;
      frame.classes = candidates.length > 1 ? this.classesOf(group, type, candidates) : null;
      frame.next = 0;
      frame.memoize = memoize;
      if (candidates.length > 1) {
        frame.ambiguous = true;
        this.ambiguity++;
      }
      return;
    }
    const frame = this.push(OBJECT_VALUE);
    frame.group = group;
    frame.type = type;
    frame.value = value;
    frame.plan = abstract === null ? this.plan(group, type) : this.planOn(group, type, abstract);
    frame.next = 0;
    frame.memoize = memoize;
  }

  private step(): void {
    const frame = this.frames[this.depth]!;
    switch (frame.kind) {
      case OBJECT_VALUE: {
        const entries = frame.plan!.entries;
        const value = frame.value!;
        while (frame.next < entries.length) {
          const entry = entries[frame.next++]!;
          if (!(entry.key in value)) continue;
          const field = this.push(FIELD_VALUE);
          field.entry = entry;
          field.slots = 0;
          field.objects = 0;
          field.top = -1;
          const item = value[entry.key];
          if (entry.field.listDepth === 0) {
            field.slots = 1;
            if (entry.child !== null && entry.field.target !== null && isObject(item)) {
              field.objects = 1;
              field.top = -2; // the one object is being priced
              this.enterValue(entry.child, entry.field.target, item);
            }
          } else if (Array.isArray(item)) {
            field.top = 0;
            field.lists[0] = item as unknown[];
            field.cursors[0] = 0;
          }
          return;
        }
        // A split plan: the plain fields' entries, then the rest's.
        if (frame.plan!.rest !== null) {
          frame.plan = frame.plan!.rest;
          frame.next = 0;
          return;
        }
        this.finish(frame);
        return;
      }
      case ABSTRACT_VALUE: {
        const next = frame.classes === null ? frame.candidates[frame.next++] : frame.classes[frame.next++];
        if (next === undefined) {
          this.finish(frame);
          return;
        }
        if ('split' in next) {
          const value = frame.value!;
          const of = this.push(CLASS_VALUE);
          of.of = next;
          of.value = value;
          of.next = 0;
          return;
        }
        this.enterValue(frame.group!, next, frame.value!, frame.type);
        return;
      }
      case CLASS_VALUE: {
        const of = frame.of!;
        const part = frame.next++;
        if (part === 0) {
          this.enterValue(of.split.plain, of.standIn, frame.value!);
        } else if (part === 1) {
          // The most of the rests: an abstract frame over them, memoized by none.
          const rests = this.push(ABSTRACT_VALUE);
          rests.group = of.split.rests;
          rests.type = null;
          rests.value = frame.value;
          rests.candidates = of.types;
          rests.classes = null;
          rests.next = 0;
        } else {
          this.finish(frame);
        }
        return;
      }
      case FIELD_VALUE: {
        const entry = frame.entry!;
        const listDepth = entry.field.listDepth;
        while (frame.top >= 0) {
          const list = frame.lists[frame.top]!;
          const cursor = frame.cursors[frame.top]!;
          if (cursor >= list.length) {
            frame.top--;
            continue;
          }
          frame.cursors[frame.top] = cursor + 1;
          const item = list[cursor];
          if (frame.top + 1 < listDepth) {
            // An inner list: a null one holds nothing.
            if (Array.isArray(item)) {
              const top = ++frame.top;
              frame.lists[top] = item as unknown[];
              frame.cursors[top] = 0;
            }
            continue;
          }
          frame.slots++;
          if (entry.child !== null && entry.field.target !== null && isObject(item)) {
            frame.objects++;
            this.enterValue(entry.child, entry.field.target, item);
            return;
          }
        }
        if (frame.top === -2) frame.top = -1;
        this.finish(frame);
        return;
      }
    }
  }

  private finish(frame: Frame): void {
    const width = this.width;
    const at = this.depth * width;
    const stack = this.stack;
    if (frame.kind === FIELD_VALUE) {
      // count × weight + the items' sub-selections (already summed) + arguments; then the field's rules.
      const field = frame.entry!.field;
      stack[at] = sat((stack[at] ?? 0) + sat(frame.slots * field.weight));
      const fetches = this.input.fetches;
      if (field.graphs !== 0n && frame.objects > 0 && fetches !== undefined) {
        const entry = frame.entry!;
        const parent = this.frames[this.depth - 1]!.type!;
        stack[at] = sat((stack[at] ?? 0) + sat(frame.objects * fetches.perObject(parent, field, entry.node, entry.child?.selectionSets ?? [entry.node.selectionSet])));
      }
      if (field.arguments !== null) stack[at] = sat((stack[at] ?? 0) + this.input.arguments.price(frame.entry!.node, field.arguments));
      for (const rule of field.rules) {
        const i = at + 1 + rule.bucket;
        stack[i] = sat((stack[i] ?? 0) + (rule.cost ?? stack[at] ?? 0));
      }
    }
    if (frame.ambiguous) this.ambiguity--;
    if (frame.memoize) {
      const value = frame.value!;
      const memo = (this.memo ??= new Map());
      let byKey = memo.get(value);
      if (byKey === undefined) memo.set(value, (byKey = new Map()));
      byKey.set(frame.group!.id * this.typeCount + frame.type!.index, this.save(at));
    }
    this.depth--;
    if (this.depth >= 0) this.resume();
  }

  /** The frame above the current one is done: its result is in the next slot. */
  private resume(): void {
    const frame = this.frames[this.depth]!;
    const width = this.width;
    const at = this.depth * width;
    const child = at + width;
    const stack = this.stack;
    if (frame.kind === ABSTRACT_VALUE) {
      for (let i = 0; i < width; i++) {
        const value = stack[child + i] ?? 0;
        if (value > (stack[at + i] ?? 0)) stack[at + i] = value;
      }
    } else {
      for (let i = 0; i < width; i++) {
        const value = stack[child + i] ?? 0;
        if (value !== 0) stack[at + i] = sat((stack[at + i] ?? 0) + value);
      }
    }
  }

  /**
   * The possible types `value` can be: those whose selections give exactly
   * its keys (graphql-js writes every key it collects, null or not) and,
   * where a type's selections put `__typename` under a key, hold that type's
   * name there; else all of them. Of types whose plans price every object
   * alike, one stands for all: an interface of 400 types selected without
   * `__typename` is priced once per object, not 400 times.
   *
   * A key is `__typename` only for the types that select it there: another
   * type may alias a string field to the same key (`... on A { kind:
   * __typename } ... on B { kind: name }`), and whoever writes that string
   * could name a cheaper type with it.
   */
  private candidatesOf(group: Group, type: CompositeCost, value: Record<string, unknown>): readonly CompositeCost[] {
    const priced = this.priced(group, type);
    const byName = this.possibleByName(type);
    // The common case: a key no possible type uses for anything but `__typename`, so what it holds is the type's name.
    const typenameKey = this.typenameKey(group, type, priced);
    if (typenameKey !== null) {
      const name = value[typenameKey];
      const named = typeof name === 'string' ? byName.get(name) : undefined;
      if (named !== undefined) {
        const standIn = priced.standIn(named);
        if (holdsTypename(this.planOn(group, standIn, type), typenameKey)) return [standIn];
      }
    }
    const keys = Object.keys(value);
    const signature = `${type.name}\u0000${keys.join('\u0000')}`;
    let candidates = group.candidates.get(signature);
    if (candidates === undefined) {
      // A split group: the keys its plain fields give, told apart once, so each type reads only the others against its rest.
      const split = this.splitOf(group, type);
      const others = split === null ? keys : keys.filter((k) => !split.plainKeys.has(k));
      const plainCount = keys.length - others.length;
      const fitting = priced.types.filter((possible) => {
        const plan = this.planOn(group, possible, type);
        if (plan.rest === null) return plan.keys.size === keys.length && keys.every((k) => plan.keys.has(k));
        // Its own keys are exactly the plain keys (`planOn`).
        const rest = plan.rest.keys;
        return plainCount === plan.keys.size && rest.size === others.length && others.every((k) => rest.has(k));
      });
      // Keys no type's selections give (not graphql-js's output): any type, nothing narrows them.
      candidates =
        fitting.length === 0
          ? { fitting: priced.types, distinct: this.distinct(group, type, priced.types), named: false }
          : {
              fitting,
              distinct: this.distinct(group, type, fitting),
              named: fitting.some((possible) => this.planOn(group, possible, type).typename !== null),
            };
      group.candidates.set(signature, candidates);
    }
    if (!candidates.named || candidates.fitting.length === 1) return candidates.distinct;
    let named: CompositeCost[] | null = null;
    for (const possible of candidates.fitting) {
      const key = this.planOn(group, possible, type).typename;
      if (key === null) {
        (named ??= []).push(possible);
        continue;
      }
      const name = value[key];
      const holder = typeof name === 'string' ? byName.get(name) : undefined;
      if (holder !== undefined && priced.standIn(holder) === possible) (named ??= []).push(possible);
    }
    return named === null ? candidates.distinct : this.distinct(group, type, named);
  }

  /**
   * The possible types of `type` that can price `group` unlike each other:
   * those a narrower type condition of its selections names, and one of each
   * class of the others (selections.ts), which stands for its class. An
   * interface of 2,000 types selected without fragments on them is one
   * plan, not 2,000.
   */
  private priced(group: Group, type: CompositeCost): PricedTypes {
    let priced = group.priced.get(type);
    if (priced === undefined) {
      let names: Set<string> | null = new Set();
      for (const selectionSet of group.selectionSets) {
        const own = this.conditions.of(selectionSet, type);
        if (own === null) {
          names = null;
          break;
        }
        for (const name of own) names.add(name);
      }
      group.priced.set(type, (priced = pricedTypes(this.input.costs, type, names, this.refinements)));
    }
    return priced;
  }

  /** One type per plan shape among `types`, possible types of `abstract`. */
  private distinct(group: Group, abstract: CompositeCost, types: readonly CompositeCost[]): readonly CompositeCost[] {
    if (types.length < 2) return types;
    const seen = new Set<string>();
    const distinct: CompositeCost[] = [];
    for (const possible of types) {
      const shape = this.planOn(group, possible, abstract).shape;
      if (seen.has(shape)) continue;
      seen.add(shape);
      distinct.push(possible);
    }
    return distinct;
  }

  private possibleByName(type: CompositeCost): ReadonlyMap<string, CompositeCost> {
    let byName = this.byName.get(type);
    if (byName === undefined) {
      byName = new Map(type.possibleTypes!.map((possible) => [possible.name, possible]));
      this.byName.set(type, byName);
    }
    return byName;
  }

  /**
   * A number per field that is equal for two fields a response walk prices
   * alike: weight, list depth, type below, rules and argument costs (sizes
   * do not matter here: the response holds the items).
   */
  private fieldShape(field: FieldCost): number {
    let shape = this.fieldShapes.get(field);
    if (shape === undefined) {
      const key = `${field.weight}|${field.listDepth}|${field.target?.index ?? -1}|${chargeKey(field, this.inputKeys)}`;
      shape = this.shapeKeys.get(key);
      if (shape === undefined) this.shapeKeys.set(key, (shape = this.shapeKeys.size));
      this.fieldShapes.set(field, shape);
    }
    return shape;
  }

  /** A number per field node: its arguments are what the field is priced with. */
  private nodeId(node: FieldNode): number {
    let id = this.nodeIds.get(node);
    if (id === undefined) this.nodeIds.set(node, (id = this.nodeIds.size));
    return id;
  }

  /** A key that holds `__typename` in the selections of every possible type of `type` that has it, or null. */
  private typenameKey(group: Group, type: CompositeCost, priced: PricedTypes): string | null {
    let key = group.typenameKeys.get(type);
    if (key === undefined) {
      key = null;
      const plans = priced.types.map((possible) => this.planOn(group, possible, type));
      for (const plan of plans) {
        const candidate = plan.typename;
        if (candidate !== null && plans.every((p) => !holdsKey(p, candidate) || holdsTypename(p, candidate))) {
          key = candidate;
          break;
        }
      }
      group.typenameKeys.set(type, key);
    }
    return key;
  }

  /**
   * CollectFields for `group` on the object type `type`, once. A fragment
   * under an active `@defer` runs on its own (an executor with incremental
   * delivery collects it apart): its fields are entries of their own,
   * merged with nothing outside it, and read from the same keys.
   */
  private plan(group: Group, type: CompositeCost): Plan {
    const known = group.plans.get(type);
    if (known !== undefined) return known;
    const collections: Map<string, FieldNode[]>[] = [];
    const pendingSets: (readonly SelectionSetNode[])[] = [group.selectionSets];
    for (let sets = pendingSets.pop(); sets !== undefined; sets = pendingSets.pop()) {
      const byKey = new Map<string, FieldNode[]>();
      collections.push(byKey);
      const add = (selection: FieldNode): void => {
        const key = selection.alias?.value ?? selection.name.value;
        const nodes = byKey.get(key);
        if (nodes === undefined) byKey.set(key, [selection]);
        else nodes.push(selection);
      };
      this.collect(sets, type, new Set(), add, (set) => void pendingSets.push([set]), true);
    }
    const fields = type.fields ?? new Map<string, FieldCost>();
    const entries: PlanEntry[] = [];
    let typename: string | null = null;
    const typenames = new Set<string>();
    let main = -1;
    for (const byKey of collections) {
      if (main < 0 && byKey !== collections[0]) main = entries.length;
      for (const [key, nodes] of byKey) {
        const node = nodes[0]!;
        const name = node.name.value;
        const field = fields.get(name) ?? this.input.costs.metaFields.get(name);
        if (field === undefined) continue;
        if (name === '__typename') {
          typename ??= key;
          typenames.add(key);
        }
        let child: Group | null = null;
        if (field.target !== null) {
          const selectionSets: SelectionSetNode[] = [];
          for (const n of nodes) if (n.selectionSet !== undefined) selectionSets.push(n.selectionSet);
          if (selectionSets.length > 0) child = this.group(selectionSets);
        }
        entries.push({ key, field, node, child });
      }
    }
    const plan = this.planOf(entries, typename, typenames, main < 0 ? entries.length : main);
    group.plans.set(type, plan);
    return plan;
  }

  /** A plan of these entries. */
  private planOf(entries: readonly PlanEntry[], typename: string | null, typenames: ReadonlySet<string>, main: number): Plan {
    const shape = entries.map((e) => `${e.key.length}:${e.key}${this.fieldShape(e.field)}/${this.nodeId(e.node)}/${e.child?.id ?? -1}`).join(';');
    return { entries, keys: new Set(entries.map((e) => e.key)), typename, typenames, shape, rest: null, main };
  }

  /**
   * The plan of `group` on `type`, a possible type of the interface or
   * union `abstract` the group selects on: its plain fields' plan on the
   * first type of `type`'s class, which prices them alike (so they are read
   * once per class, however many types its conditions name), then the
   * rest's on `type`. A key of the plain fields the rest selects again
   * merges with them on `type` into the plain fields' entry where a plain
   * node runs first and the rest's add no sub-selections: it is left out of
   * the rest. Where the rest holds another (one it selects first, with
   * sub-selections, or under `@defer`), the whole group's plan on `type`.
   */
  private planOn(group: Group, type: CompositeCost, abstract: CompositeCost): Plan {
    const split = this.splitOf(group, abstract);
    if (split === null) return this.plan(group, type);
    let plan = split.plans.get(type);
    if (plan === undefined) {
      const plain = this.plan(split.plain, standInOf(abstract, type));
      let rest = this.plan(split.rest, type);
      let merges = plain.keys.size !== split.plainKeys.size;
      let kept: PlanEntry[] | null = null;
      for (let i = 0; i < rest.entries.length; i++) {
        const entry = rest.entries[i]!;
        const first = split.plainKeys.get(entry.key);
        if (first === undefined) kept?.push(entry);
        // graphql-js runs the first node (a plain one) with the sub-selections of all, none the rest's: the plain fields' entry as it is.
        else if (i < rest.main && first.at < split.restAt && first.name === entry.node.name.value && entry.child === null) kept ??= rest.entries.slice(0, i);
        else merges = true;
      }
      if (kept !== null && !merges) {
        const typenames = new Set([...rest.typenames].filter((key) => !split.plainKeys.has(key)));
        rest = this.planOf(kept, [...typenames][0] ?? null, typenames, rest.main - (rest.entries.length - kept.length));
      }
      plan = merges
        ? this.plan(group, type)
        : {
            entries: plain.entries,
            keys: plain.keys,
            typename: plain.typename ?? rest.typename,
            typenames: plain.typenames,
            shape: `\u0000${this.shapeId(plain)},${this.shapeId(rest)}`,
            rest,
            main: plain.main,
          };
      if (!merges) split.rests.plans.set(type, rest);
      split.plans.set(type, plan);
    }
    return plan;
  }

  /**
   * `candidates` of `abstract` to price for `group`, those whose plans
   * split gathered by class: the plain fields are priced once per class
   * beside the most of the candidates' rests, not once per candidate. Null
   * where that gathers nothing.
   */
  private classesOf(group: Group, abstract: CompositeCost, candidates: readonly CompositeCost[]): (CompositeCost | ClassCandidates)[] | null {
    const split = this.splitOf(group, abstract);
    if (split === null) return null;
    const byClass = new Map<CompositeCost, ClassCandidates>();
    const classes: (CompositeCost | ClassCandidates)[] = [];
    for (const possible of candidates) {
      if (this.planOn(group, possible, abstract).rest === null) {
        classes.push(possible);
        continue;
      }
      const standIn = standInOf(abstract, possible);
      let of = byClass.get(standIn);
      if (of === undefined) {
        byClass.set(standIn, (of = { split, standIn, types: [] }));
        classes.push(of);
      }
      of.types.push(possible);
    }
    return classes.length === candidates.length ? null : classes;
  }

  /** A number per plan shape: a split plan's shape names its parts' without spelling them out. */
  private shapeId(plan: Plan): number {
    let id = this.planShapes.get(plan.shape);
    if (id === undefined) this.planShapes.set(plan.shape, (id = this.planShapes.size));
    return id;
  }

  /** How `group` splits on `abstract` (see `planOn`): null without plain fields, or without anything else. */
  private splitOf(group: Group, abstract: CompositeCost): Split | null {
    const id = group.id * this.typeCount + abstract.index;
    let split = this.splits.get(id);
    if (split === undefined) {
      const plainSets: SelectionSetNode[] = [];
      const restSets: SelectionSetNode[] = [];
      const plainKeys = new Map<string, { at: number; name: string }>();
      let restAt = -1;
      group.selectionSets.forEach((selectionSet, s) => {
        const plain: SelectionNode[] = [];
        const rest: SelectionNode[] = [];
        selectionSet.selections.forEach((selection, position) => {
          const at = s * PLACE + position;
          if (selection.kind === FIELD && (selection.directives === undefined || selection.directives.length === 0) && declares(abstract, selection.name.value)) {
            plain.push(selection);
            const key = selection.alias?.value ?? selection.name.value;
            if (!plainKeys.has(key)) plainKeys.set(key, { at, name: selection.name.value });
          } else {
            rest.push(selection);
            if (restAt < 0) restAt = at;
          }
        });
        plainSets.push({ kind: Kind.SELECTION_SET, selections: plain });
        restSets.push({ kind: Kind.SELECTION_SET, selections: rest });
      });
      split =
        plainKeys.size === 0 || restAt < 0
          ? null
          : { plain: this.group(plainSets), rest: this.group(restSets), plainKeys, restAt, rests: this.freshGroup(restSets), plans: new Map() };
      this.splits.set(id, split);
    }
    return split;
  }

  /**
   * graphql-js CollectFields of `sets` on `type`, fragments expanded once
   * (`visited`): each field to `onField` and each deferred selection set
   * to `onDeferred`, in execution order. With `flatten`, a fragment spread
   * at this level is read from what it collects on `type`, kept per
   * fragment and type, so a fragment spread in many sets is walked once
   * per type, not once per set (what it holds beyond what graphql-js
   * visited before it is only fields that merge by key).
   */
  private collect(
    sets: readonly SelectionSetNode[],
    type: CompositeCost,
    visited: Set<string>,
    onField: (node: FieldNode) => void,
    onDeferred: (set: SelectionSetNode) => void,
    flatten: boolean,
  ): void {
    const variables = this.input.variables;
    const lists: (readonly SelectionNode[])[] = [];
    const cursors: number[] = [];
    for (let s = sets.length - 1; s >= 0; s--) {
      lists.push(sets[s]!.selections);
      cursors.push(0);
    }
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
      if (selection.kind === FIELD) {
        onField(selection);
      } else if (selection.kind === INLINE_FRAGMENT) {
        if (selection.typeCondition === undefined || applies(selection.typeCondition.name.value, type)) {
          if (deferred(selection.directives, variables)) {
            onDeferred(selection.selectionSet);
          } else {
            lists.push(selection.selectionSet.selections);
            cursors.push(0);
          }
        }
      } else if (selection.kind === FRAGMENT_SPREAD) {
        const name = selection.name.value;
        const defer = deferred(selection.directives, variables);
        if (!defer && visited.has(name)) continue;
        if (!defer) visited.add(name);
        const fragment = this.input.fragments.get(name);
        if (fragment === undefined || !applies(fragment.typeCondition.name.value, type)) continue;
        if (defer) {
          onDeferred(fragment.selectionSet);
        } else if (flatten) {
          const collected = this.collected(name, fragment.selectionSet, type);
          for (const node of collected.fields) onField(node);
          for (const set of collected.deferred) onDeferred(set);
          for (const inner of collected.visited) visited.add(inner);
        } else {
          lists.push(fragment.selectionSet.selections);
          cursors.push(0);
        }
      }
    }
  }

  /** What a fragment collects on `type` by itself: its fields, its deferred sets and the fragments it visits, once per fragment and type. */
  private collected(name: string, selectionSet: SelectionSetNode, type: CompositeCost): Collected {
    const key = `${type.index}\u0000${name}`;
    let collected = this.fragmentFields.get(key);
    if (collected === undefined) {
      const fields: FieldNode[] = [];
      const deferredSets: SelectionSetNode[] = [];
      const visited = new Set<string>([name]);
      this.collect([selectionSet], type, visited, (node) => void fields.push(node), (set) => void deferredSets.push(set), false);
      this.fragmentFields.set(key, (collected = { fields, deferred: deferredSets, visited }));
    }
    return collected;
  }

  /** A group of its own, shared with no other (its plans set by hand). */
  private freshGroup(selectionSets: readonly SelectionSetNode[]): Group {
    const group: Group = { id: this.groups.size, selectionSets, plans: new Map(), candidates: new Map(), typenameKeys: new Map(), priced: new Map() };
    this.groups.set(`\u0000${group.id}`, group);
    return group;
  }

  /** One group per distinct list of selection set contents, so that equal selections and merges share their plans and memo entries. */
  private group(selectionSets: readonly SelectionSetNode[]): Group {
    let key = '';
    for (const selectionSet of selectionSets) {
      let id = this.input.selectionSetIds.get(selectionSet);
      if (id === undefined) {
        id = this.extraIds.get(selectionSet);
        if (id === undefined) this.extraIds.set(selectionSet, (id = -1 - this.extraIds.size));
      }
      key += `${id},`;
    }
    let group = this.groups.get(key);
    if (group === undefined) {
      group = { id: this.groups.size, selectionSets, plans: new Map(), candidates: new Map(), typenameKeys: new Map(), priced: new Map() };
      this.groups.set(key, group);
    }
    return group;
  }

  private save(at: number): number {
    const width = this.width;
    let saved = this.saved;
    if (saved === null || this.savedLength + width > saved.length) {
      const grown = new Float64Array(Math.max(width * 64, 2 * (saved?.length ?? 0)));
      if (saved !== null) grown.set(saved);
      this.saved = saved = grown;
    }
    const where = this.savedLength;
    for (let i = 0; i < width; i++) saved[where + i] = this.stack[at + i] ?? 0;
    this.savedLength += width;
    return where;
  }

  private grow(needed: number): void {
    const grown = new Float64Array(Math.max(needed, 2 * this.stack.length));
    grown.set(this.stack);
    this.stack = grown;
  }
}

/** The first type of the class of `type`, a possible type of `abstract`: it prices the fields `abstract` declares as `type` does. */
function standInOf(abstract: CompositeCost, type: CompositeCost): CompositeCost {
  const tables = possibleTypesOf(abstract);
  const index = tables.classOf.get(type);
  return (index === undefined ? undefined : tables.members[index]?.[0]) ?? type;
}

/** Whether an object read by `plan` holds `key`. */
function holdsKey(plan: Plan, key: string): boolean {
  return plan.keys.has(key) || (plan.rest?.keys.has(key) ?? false);
}

/** Whether `plan` puts `__typename` under `key`. */
function holdsTypename(plan: Plan, key: string): boolean {
  return plan.typenames.has(key) || (plan.rest?.typenames.has(key) ?? false);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
