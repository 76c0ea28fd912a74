import { Kind, getNullableType, isInputObjectType, isListType, valueFromAST } from 'graphql';
import type { FieldNode, FragmentDefinitionNode, SelectionSetNode, ValueNode } from 'graphql';
import type { ArgumentPricer } from './argument-costs.js';
import type { CompositeCost, FieldCost, SchemaCosts, SizedContext, SlicingArgument } from './schema-costs.js';
import { FieldCollector } from './collect-fields.js';
import type { Exclusion, Group, Plan, SpreadItem } from './collect-fields.js';
import type { FetchCounts } from './fetch-counts.js';
import { childContext } from './sized-contexts.js';
import { NarrowerConditions, pricedTypes } from './selections.js';
import type { Classes } from './selections.js';
import { largerSize, sizeOf } from './sizes.js';
import type { SizeTerms } from './size-terms.js';
import { addTerms, envelope, scaleTerms, substituteAll, substituteNearest } from './size-terms.js';

const hasOwn = Object.prototype.hasOwnProperty;
// `Kind` read once: run through tsx, each `Kind.X` was a getter call into graphql's CommonJS build.
const VARIABLE = Kind.VARIABLE;
const INT = Kind.INT;
const FLOAT = Kind.FLOAT;
const STRING = Kind.STRING;
const NULL = Kind.NULL;
const OBJECT = Kind.OBJECT;
const LIST = Kind.LIST;
const MAX_INT = 2147483647;
const NO_PATH: readonly string[] = [];
const MIN_INT = -2147483648;
/** Frames the walk starts with: deeper operations grow it. */
const INITIAL_DEPTH = 16;
/** Memoized frames the store starts with, once one is needed. */
const INITIAL_SAVED = 64;

// What a frame waits for from the frame above it.
const NOTHING = 0;
const FIELD_SELECTION = 1;
const SPREAD = 2;
const POSSIBLE_TYPE = 3;

/*
 * A measure (what a selection set costs per instance of its parent) is a
 * vector of `1 + bucketCount` numbers, the complexity then the charge per
 * bucket index, plus size terms when it lies inside a sized connection
 * (size-terms.ts). The vectors live in one typed array used as a stack, one
 * slot per frame; the frames themselves are reused objects on an explicit
 * stack, so the walk allocates nothing per selection and never recurses:
 * however deep an operation nests, the call stack stays flat.
 */

/** One memoized evaluation of a group on a type; a short list per (content, type), as most meet one context. */
interface MemoEntry {
  readonly context: SizedContext | null;
  /** The response keys taken out of a fragment (merged where it is spread), or ''. */
  readonly excluded: string;
  /** Where the measure's vector was saved in `Walk.saved`. */
  readonly at: number;
  readonly terms: SizeTerms;
  readonly next: MemoEntry | undefined;
}

export interface MeasureInput {
  readonly costs: SchemaCosts;
  readonly defaultListSize: number;
  readonly fragments: ReadonlyMap<string, FragmentDefinitionNode>;
  /**
   * True when one selection set node sits at several places of the document
   * (a hand-built document can share nodes; a parsed one never does): then
   * every selection set may be met more than once, and all are memoized.
   */
  readonly sharesSelectionSets: boolean;
  /** Selection sets numbered by content (selections.ts): equal numbers price alike. */
  readonly selectionSetIds: ReadonlyMap<SelectionSetNode, number>;
  /** Per number: 1 where selection sets of that content sit at several places, so a memo entry for it is read again. */
  readonly repeated: Uint8Array;
  /** Coerced variable values. */
  readonly variables: Readonly<Record<string, unknown>>;
  /** The variables as the request sent them, for sizes a custom scalar would hide. */
  readonly rawVariables: Readonly<Record<string, unknown>>;
  readonly arguments: ArgumentPricer;
  /** The document's collected fields when they do not depend on the variables (no `@skip`/`@include` reads one); else a new one is made. */
  readonly collector?: FieldCollector | undefined;
  /** Federation: the fetches a gateway makes per object beyond the one that returned it. */
  readonly fetches?: FetchCounts | undefined;
}

export interface OperationMeasure {
  /** The operation's complexity; fractional until the caller rounds up. */
  readonly complexity: number;
  /** Per bucket index; fractional until the caller rounds up. */
  readonly charges: Float64Array;
  /** 1 where the operation selects a field that charges that bucket. */
  readonly touched: Uint8Array;
}

/**
 * Prices one operation against the compiled schema, field by response key
 * as graphql-js collects them (collect-fields.ts). Every (group, type,
 * sized context) is evaluated once, so fragments spread many times, nested
 * abstract types and one fragment under many differently sized connections
 * cost linear work; sums and products saturate at `Number.MAX_VALUE` so
 * huge operations stay finite and comparable.
 */
export function measureOperation(input: MeasureInput, selectionSet: SelectionSetNode, root: CompositeCost): OperationMeasure {
  const walk = new Walk(input);
  walk.run(selectionSet, root);
  return { complexity: walk.stack[0] ?? 0, charges: walk.stack.slice(1, walk.width), touched: walk.touched };
}

class Frame {
  group: Group | null = null;
  type: CompositeCost | null = null;
  context: SizedContext | null = null;
  /**
   * The size of the field whose own `sizedFields` this selection set is
   * priced for (variable 0), when known; else -1. An abstract type then takes
   * its most expensive possible type exactly, at that size.
   */
  size = -1;
  /** Response keys of a fragment merged where it is spread: skipped here. */
  excluded: Exclusion | null = null;
  /** Selection sets below this one may be met again with the same type: memoize them. */
  shared = false;
  /** Save this frame's measure when it is done. */
  memoize = false;
  /** The memo key: group number and type. */
  key = -1;
  terms: SizeTerms = null;
  /** An abstract type's next possible type to evaluate; -1 for an object type. */
  nextType = -1;
  /** An abstract type's possible types to evaluate: all of them, or one per class. */
  types: readonly CompositeCost[] = [];
  /** An object type's plan, and the next item of it. */
  plan: Plan | null = null;
  next = 0;
  waiting = NOTHING;
  field: FieldNode | null = null;
  fieldCost: FieldCost | null = null;
  /** The selection sets of every field node merged under the field's response key. */
  fieldSets: readonly SelectionSetNode[] = [];
}

class Walk {
  readonly touched: Uint8Array;
  /** Numbers per frame: the complexity, then one charge per bucket. */
  readonly width: number;
  /** The frames' vectors; the root's is at 0. */
  stack: Float64Array;
  private readonly frames: Frame[] = [];
  private depth = -1;
  private readonly costs: SchemaCosts;
  private readonly collector: FieldCollector;
  /** Memoized vectors, `width` numbers each. */
  private saved: Float64Array | null = null;
  private savedLength = 0;
  /** Only groups that can be met more than once are memoized (see `enter`), by group number and type. */
  private memo: Map<number, MemoEntry> | null = null;
  /** The same for abstract types priced at a known size: by group number and type, then size. */
  private sizedMemo: Map<number, Map<number, MemoEntry>> | null = null;
  private readonly typeCount: number;
  private readonly conditions: NarrowerConditions;
  /** `typesToPrice` answers where conditions narrow, by type and the conditions named. */
  private typeLists: Map<string, readonly CompositeCost[]> | null = null;
  /** Classes of possible types split by conditions on other interfaces and unions, per set of them. */
  private readonly refinements = new Map<string, Classes>();

  constructor(private readonly input: MeasureInput) {
    this.costs = input.costs;
    const bucketCount = input.costs.bucketNames.length;
    this.width = bucketCount + 1;
    this.touched = new Uint8Array(bucketCount);
    this.stack = new Float64Array(this.width * INITIAL_DEPTH);
    this.typeCount = input.costs.types.size;
    this.collector = input.collector ?? new FieldCollector(input.costs, input.fragments, input.variables, input.selectionSetIds);
    this.conditions = new NarrowerConditions(input.costs, input.fragments, input.selectionSetIds, this.typeCount);
  }

  run(selectionSet: SelectionSetNode, root: CompositeCost): void {
    const shared = this.input.sharesSelectionSets;
    this.enter(this.collector.group([selectionSet]), root, null, -1, shared, shared, null);
    while (this.depth >= 0) this.step();
  }

  /**
   * Starts measuring `group` on `type` into the slot above the current
   * frame, or, when memoized, puts the saved measure there and hands it to
   * the current frame at once.
   *
   * `memoize` says the group may be met again with the same type and
   * context: it is a fragment's, or lies below a fragment or an abstract
   * type (each possible type evaluates it again). So is one whose content
   * sits at several places (`a: node { id } b: node { id }`, each costing
   * every possible type of an interface otherwise). Any other group belongs
   * to one field of the operation and is met exactly once, so a memo entry
   * for it would never be read.
   */
  private enter(
    group: Group,
    type: CompositeCost,
    context: SizedContext | null,
    size: number,
    shared: boolean,
    memoize: boolean,
    excluded: Exclusion | null,
    abstract: CompositeCost | null = null,
  ): void {
    const width = this.width;
    const depth = this.depth + 1;
    const at = depth * width;
    if (at + 2 * width > this.stack.length) this.grow(at + 2 * width);
    const key = group.id * this.typeCount + type.index;
    if (type.possibleTypes === null) size = -1;
    const content = this.collector.contentIdOf(group);
    // Content met again (a set of one content only: merged groups are rare).
    if (content !== undefined && content >= 0 && this.input.repeated[content] === 1) memoize = true;
    const excludedId = excluded === null ? '' : excluded.id;
    if (memoize) {
      const first = size < 0 ? this.memo?.get(key) : this.sizedMemo?.get(key)?.get(size);
      for (let entry = first; entry !== undefined; entry = entry.next) {
        if (entry.context === context && entry.excluded === excludedId) {
          this.restore(entry.at, at);
          this.resume(entry.terms);
          return;
        }
      }
    }
    const stack = this.stack;
    for (let i = at; i < at + width; i++) stack[i] = 0;
    let frame = this.frames[depth];
    if (frame === undefined) this.frames[depth] = frame = new Frame();
    frame.group = group;
    frame.type = type;
    frame.context = context;
    frame.size = size;
    frame.excluded = excluded;
    frame.shared = shared;
    frame.memoize = memoize;
    frame.key = key;
    frame.terms = null;
    frame.waiting = NOTHING;
    frame.next = 0;
    if (type.possibleTypes !== null) {
      frame.nextType = 0;
      frame.plan = null;
    } else {
      frame.nextType = -1;
      // A possible type of an abstract type: its plain fields priced once per class of them (collect-fields.ts).
      frame.plan = abstract === null ? this.collector.plan(group, type) : this.collector.planOn(group, type, abstract);
    }
    this.depth = depth;
  }

  private step(): void {
    const frame = this.frames[this.depth]!;
    const type = frame.type!;
    const possibleTypes = type.possibleTypes;
    if (possibleTypes !== null) {
      // An interface or union: each possible type is priced on its own; the
      // most expensive one wins per component. The group is met once per
      // possible type, so what lies below it is shared. The possible types'
      // own measures are never looked up again (the entry for the abstract
      // type replaces them), unless the document shares nodes. Of the types
      // no narrower type condition names, one per class of types that price
      // the abstract type's fields alike stands for all.
      if (frame.nextType === 0) frame.types = this.typesToPrice(frame.group!, type);
      const next = frame.types[frame.nextType];
      if (next !== undefined) {
        frame.nextType++;
        frame.waiting = POSSIBLE_TYPE;
        this.enter(frame.group!, next, frame.context, -1, true, this.input.sharesSelectionSets, null, type);
        return;
      }
      this.finish(frame);
      return;
    }

    const items = frame.plan!.items;
    const excluded = frame.excluded;
    while (frame.next < items.length) {
      const item = items[frame.next++]!;
      if (!item.spread) {
        if (excluded !== null && excluded.keys.has(item.key)) continue;
        const field = item.field;
        const node = item.nodes[0]!;
        if (item.child !== null && field.target !== null) {
          frame.waiting = FIELD_SELECTION;
          frame.field = node;
          frame.fieldCost = field;
          frame.fieldSets = item.child.selectionSets;
          const context = frame.context === null && field.sized === null ? null : childContext(frame.context, field);
          const size = field.sized !== null && field.target.possibleTypes !== null ? this.listSize(node, field) : -1;
          this.enter(item.child, field.target, context, size, frame.shared, frame.shared, null);
          return;
        }
        this.field(frame, node, field, false, null);
      } else {
        frame.waiting = SPREAD;
        // A fragment may be met again; a segment of a plan only as often as the plan.
        const shared = item.segment ? frame.shared : true;
        // On the plan's own type: a possible type's plain fields are priced on the type that stands for its class.
        this.enter(item.plan.group, item.plan.type, frame.context, -1, shared, shared, this.exclusion(item, excluded));
        return;
      }
    }
    this.finish(frame);
  }

  /** What a spread leaves out: the keys merged where it is spread, and those merged further out that it holds. */
  private exclusion(item: SpreadItem, outer: Exclusion | null): Exclusion | null {
    const own = item.excluded;
    if (outer === null || item.deferred) return own;
    const keys = this.collector.keysOf(item.plan);
    let out: string[] | null = null;
    for (const key of outer.keys) {
      if (keys.has(key) && own?.keys.has(key) !== true) (out ??= own === null ? [] : [...own.keys]).push(key);
    }
    if (out === null) return own;
    out.sort();
    return { keys: new Set(out), id: out.join('\u0000') };
  }

  private finish(frame: Frame): void {
    const at = this.depth * this.width;
    if (frame.memoize) {
      let memo: Map<number, MemoEntry>;
      let slot: number;
      if (frame.size < 0) {
        memo = this.memo ??= new Map();
        slot = frame.key;
      } else {
        const sized = (this.sizedMemo ??= new Map());
        let bySize = sized.get(frame.key);
        if (bySize === undefined) sized.set(frame.key, (bySize = new Map()));
        memo = bySize;
        slot = frame.size;
      }
      memo.set(slot, {
        context: frame.context,
        excluded: frame.excluded === null ? '' : frame.excluded.id,
        at: this.save(at),
        terms: frame.terms,
        next: memo.get(slot),
      });
    }
    this.depth--;
    if (this.depth >= 0) this.resume(frame.terms);
  }

  /** The frame above the current one is done (or was restored): its measure is in the next slot. */
  private resume(childTerms: SizeTerms): void {
    const frame = this.frames[this.depth]!;
    const width = this.width;
    const at = this.depth * width;
    const child = at + width;
    const stack = this.stack;
    switch (frame.waiting) {
      case POSSIBLE_TYPE:
        // At a known size, each possible type is priced there and the largest wins exactly.
        if (frame.size >= 0) childTerms = substituteNearest(childTerms, frame.size, stack, child, false);
        for (let i = 0; i < width; i++) {
          const value = stack[child + i] ?? 0;
          if (value > (stack[at + i] ?? 0)) stack[at + i] = value;
        }
        frame.terms = envelope(frame.terms, childTerms, width);
        break;
      case SPREAD:
        for (let i = 0; i < width; i++) {
          const value = stack[child + i] ?? 0;
          if (value !== 0) stack[at + i] = sat((stack[at + i] ?? 0) + value);
        }
        frame.terms = addTerms(frame.terms, childTerms);
        break;
      case FIELD_SELECTION:
        this.field(frame, frame.field!, frame.fieldCost!, true, childTerms);
        break;
    }
    frame.waiting = NOTHING;
  }

  /**
   * Adds one field selection to `frame`: `count × (weight + sub-selections)
   * + arguments` to the complexity, `count ×` the sub-selections' charges,
   * and what the field's own rules charge. With `measured`, the
   * sub-selections' measure is in the next slot; else it is zero.
   */
  private field(frame: Frame, node: FieldNode, field: FieldCost, measured: boolean, childTerms: SizeTerms): void {
    const width = this.width;
    const at = this.depth * width;
    const sub = at + width;
    const stack = this.stack;
    if (!measured && (frame.context === null || !field.isList)) {
      // A leaf (most fields): `count × weight + arguments`, and its rules.
      let complexity = field.weight;
      if (field.isList && complexity !== 0) complexity = sat(sat(this.listSize(node, field) * field.innerCount) * complexity);
      if (field.arguments !== null) complexity = sat(complexity + this.input.arguments.price(node, field.arguments));
      stack[at] = sat((stack[at] ?? 0) + complexity);
      const rules = field.rules;
      for (let r = 0; r < rules.length; r++) {
        const rule = rules[r]!;
        this.touched[rule.bucket] = 1;
        const i = at + 1 + rule.bucket;
        stack[i] = sat((stack[i] ?? 0) + (rule.cost ?? complexity));
      }
      return;
    }
    if (!measured) for (let i = sub; i < sub + width; i++) stack[i] = 0;
    let terms = childTerms;
    // This field's own sizedFields: its size is now known.
    if (field.sized !== null && terms !== null) terms = substituteNearest(terms, this.listSize(node, field), stack, sub);

    stack[sub] = sat((stack[sub] ?? 0) + field.weight);
    // Federation: the entity fetches each object costs the gateway.
    const fetches = this.input.fetches;
    if (field.graphs !== 0n && fetches !== undefined) stack[sub] = sat((stack[sub] ?? 0) + fetches.perObject(frame.type!, field, node, frame.fieldSets));
    const sizedBy = field.isList && frame.context !== null ? frame.context.entries.get(field.name)?.vars : undefined;
    if (sizedBy !== undefined && sizedBy.length > 0) {
      // Sized by an enclosing connection whose size is not known here:
      // `max(s, own) × inner × unit`, as size terms.
      if (terms !== null) substituteAll(terms, Number.MAX_VALUE, stack, sub); // no schema sizes a field and a path below it
      const own = this.ownSize(node, field);
      const inner = field.innerCount;
      const x = new Float64Array(width);
      for (let i = 0; i < width; i++) {
        x[i] = sat(inner * (stack[sub + i] ?? 0));
        stack[sub + i] = own === 0 ? 0 : sat(own * (x[i] ?? 0));
      }
      terms = sizedBy.map((v, i) => ({ v, b: i === 0 ? own : 0, x }));
    } else if (field.isList) {
      const count = sat(this.listSize(node, field) * field.innerCount);
      if (count !== 1) {
        for (let i = sub; i < sub + width; i++) {
          const value = stack[i] ?? 0;
          if (value !== 0) stack[i] = sat(count * value);
        }
        terms = scaleTerms(terms, count);
      }
    }
    if (field.arguments !== null) stack[sub] = sat((stack[sub] ?? 0) + this.input.arguments.price(node, field.arguments));

    const rules = field.rules;
    for (let r = 0; r < rules.length; r++) {
      const rule = rules[r]!;
      this.touched[rule.bucket] = 1;
      const i = sub + 1 + rule.bucket;
      stack[i] = sat((stack[i] ?? 0) + (rule.cost ?? stack[sub] ?? 0));
      // A bucket charged the field's complexity grows with its size too.
      if (rule.cost === null && terms !== null) {
        terms = terms.map((t) => {
          const x = t.x.slice();
          x[1 + rule.bucket] = sat((x[1 + rule.bucket] ?? 0) + (x[0] ?? 0));
          return { v: t.v, b: t.b, x };
        });
      }
    }

    for (let i = 0; i < width; i++) {
      const value = stack[sub + i] ?? 0;
      if (value !== 0) stack[at + i] = sat((stack[at + i] ?? 0) + value);
    }
    if (terms !== null) frame.terms = addTerms(frame.terms, terms);
  }

  /** A list's size: its largest slicing argument (an unusable value counting as the assumed size), else the assumed size. */
  private listSize(node: FieldNode, field: FieldCost): number {
    const assumed = field.assumedSize ?? this.input.defaultListSize;
    let size = -1;
    const slicing = field.slicing;
    for (let s = 0; s < slicing.length; s++) {
      const value = this.slicingSize(node, slicing[s]!);
      if (Number.isNaN(value)) continue;
      const candidate = value < 0 ? assumed : value;
      if (candidate > size) size = candidate;
    }
    return size < 0 ? assumed : size;
  }

  /** A sized field's own slicing argument, where usable; 0 without one (its assumed size does not count). */
  private ownSize(node: FieldNode, field: FieldCost): number {
    let size = 0;
    for (const slicing of field.slicing) {
      const value = this.slicingSize(node, slicing);
      if (value > size) size = value;
    }
    return size;
  }

  /** `sizeOf` the argument's value (its schema default when absent), from the coerced value and the raw one alike. */
  private slicingSize(node: FieldNode, slicing: SlicingArgument): number {
    const { argument, path } = slicing;
    const list = isListTyped(slicing);
    const argNode = findArgument(node, argument.name);
    if (argNode === undefined) return sizeOf(walkPath(argument.defaultValue, path), list);
    const { variables } = this.input;
    if (argNode.kind === VARIABLE) {
      const name = argNode.name.value;
      // A variable that did not coerce, or was not sent: the argument's default, if any.
      const coerced = hasOwn.call(variables, name) ? walkPath(variables[name], path) : walkPath(argument.defaultValue, path);
      const raw = hasOwn.call(this.input.rawVariables, name) ? sizeOf(walkPath(this.input.rawVariables[name], path), list) : Number.NaN;
      return largerSize(sizeOf(coerced, list), raw);
    }
    if (slicing.literal !== null) {
      // What `valueFromAST` returns for the built-in scalars' literals,
      // without its type checks; else what `parseLiteral` would reject.
      if (argNode.kind === NULL) return -1;
      if (slicing.literal === 'Float' && (argNode.kind === INT || argNode.kind === FLOAT)) return sizeOf(parseFloat(argNode.value));
      if (slicing.literal === 'Int' && argNode.kind === INT) {
        const num = parseIntLiteral(argNode.value);
        return num > MAX_INT || num < MIN_INT || num < 0 ? -1 : num + 0; // -0 reads as 0
      }
      return -1;
    }
    let coerced: unknown;
    try {
      coerced = valueFromAST(argNode, argument.type, variables);
    } catch {
      // A custom scalar's parseLiteral that throws: the operation fails validation anyway.
    }
    return largerSize(sizeOf(walkPath(coerced, path), list), this.literalSize(argNode, path, list));
  }

  /** The size a literal states as written (a custom scalar may not parse it to a number), read as `sizeOf` reads values. */
  private literalSize(node: ValueNode, path: readonly string[], list: boolean): number {
    let current: ValueNode | undefined = node;
    for (const key of path) {
      if (current?.kind !== OBJECT) return Number.NaN;
      current = current.fields.find((f) => f.name.value === key)?.value;
    }
    if (current === undefined) return Number.NaN;
    if (current.kind === VARIABLE) {
      const name = current.name.value;
      return hasOwn.call(this.input.rawVariables, name) ? sizeOf(this.input.rawVariables[name], list) : Number.NaN;
    }
    if (list) return current.kind === LIST ? current.values.length : current.kind === NULL ? -1 : 1;
    switch (current.kind) {
      case INT:
      case FLOAT:
      case STRING:
        return sizeOf(current.value);
      case LIST: {
        // Its length, or what its first element reads as when larger (nested lists too).
        let size: number = current.values.length;
        let first: ValueNode | undefined = current.values[0];
        while (first?.kind === LIST) {
          if (first.values.length > size) size = first.values.length;
          first = first.values[0];
        }
        if (first !== undefined) {
          const reading = this.literalSize(first, NO_PATH, false);
          if (reading > size) size = reading;
        }
        return size;
      }
      default:
        return Number.NaN;
    }
  }

  /**
   * The possible types of the abstract `type` to price `group` on: every
   * type a narrower type condition at its own level (through inline
   * fragments and the fragments it spreads) applies to, and one type of each
   * class (schema-costs.ts) for the rest, which price it alike. Built from
   * the conditions named, not from every possible type, and kept per set of
   * conditions: a set naming one type of an interface of thousands costs two
   * types' work.
   */
  private typesToPrice(group: Group, type: CompositeCost): readonly CompositeCost[] {
    const possibleTypes = type.possibleTypes!;
    if (type.representatives === possibleTypes) return possibleTypes;
    let names: Set<string> | null = null;
    for (const selectionSet of group.selectionSets) {
      const own = this.conditions.of(selectionSet, type);
      if (own === null) return possibleTypes;
      if (own.size > 0) {
        names ??= new Set();
        for (const name of own) names.add(name);
      }
    }
    if (names === null) return type.representatives!;
    const listKey = `${type.index}:${[...names].sort().join('\u0000')}`;
    let types = this.typeLists?.get(listKey);
    if (types === undefined) (this.typeLists ??= new Map()).set(listKey, (types = pricedTypes(this.costs, type, names, this.refinements).types));
    return types;
  }

  /** Copies the vector at `at` to the memo's store; returns where. */
  private save(at: number): number {
    const width = this.width;
    let saved = this.saved;
    if (saved === null || this.savedLength + width > saved.length) {
      const grown = new Float64Array(Math.max(width * INITIAL_SAVED, 2 * (saved?.length ?? 0)));
      if (saved !== null) grown.set(saved);
      this.saved = saved = grown;
    }
    const where = this.savedLength;
    const stack = this.stack;
    for (let i = 0; i < width; i++) saved[where + i] = stack[at + i] ?? 0;
    this.savedLength += width;
    return where;
  }

  /** Copies a memoized vector to the slot at `at`. */
  private restore(from: number, at: number): void {
    const saved = this.saved;
    if (saved === null) return;
    const stack = this.stack;
    for (let i = 0; i < this.width; i++) stack[at + i] = saved[from + i] ?? 0;
  }

  private grow(needed: number): void {
    const grown = new Float64Array(Math.max(needed, 2 * this.stack.length));
    grown.set(this.stack);
    this.stack = grown;
  }
}

// Local rather than imported (so is findArgument): run through tsx, every
// call to an imported function went through a module getter, a third of
// the walk's time.
function sat(value: number): number {
  return value > Number.MAX_VALUE ? Number.MAX_VALUE : value;
}

/** The value node of the argument `name`, or undefined when the field does not pass it. */
function findArgument(node: FieldNode, name: string): ValueNode | undefined {
  const args = node.arguments;
  if (args === undefined) return undefined;
  for (let a = 0; a < args.length; a++) {
    const arg = args[a]!;
    if (arg.name.value === name) return arg.value;
  }
  return undefined;
}

const listTyped = new WeakMap<SlicingArgument, boolean>();

/** Whether the slicing argument's value at its path is a GraphQL list (counted by its elements) rather than a scalar. */
function isListTyped(slicing: SlicingArgument): boolean {
  let known = listTyped.get(slicing);
  if (known === undefined) {
    let type = getNullableType(slicing.argument.type);
    for (const key of slicing.path) {
      const field = isInputObjectType(type) ? type.getFields()[key] : undefined;
      if (field === undefined) break;
      type = getNullableType(field.type);
    }
    listTyped.set(slicing, (known = isListType(type)));
  }
  return known;
}

/** `value.a.b` for a path `["a", "b"]`; undefined where the path leaves the objects. */
function walkPath(value: unknown, path: readonly string[]): unknown {
  let current = value;
  for (const key of path) {
    if (typeof current !== 'object' || current === null) return undefined;
    current = (current as Record<string, unknown>)[key];
  }
  return current;
}

/** `parseInt(text, 10)`, in half the time for what the lexer produces: an optional `-` and up to 10 digits. */
function parseIntLiteral(text: string): number {
  const length = text.length;
  const negative = length > 0 && text.charCodeAt(0) === 45; // '-'
  let i = negative ? 1 : 0;
  if (i < length && length - i <= 10) {
    let num = 0;
    for (; i < length; i++) {
      const digit = text.charCodeAt(i) - 48; // '0'
      if (digit < 0 || digit > 9) break;
      num = num * 10 + digit;
    }
    if (i === length) return negative ? -num : num;
  }
  return parseInt(text, 10);
}
