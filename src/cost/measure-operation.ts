import { Kind, valueFromAST } from 'graphql';
import type { FieldNode, FragmentDefinitionNode, SelectionNode, SelectionSetNode, ValueNode } from 'graphql';
import type { ArgumentPricer } from './argument-costs.js';
import type { CompositeCost, FieldCost, SchemaCosts, SizedContext, SlicingArgument } from './schema-costs.js';
import { EntityFetches } from './entity-fetches.js';
import { childContext } from './sized-contexts.js';
import { largerSize, sizeOf } from './sizes.js';
import { included } from './selections.js';
import type { SizeTerms } from './size-terms.js';
import { addTerms, envelope, scaleTerms, substituteAll, substituteNearest } from './size-terms.js';

const hasOwn = Object.prototype.hasOwnProperty;
// `Kind` read once: run through tsx, each `Kind.X` was a getter call into graphql's CommonJS build.
const FIELD = Kind.FIELD;
const INLINE_FRAGMENT = Kind.INLINE_FRAGMENT;
const FRAGMENT_SPREAD = Kind.FRAGMENT_SPREAD;
const VARIABLE = Kind.VARIABLE;
const INT = Kind.INT;
const FLOAT = Kind.FLOAT;
const STRING = Kind.STRING;
const NULL = Kind.NULL;
const OBJECT = Kind.OBJECT;
const LIST = Kind.LIST;
const MAX_INT = 2147483647;
const MIN_INT = -2147483648;
/** Frames the walk starts with: deeper operations grow it. */
const INITIAL_DEPTH = 16;
/** Narrower type conditions in one selection set past which every possible type is priced. */
const MAX_CONDITIONS = 64;
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

/** One memoized evaluation of a selection set on a type; a short list per (content, type), as most meet one context. */
interface MemoEntry {
  readonly context: SizedContext | null;
  readonly size: number;
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
 * Prices one operation against the compiled schema. Every (selection set,
 * type, sized context) is evaluated once, so fragments spread many times,
 * nested abstract types and one fragment under many differently sized
 * connections cost linear work; sums and products saturate at
 * `Number.MAX_VALUE` so huge operations stay finite and comparable.
 */
export function measureOperation(input: MeasureInput, selectionSet: SelectionSetNode, root: CompositeCost): OperationMeasure {
  const walk = new Walk(input);
  walk.run(selectionSet, root);
  return { complexity: walk.stack[0] ?? 0, charges: walk.stack.slice(1, walk.width), touched: walk.touched };
}

class Frame {
  selectionSet: SelectionSetNode | null = null;
  type: CompositeCost | null = null;
  context: SizedContext | null = null;
  /**
   * The size of the field whose own `sizedFields` this selection set is
   * priced for (variable 0), when known; else -1. An abstract type then takes
   * its most expensive possible type exactly, at that size.
   */
  size = -1;
  /** Selection sets below this one may be met again with the same type: memoize them. */
  shared = false;
  /** Save this frame's measure when it is done. */
  memoize = false;
  /** The memo key: content number and type. */
  key = -1;
  terms: SizeTerms = null;
  /** An abstract type's next possible type to evaluate; -1 for an object type. */
  nextType = -1;
  /** An abstract type's possible types to evaluate: all of them, or one per class. */
  types: readonly CompositeCost[] = [];
  /** The selection lists being read (the set's own, then inline fragments'), with a cursor each. */
  readonly lists: (readonly SelectionNode[])[] = [];
  readonly cursors: number[] = [];
  top = -1;
  waiting = NOTHING;
  field: FieldNode | null = null;
  fieldCost: FieldCost | null = null;
  fragment: string | null = null;
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
  /** Memoized vectors, `width` numbers each. */
  private saved: Float64Array | null = null;
  private savedLength = 0;
  /** Only selection sets that can be met more than once are memoized (see `enter`), by content number and type. */
  private memo: Map<number, MemoEntry> | null = null;
  private readonly typeCount: number;
  /** Fragments being expanded on the current path: a cycle (invalid anyway) is cut, not followed. */
  private readonly expanding = new Set<string>();
  /** `narrowerConditions` answers, by content number and type. */
  private conditions: Map<number, ReadonlySet<string> | null> | null = null;
  /** `typesToPrice` answers where conditions narrow, by content number and type. */
  private typeLists: Map<number, readonly CompositeCost[]> | null = null;

  private entityFetches: EntityFetches | null = null;

  private fetches(): EntityFetches {
    return (this.entityFetches ??= new EntityFetches(this.input.fragments, this.input.variables));
  }

  constructor(private readonly input: MeasureInput) {
    this.costs = input.costs;
    const bucketCount = input.costs.bucketNames.length;
    this.width = bucketCount + 1;
    this.touched = new Uint8Array(bucketCount);
    this.stack = new Float64Array(this.width * INITIAL_DEPTH);
    this.typeCount = input.costs.types.size;
  }

  run(selectionSet: SelectionSetNode, root: CompositeCost): void {
    const shared = this.input.sharesSelectionSets;
    this.enter(selectionSet, root, null, -1, shared, shared);
    while (this.depth >= 0) this.step();
  }

  /**
   * Starts measuring `selectionSet` on `type` into the slot above the
   * current frame, or, when memoized, puts the saved measure there and
   * hands it to the current frame at once.
   *
   * `memoize` says the selection set may be met again with the same type
   * and context: it is a fragment's, or lies below a fragment or an
   * abstract type (each possible type evaluates it again). So is one whose
   * content sits at several places (`a: node { id } b: node { id }`, each
   * costing every possible type of an interface otherwise). Any other
   * selection set belongs to one field of the operation and is met exactly
   * once, so a memo entry for it would never be read.
   */
  private enter(
    selectionSet: SelectionSetNode,
    type: CompositeCost,
    context: SizedContext | null,
    size: number,
    shared: boolean,
    memoize: boolean,
  ): void {
    const width = this.width;
    const depth = this.depth + 1;
    const at = depth * width;
    if (at + 2 * width > this.stack.length) this.grow(at + 2 * width);
    const id = this.input.selectionSetIds.get(selectionSet);
    // A selection set the numbering did not reach (only in a hand-built document holding itself) is never memoized.
    const key = id === undefined ? -1 : id * this.typeCount + type.index;
    if (key < 0) memoize = false;
    // Content met again, unless at a size of its own: entries per size would make every lookup longer.
    else if (this.input.repeated[id!] === 1 && size < 0) memoize = true;
    if (memoize) {
      for (let entry = this.memo?.get(key); entry !== undefined; entry = entry.next) {
        if (entry.context === context && entry.size === size) {
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
    frame.selectionSet = selectionSet;
    frame.type = type;
    frame.context = context;
    frame.size = type.possibleTypes !== null ? size : -1;
    frame.shared = shared;
    frame.memoize = memoize;
    frame.key = key;
    frame.terms = null;
    frame.waiting = NOTHING;
    if (type.possibleTypes !== null) {
      frame.nextType = 0;
      frame.top = -1;
    } else {
      frame.nextType = -1;
      frame.top = 0;
      frame.lists[0] = selectionSet.selections;
      frame.cursors[0] = 0;
    }
    this.depth = depth;
  }

  private step(): void {
    const frame = this.frames[this.depth]!;
    const type = frame.type!;
    const possibleTypes = type.possibleTypes;
    if (possibleTypes !== null) {
      // An interface or union: each possible type is priced on its own; the
      // most expensive one wins per component. The selection set is met
      // once per possible type, so what lies below it is shared. The
      // possible types' own measures are never looked up again (the entry
      // for the abstract type replaces them), unless the document shares nodes.
      // Of the types no narrower type condition names, one per class of
      // types that price the abstract type's fields alike stands for all.
      if (frame.nextType === 0) frame.types = this.typesToPrice(frame.selectionSet!, type);
      const next = frame.types[frame.nextType];
      if (next !== undefined) {
        frame.nextType++;
        frame.waiting = POSSIBLE_TYPE;
        this.enter(frame.selectionSet!, next, frame.context, -1, true, this.input.sharesSelectionSets);
        return;
      }
      this.finish(frame);
      return;
    }

    const fields = type.fields!;
    const variables = this.input.variables;
    // The cursor in locals, written back before handing over to another frame.
    let top = frame.top;
    let list = frame.lists[top]!;
    let cursor = frame.cursors[top]!;
    for (;;) {
      if (cursor >= list.length) {
        if (--top < 0) break;
        list = frame.lists[top]!;
        cursor = frame.cursors[top]!;
        continue;
      }
      const selection = list[cursor++]!;
      if (selection.directives !== undefined && selection.directives.length > 0 && !included(selection.directives, variables)) continue;
      if (selection.kind === FIELD) {
        const name = selection.name.value;
        const field = fields.get(name) ?? this.costs.metaFields.get(name);
        if (field === undefined) continue;
        if (selection.selectionSet !== undefined && field.target !== null) {
          frame.top = top;
          frame.cursors[top] = cursor;
          frame.waiting = FIELD_SELECTION;
          frame.field = selection;
          frame.fieldCost = field;
          const context = frame.context === null && field.sized === null ? null : childContext(frame.context, field);
          const size = field.sized !== null && field.target.possibleTypes !== null ? this.listSize(selection, field) : -1;
          this.enter(selection.selectionSet, field.target, context, size, frame.shared, frame.shared);
          return;
        }
        this.field(frame, selection, field, false, null);
      } else if (selection.kind === INLINE_FRAGMENT) {
        if (selection.typeCondition === undefined || applies(selection.typeCondition.name.value, type)) {
          frame.cursors[top] = cursor;
          top++;
          frame.lists[top] = list = selection.selectionSet.selections;
          cursor = 0;
        }
      } else if (selection.kind === FRAGMENT_SPREAD) {
        const name = selection.name.value;
        const fragment = this.input.fragments.get(name);
        if (fragment === undefined || this.expanding.has(name) || !applies(fragment.typeCondition.name.value, type)) continue;
        frame.top = top;
        frame.cursors[top] = cursor;
        this.expanding.add(name);
        frame.waiting = SPREAD;
        frame.fragment = name;
        this.enter(fragment.selectionSet, type, frame.context, -1, true, true);
        return;
      }
    }
    frame.top = -1;
    this.finish(frame);
  }

  private finish(frame: Frame): void {
    const at = this.depth * this.width;
    if (frame.memoize) {
      const memo = (this.memo ??= new Map());
      memo.set(frame.key, {
        context: frame.context,
        size: frame.size,
        at: this.save(at),
        terms: frame.terms,
        next: memo.get(frame.key),
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
        this.expanding.delete(frame.fragment!);
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
    if (field.graphs !== 0) stack[sub] = sat((stack[sub] ?? 0) + this.fetches().perObject(field, [node.selectionSet]));
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
    const argNode = findArgument(node, argument.name);
    if (argNode === undefined) return sizeOf(walkPath(argument.defaultValue, path));
    const { variables } = this.input;
    if (argNode.kind === VARIABLE) {
      const name = argNode.name.value;
      // A variable that did not coerce, or was not sent: the argument's default, if any.
      const coerced = hasOwn.call(variables, name) ? walkPath(variables[name], path) : walkPath(argument.defaultValue, path);
      const raw = hasOwn.call(this.input.rawVariables, name) ? sizeOf(walkPath(this.input.rawVariables[name], path)) : Number.NaN;
      return largerSize(sizeOf(coerced), raw);
    }
    if (slicing.literal !== null) {
      // What `valueFromAST` returns for the built-in scalars' literals,
      // without its type checks; else what `parseLiteral` would reject.
      if (argNode.kind === NULL) return -1;
      if (slicing.literal === 'Float' && (argNode.kind === INT || argNode.kind === FLOAT)) return sizeOf(parseFloat(argNode.value));
      if (slicing.literal === 'Int' && argNode.kind === INT) {
        const num = parseIntLiteral(argNode.value);
        return num > MAX_INT || num < MIN_INT || num < 0 ? -1 : num;
      }
      return -1;
    }
    let coerced: unknown;
    try {
      coerced = valueFromAST(argNode, argument.type, variables);
    } catch {
      // A custom scalar's parseLiteral that throws: the operation fails validation anyway.
    }
    return largerSize(sizeOf(walkPath(coerced, path)), this.literalSize(argNode, path));
  }

  /** The size a literal states as written (a custom scalar may not parse it to a number). */
  private literalSize(node: ValueNode, path: readonly string[]): number {
    let current: ValueNode | undefined = node;
    for (const key of path) {
      if (current?.kind !== OBJECT) return Number.NaN;
      current = current.fields.find((f) => f.name.value === key)?.value;
    }
    if (current === undefined) return Number.NaN;
    switch (current.kind) {
      case INT:
      case FLOAT:
      case STRING:
        return sizeOf(current.value);
      case LIST:
        return current.values.length;
      case VARIABLE:
        return hasOwn.call(this.input.rawVariables, current.name.value) ? sizeOf(this.input.rawVariables[current.name.value]) : Number.NaN;
      default:
        return Number.NaN;
    }
  }

  /**
   * The possible types of the abstract `type` to price `selectionSet` on:
   * every type a narrower type condition at its own level (through inline
   * fragments and the fragments it spreads) applies to, and one type of
   * each class (schema-costs.ts) for the rest, which price it alike. Kept
   * per selection set and type, so every fragment is read once per type.
   */
  private typesToPrice(selectionSet: SelectionSetNode, type: CompositeCost): readonly CompositeCost[] {
    const possibleTypes = type.possibleTypes!;
    if (type.representatives === possibleTypes) return possibleTypes;
    const keyOf = (set: SelectionSetNode): number => {
      const id = this.input.selectionSetIds.get(set);
      return id === undefined ? -1 : id * this.typeCount + type.index;
    };
    const key = keyOf(selectionSet);
    if (key < 0) return possibleTypes;
    const known = this.conditions?.get(key);
    const names = known === undefined ? this.narrowerConditions(selectionSet, type, keyOf) : known;
    if (names === null) return possibleTypes;
    if (names.size === 0) return type.representatives!;
    let types = this.typeLists?.get(key);
    if (types === undefined) {
      const classes = type.classes!;
      const priced = new Set<number>();
      const list: CompositeCost[] = [];
      possibleTypes.forEach((possible, i) => {
        let named = names.has(possible.name);
        if (!named) for (const name of names) if (possible.abstractTypes.has(name)) named = true;
        if (named) list.push(possible);
        else if (!priced.has(classes[i]!)) {
          priced.add(classes[i]!);
          list.push(possible);
        }
      });
      (this.typeLists ??= new Map()).set(key, (types = list));
    }
    return types;
  }

  /**
   * The type conditions other than `type` named at `selectionSet`'s own
   * level, through inline fragments on `type` and the fragments it spreads
   * (null: too many to be worth telling apart, or a fragment cycle). What a
   * narrower condition holds applies only to types it names already.
   */
  private narrowerConditions(
    selectionSet: SelectionSetNode,
    type: CompositeCost,
    keyOf: (set: SelectionSetNode) => number,
  ): ReadonlySet<string> | null {
    const known = (this.conditions ??= new Map());
    // Selection sets whose answer waits on the fragments they spread, each with its own conditions and those fragments' sets.
    const pending: SelectionSetNode[] = [selectionSet];
    const open = new Set<SelectionSetNode>(pending);
    const own = new Map<SelectionSetNode, { names: Set<string>; spreads: SelectionSetNode[] }>();
    const done = (): void => void open.delete(pending.pop()!);
    while (pending.length > 0) {
      const current = pending[pending.length - 1]!;
      const key = keyOf(current);
      if (key < 0) return null;
      if (known.has(key)) {
        done();
        continue;
      }
      let level = own.get(current);
      if (level === undefined) {
        level = { names: new Set(), spreads: [] };
        const lists: (readonly SelectionNode[])[] = [current.selections];
        while (lists.length > 0) {
          for (const selection of lists.pop()!) {
            if (selection.kind === INLINE_FRAGMENT) {
              const condition = selection.typeCondition?.name.value;
              if (condition === undefined || condition === type.name) lists.push(selection.selectionSet.selections);
              else level.names.add(condition);
            } else if (selection.kind === FRAGMENT_SPREAD) {
              const fragment = this.input.fragments.get(selection.name.value);
              if (fragment === undefined) continue;
              const condition = fragment.typeCondition.name.value;
              if (condition === type.name) level.spreads.push(fragment.selectionSet);
              else level.names.add(condition);
            }
          }
        }
        own.set(current, level);
      }
      let names: Set<string> | null = level.names;
      let blocked = false;
      for (const spread of level.spreads) {
        const below = known.get(keyOf(spread));
        if (below === undefined) {
          // A fragment spread inside itself (an invalid operation): every type is priced.
          if (open.has(spread) || keyOf(spread) < 0) {
            names = null;
            break;
          }
          pending.push(spread);
          open.add(spread);
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
      known.set(key, names !== null && names.size > MAX_CONDITIONS ? null : names);
      done();
    }
    return known.get(keyOf(selectionSet)) ?? null;
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

/** Whether a fragment on `typeCondition` applies to an object of `type`: the same type, or an interface or union it belongs to. */
function applies(typeCondition: string, type: CompositeCost): boolean {
  return typeCondition === type.name || type.abstractTypes.has(typeCondition);
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
