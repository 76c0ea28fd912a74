import type { FieldNode, SelectionSetNode } from 'graphql';
import type { Step, Work } from './budget.js';
import type { FieldPriceInput } from './field-prices.js';
import type { Flat, Guard, Level, Part } from './levels.js';
import type { CompositeCost, FieldCost } from './schema-costs.js';
import { sat } from './selections.js';
import { classesOf, typeNamed, within } from './type-tables.js';

/*
 * The actual cost: the estimate's formula over the response, each list's
 * size replaced by the number of items it holds, each object weighed by its
 * own type. An object's type is the one its `__typename` names, where a key
 * holds `__typename` for every type that could write it; else each key it
 * holds is priced as the most it could cost on any type that could have
 * written it (the types its selections' conditions allow, of those that
 * select every key it holds), so a refund never gives back more than the
 * work. The walk reads each key of each object once against the levels the
 * estimate built (levels.ts), never a plan per type: linear in the response.
 */

/** What the estimate's fields are priced with, less the sizes: a response's lists hold their own. */
export type ResponseInput = Omit<FieldPriceInput, 'sizes'>;

/** One way a key of an object may have run: on a type, with these selections merged (the first one's arguments). */
interface Variant {
  readonly type: CompositeCost;
  readonly nodes: readonly FieldNode[];
}

/** What an object's type may be: one type, or the possible types it could be (null: any of the level's). */
type Types = CompositeCost | ReadonlySet<CompositeCost> | null;

type Data = Record<string, unknown>;

export class ResponseWalk {
  private readonly width: number;
  private readonly work: Work;
  private readonly typenames = new Map<Level, readonly string[]>();
  private readonly flatTypenames = new WeakMap<Flat, ReadonlySet<string>>();
  private readonly variants = new Map<string, readonly Variant[]>();
  private readonly shapeReps = new Map<string, readonly CompositeCost[]>();
  private readonly weights = new WeakMap<ReadonlySet<CompositeCost>, number>();
  private readonly wheres = new Map<string, Guard | undefined>();
  /** Objects priced while a key's type was undecided, per level: priced again for another variant, read from here. */
  private readonly seen = new WeakMap<object, Map<number, Float64Array>>();

  constructor(private readonly input: ResponseInput) {
    this.width = input.costs.bucketNames.length + 1;
    this.work = input.work;
  }

  /** Complexity, then one charge per bucket, of the response `data` to the root selection set. */
  price(selectionSet: SelectionSetNode, root: CompositeCost, data: unknown): Float64Array {
    if (!isObject(data)) return new Float64Array(this.width);
    this.input.levels.work = this.work;
    const level = this.input.levels.levelOf([selectionSet], root);
    return this.work.run(this.object(level, data, false));
  }

  /** An object the level's selections produced; its own weight is its field's. */
  private *object(level: Level, value: Data, ambiguous: boolean): Step<Float64Array> {
    const memo = ambiguous ? this.seen.get(value)?.get(level.id) : undefined;
    if (memo !== undefined) return memo;
    const levels = this.input.levels;
    levels.prepared(level);
    const types = this.typesOf(level, value);
    const out = new Float64Array(this.width);
    for (const key in value) {
      this.work.spend(1);
      const item = value[key];
      const variants = this.variantsOf(level, key, types);
      let most: Float64Array | null = null;
      for (const variant of variants) {
        const field = variant.type.fields?.get(variant.nodes[0]!.name.value) ?? this.input.costs.metaFields.get(variant.nodes[0]!.name.value);
        if (field === undefined) continue;
        const measure = (yield this.field(field, variant.type, variant.nodes, item, ambiguous || variants.length > 1)) as Float64Array;
        most = most === null ? measure : maxInto(most, measure);
      }
      if (most !== null) addInto(out, most);
      // A deferred fragment runs apart and writes under the same key: priced on its own too.
      for (const part of level.parts) {
        if (!part.deferred || !this.partApplies(part, types)) continue;
        const entries = levels.flat(part.level).get(key);
        if (entries === undefined) continue;
        const type = single(types) ?? part.level.type;
        const field = type.fields?.get(entries[0]!.node.name.value) ?? this.input.costs.metaFields.get(entries[0]!.node.name.value);
        if (field !== undefined) addInto(out, (yield this.field(field, type, entries.map((e) => e.node), item, ambiguous)) as Float64Array);
      }
    }
    if (ambiguous) {
      let byLevel = this.seen.get(value);
      if (byLevel === undefined) this.seen.set(value, (byLevel = new Map()));
      byLevel.set(level.id, out);
    }
    return out;
  }

  /**
   * A field's value: `count × weight + the items' sub-selections +
   * arguments`, its rules, and (federated) the entity fetches each object
   * costs. Each object weighs what its own type does where the weight is
   * the type's.
   */
  private *field(field: FieldCost, parent: CompositeCost, nodes: readonly FieldNode[], value: unknown, ambiguous: boolean): Step<Float64Array> {
    const out = new Float64Array(this.width);
    const target = field.target;
    const sets = selectionSetsOf(nodes);
    const level = target !== null && sets !== null ? this.input.levels.levelOf(sets, target) : null;
    let objects = 0;
    // Each item: an object priced below (weighing its own type), or a null or leaf (weighing the field's weight).
    let item: unknown = value;
    // Nested lists without recursion: a cursor per level.
    let lists: unknown[][] | null = null;
    let cursors: number[] | null = null;
    if (field.listDepth > 0) {
      if (!Array.isArray(value)) item = NOTHING;
      else {
        lists = [value as unknown[]];
        cursors = [0];
        item = NOTHING;
      }
    }
    for (;;) {
      if (item !== NOTHING) {
        if (level !== null && isObject(item)) {
          objects++;
          addInto(out, (yield this.object(level, item, ambiguous)) as Float64Array);
          out[0] = sat((out[0] ?? 0) + (field.typeWeighted ? this.weightOf(level, item) : field.weight));
        } else {
          out[0] = sat((out[0] ?? 0) + field.weight);
        }
        item = NOTHING;
      }
      if (lists === null || cursors === null || lists.length === 0) break;
      const top = lists.length - 1;
      const list = lists[top]!;
      const cursor = cursors[top]!;
      if (cursor >= list.length) {
        lists.pop();
        cursors.pop();
        continue;
      }
      cursors[top] = cursor + 1;
      this.work.spend(1);
      if (lists.length < field.listDepth) {
        // An inner list: a null one holds nothing.
        const inner = list[cursor];
        if (Array.isArray(inner)) {
          lists.push(inner as unknown[]);
          cursors.push(0);
        }
        continue;
      }
      item = list[cursor];
    }
    const fetches = this.input.fetches;
    if (field.graphs !== 0n && objects > 0 && fetches !== undefined) {
      out[0] = sat((out[0] ?? 0) + sat(objects * fetches.perObject(parent, field, nodes[0]!, sets ?? [nodes[0]!.selectionSet])));
    }
    if (field.arguments !== null) out[0] = sat((out[0] ?? 0) + this.input.arguments.price(nodes[0]!, field.arguments));
    for (const rule of field.rules) {
      const i = 1 + rule.bucket;
      out[i] = sat((out[i] ?? 0) + (rule.cost ?? out[0] ?? 0));
    }
    return out;
  }

  /** What an object of an abstract level weighs: its own type's weight, the most of the types it could be. */
  private weightOf(level: Level, value: Data): number {
    const types = this.typesOf(level, value);
    if (types === null) return level.type.weight;
    if (!(types instanceof Set)) return (types as CompositeCost).weight;
    const set = types as ReadonlySet<CompositeCost>;
    let weight = this.weights.get(set);
    if (weight === undefined) {
      weight = 0;
      for (const type of set) weight = Math.max(weight, type.weight);
      this.weights.set(set, weight);
    }
    return weight;
  }

  /**
   * The type an object is: the level's own when it is an object type; the
   * one a key holding `__typename` for every type that writes it names;
   * else the types whose conditions allow every key the object holds.
   */
  private typesOf(level: Level, value: Data): Types {
    const type = level.type;
    if (type.possibleTypes === null) return type;
    for (const key of this.typenameKeys(level)) {
      const name = value[key];
      if (typeof name !== 'string') continue;
      // By name, in the schema's table: a scan of the possible types per object grew with the types, not the response.
      const named = typeNamed(this.input.costs, name);
      if (named !== undefined && named.possibleTypes === null && within(named, type)) return named;
    }
    let types: Guard = null;
    for (const key in value) {
      const where = this.whereKey(level, key);
      if (where === undefined || where === null) continue;
      types = types === null ? where : (this.input.levels.intersect(types, where) ?? types);
    }
    return types;
  }

  /** The types a key can be written on at a level: null for any, undefined when no selection of the level writes it. */
  private whereKey(level: Level, key: string): Guard | undefined {
    const id = `${level.id}:${key}`;
    if (this.wheres.has(id)) return this.wheres.get(id);
    let where: Guard | undefined;
    const unite = (guard: Guard): void => {
      if (where === null) return;
      where = guard === null || where === undefined ? guard : new Set([...where, ...guard]);
    };
    for (const occurrence of level.fields.get(key) ?? []) unite(occurrence.guard);
    for (const part of level.parts) {
      if (where === null) break;
      const entries = part.deferred ? undefined : this.input.levels.flat(part.level).get(key);
      if (entries === undefined) continue;
      for (const entry of entries) {
        const guard = this.input.levels.intersect(part.guard, entry.guard);
        if (guard !== undefined) unite(guard === null && part.level.type.possibleTypes === null ? new Set([part.level.type]) : guard);
      }
    }
    this.wheres.set(id, where);
    return where;
  }

  /** Keys of a level that hold `__typename` wherever they are written. */
  private typenameKeys(level: Level): readonly string[] {
    let keys = this.typenames.get(level);
    if (keys === undefined) {
      const found = new Set<string>();
      for (const [key, occurrences] of level.fields) if (occurrences.every((o) => o.node.name.value === '__typename')) found.add(key);
      for (const part of level.parts) for (const key of this.flatTypenameKeys(this.input.levels.flat(part.level))) found.add(key);
      keys = [...found].filter((key) => this.onlyTypename(level, key));
      this.typenames.set(level, keys);
    }
    return keys;
  }

  private flatTypenameKeys(flat: Flat): ReadonlySet<string> {
    let keys = this.flatTypenames.get(flat);
    if (keys === undefined) {
      const found = new Set<string>();
      for (const [key, entries] of flat) if (entries.every((e) => e.node.name.value === '__typename')) found.add(key);
      this.flatTypenames.set(flat, (keys = found));
    }
    return keys;
  }

  private onlyTypename(level: Level, key: string): boolean {
    for (const occurrence of level.fields.get(key) ?? []) if (occurrence.node.name.value !== '__typename') return false;
    for (const part of level.parts) {
      for (const entry of this.input.levels.flat(part.level).get(key) ?? []) if (entry.node.name.value !== '__typename') return false;
    }
    return true;
  }

  /**
   * The ways a key may have run on an object of these types: on a known
   * type, its selections there; else on each type its conditions name and
   * on one type per shape its field has among the others.
   */
  private variantsOf(level: Level, key: string, types: Types): readonly Variant[] {
    const typeId = types === null ? 'a' : types instanceof Set ? `s${this.setId(types as ReadonlySet<CompositeCost>)}` : `t${(types as CompositeCost).index}`;
    const id = `${level.id}:${typeId}:${key}`;
    let variants = this.variants.get(id);
    if (variants !== undefined) return variants;
    const found: Variant[] = [];
    const known = single(types);
    if (known !== null) {
      const nodes = this.nodesAt(level, key, known);
      if (nodes.length > 0) found.push({ type: known, nodes });
    } else {
      const candidates = new Set<CompositeCost>();
      const name = this.anyNode(level, key)?.name.value;
      if (name !== undefined) {
        for (const occurrence of level.fields.get(key) ?? []) if (occurrence.guard !== null) for (const type of occurrence.guard) candidates.add(type);
        for (const part of level.parts) {
          if (part.deferred) continue;
          for (const entry of this.input.levels.flat(part.level).get(key) ?? []) {
            const guard = this.input.levels.intersect(part.guard, entry.guard);
            if (guard !== null && guard !== undefined) for (const type of guard) candidates.add(type);
          }
        }
        for (const type of this.shapeRepresentatives(level.type, name, types as ReadonlySet<CompositeCost> | null)) candidates.add(type);
      }
      const allowed = types as ReadonlySet<CompositeCost> | null;
      const seen = new Set<string>();
      for (const type of candidates) {
        if (!within(type, level.type) || (allowed !== null && !allowed.has(type))) continue;
        const nodes = this.nodesAt(level, key, type);
        if (nodes.length === 0) continue;
        const signature = `${this.input.costs.shapes.of(type.fields?.get(nodes[0]!.name.value))}:${nodes.map((n) => this.nodeId(n)).join(',')}`;
        if (seen.has(signature)) continue;
        seen.add(signature);
        found.push({ type, nodes });
      }
    }
    this.variants.set(id, (variants = found));
    return variants;
  }

  /** The field nodes of `key` that run on an object of `type`, in execution order (the level's own, else the one part that holds it). */
  private nodesAt(level: Level, key: string, type: CompositeCost): FieldNode[] {
    const nodes: FieldNode[] = [];
    const add = (node: FieldNode): void => {
      if (!nodes.includes(node)) nodes.push(node);
    };
    for (const occurrence of level.fields.get(key) ?? []) if (occurrence.guard === null || occurrence.guard.has(type)) add(occurrence.node);
    if (nodes.length > 0) return nodes;
    for (const part of level.parts) {
      if (part.deferred || (part.guard !== null && !part.guard.has(type)) || !within(type, part.level.type)) continue;
      for (const entry of this.input.levels.flat(part.level).get(key) ?? []) if (entry.guard === null || entry.guard.has(type)) add(entry.node);
      if (nodes.length > 0) return nodes;
    }
    return nodes;
  }

  private anyNode(level: Level, key: string): FieldNode | undefined {
    const own = level.fields.get(key)?.[0]?.node;
    if (own !== undefined) return own;
    for (const part of level.parts) {
      const entry = this.input.levels.flat(part.level).get(key)?.[0];
      if (entry !== undefined) return entry.node;
    }
    return undefined;
  }

  /** One of the possible types of `type` (those of `allowed`) per shape its field `name` has among them: kept per type, name and set. */
  private shapeRepresentatives(type: CompositeCost, name: string, allowed: ReadonlySet<CompositeCost> | null): readonly CompositeCost[] {
    const id = `${type.index}:${allowed === null ? '' : this.setId(allowed)}:${name}`;
    let reps = this.shapeReps.get(id);
    if (reps === undefined) {
      const byShape = new Map<number, CompositeCost>();
      // Types of one class price the abstract type's own fields alike: one of each class is enough for those.
      const declared = 'getFields' in type.type && Object.prototype.hasOwnProperty.call(type.type.getFields(), name);
      const pool =
        allowed !== null ? allowed : declared || name === '__typename' ? classesOf(type).members.map((members) => members[0]!) : (type.possibleTypes ?? [type]);
      for (const possible of pool) {
        const shape = this.input.costs.shapes.of(possible.fields?.get(name));
        if (!byShape.has(shape)) byShape.set(shape, possible);
      }
      this.shapeReps.set(id, (reps = [...byShape.values()]));
    }
    return reps;
  }

  private partApplies(part: Part, types: Types): boolean {
    const known = single(types);
    if (known !== null) return (part.guard === null || part.guard.has(known)) && within(known, part.level.type);
    return true;
  }

  private readonly setIds = new WeakMap<object, number>();
  private readonly nodeIds = new WeakMap<FieldNode, number>();
  private ids = 0;

  private setId(set: object): number {
    let id = this.setIds.get(set);
    if (id === undefined) this.setIds.set(set, (id = this.ids++));
    return id;
  }

  private nodeId(node: FieldNode): number {
    let id = this.nodeIds.get(node);
    if (id === undefined) this.nodeIds.set(node, (id = this.ids++));
    return id;
  }
}

/** The distinct sub-selections of merged field nodes, or null for a leaf. */
function selectionSetsOf(nodes: readonly FieldNode[]): SelectionSetNode[] | null {
  let sets: SelectionSetNode[] | null = null;
  for (const node of nodes) {
    const set = node.selectionSet;
    if (set === undefined) continue;
    if (sets === null) sets = [set];
    else if (!sets.includes(set)) sets.push(set);
  }
  return sets;
}

/** No item yet (a list's cursor moves first). */
const NOTHING = Symbol('nothing');

/** The one type `types` names, or null. */
function single(types: Types): CompositeCost | null {
  return types === null || types instanceof Set ? null : (types as CompositeCost);
}

function isObject(value: unknown): value is Data {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function addInto(into: Float64Array, measure: Float64Array): void {
  for (let i = 0; i < into.length; i++) {
    const value = measure[i] ?? 0;
    if (value !== 0) into[i] = sat((into[i] ?? 0) + value);
  }
}

function maxInto(into: Float64Array, measure: Float64Array): Float64Array {
  for (let i = 0; i < into.length; i++) if ((measure[i] ?? 0) > (into[i] ?? 0)) into[i] = measure[i] ?? 0;
  return into;
}
