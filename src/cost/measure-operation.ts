import { Kind, valueFromAST } from 'graphql';
import type {
  DirectiveNode,
  DocumentNode,
  FieldNode,
  FragmentDefinitionNode,
  SelectionNode,
  SelectionSetNode,
  ValueNode,
} from 'graphql';
import type { CompositeCost, FieldCost, SchemaCosts, SlicingArgument } from './schema-costs.js';

const hasOwn = Object.prototype.hasOwnProperty;
// `Kind` read once: run through tsx, each `Kind.X` was a getter call into graphql's CommonJS build.
const FIELD = Kind.FIELD;
const INLINE_FRAGMENT = Kind.INLINE_FRAGMENT;
const FRAGMENT_SPREAD = Kind.FRAGMENT_SPREAD;
const VARIABLE = Kind.VARIABLE;
const INT = Kind.INT;
const FLOAT = Kind.FLOAT;
const NULL = Kind.NULL;
const BOOLEAN = Kind.BOOLEAN;
const MAX_INT = 2147483647;
const MIN_INT = -2147483648;
/** Frames the stack starts with: deeper operations grow it. */
const INITIAL_DEPTH = 16;
/** Memoized frames the store starts with, once one is needed. */
const INITIAL_SAVED = 64;

/*
 * A measure (what a selection set costs per instance of its parent) is a frame
 * of `1 + bucketCount` numbers: the complexity, then the charge per bucket
 * index. Frames live in one typed array per request used as a stack: a
 * selection set is measured into the frame its caller names, and its children
 * into the frame just above, so the walk allocates nothing per selection.
 */

/** One memoized evaluation of a selection set; a short list per node, as most nodes meet one type. */
interface MemoEntry {
  readonly type: CompositeCost;
  readonly sized: ReadonlySet<string> | null;
  readonly size: number;
  /** Where the measure's frame was saved in `Walk.saved`. */
  readonly at: number;
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
  /** Coerced variable values. */
  readonly variables: Readonly<Record<string, unknown>>;
}

export interface OperationMeasure {
  /** Per bucket index; fractional until the caller rounds up. */
  readonly charges: Float64Array;
  /** 1 where the operation selects a field that charges that bucket. */
  readonly touched: Uint8Array;
}

/**
 * Prices one operation against the compiled schema. Every (selection set,
 * type) pair is evaluated once, so fragments spread many times and nested
 * abstract types cost linear work; sums and products saturate at
 * `Number.MAX_VALUE` so huge operations stay finite and comparable.
 */
export function measureOperation(input: MeasureInput, selectionSet: SelectionSetNode, root: CompositeCost): OperationMeasure {
  const walk = new Walk(input);
  walk.measure(selectionSet, root, null, 0, input.sharesSelectionSets, 0);
  return { charges: walk.stack.subarray(1, walk.width), touched: walk.touched };
}

/**
 * True when some selection set node is reachable from two places of the
 * document. Stops at the first node seen twice, so a shared (DAG-shaped)
 * document is checked in linear time.
 */
export function sharesSelectionSets(document: DocumentNode): boolean {
  const seen = new Set<SelectionSetNode>();
  const pending: SelectionSetNode[] = [];
  for (const definition of document.definitions) {
    if (definition.kind === Kind.OPERATION_DEFINITION || definition.kind === Kind.FRAGMENT_DEFINITION) {
      pending.push(definition.selectionSet);
    }
  }
  for (let selectionSet = pending.pop(); selectionSet !== undefined; selectionSet = pending.pop()) {
    if (seen.has(selectionSet)) return true;
    seen.add(selectionSet);
    for (const selection of selectionSet.selections) {
      if (selection.kind !== FRAGMENT_SPREAD && selection.selectionSet !== undefined) pending.push(selection.selectionSet);
    }
  }
  return false;
}

function sat(value: number): number {
  return value > Number.MAX_VALUE ? Number.MAX_VALUE : value;
}

class Walk {
  readonly touched: Uint8Array;
  /** Numbers per frame: the complexity, then one charge per bucket. */
  readonly width: number;
  /** Frames of the measures being computed; the root's is at 0. */
  stack: Float64Array;
  private readonly costs: SchemaCosts;
  /** Memoized measures' frames, `width` numbers each. */
  private saved: Float64Array | null = null;
  private savedLength = 0;
  /** Only selection sets that can be met more than once are memoized: see `measure`. */
  private memo: Map<SelectionSetNode, MemoEntry> | null = null;
  /** Fragments being expanded on the current path: a cycle (invalid anyway) is cut, not followed. */
  private expanding: Set<string> | null = null;

  constructor(private readonly input: MeasureInput) {
    this.costs = input.costs;
    const bucketCount = input.costs.bucketNames.length;
    this.width = bucketCount + 1;
    this.touched = new Uint8Array(bucketCount);
    this.stack = new Float64Array(this.width * INITIAL_DEPTH);
  }

  /**
   * Writes the measure of `selectionSet` on `type` into the frame at `at`.
   *
   * `shared` says the selection set may be met again with the same type and
   * size: it is a fragment's, or lies below a fragment or an abstract type
   * (each possible type evaluates it again). Only then is its measure
   * memoized, and so are those of the selection sets below it. Any other
   * selection set belongs to one field of the operation and is met exactly
   * once, so a memo entry for it would never be read.
   */
  measure(
    selectionSet: SelectionSetNode,
    type: CompositeCost,
    sized: ReadonlySet<string> | null,
    size: number,
    shared: boolean,
    at: number,
  ): void {
    if (!shared) {
      this.evaluate(selectionSet, type, sized, size, false, at);
      return;
    }
    const memo = (this.memo ??= new Map());
    const first = memo.get(selectionSet);
    for (let entry = first; entry !== undefined; entry = entry.next) {
      if (entry.type === type && entry.sized === sized && entry.size === size) {
        this.restore(entry.at, at);
        return;
      }
    }
    this.evaluate(selectionSet, type, sized, size, true, at);
    // Entries added for this node meanwhile (its possible types') give way:
    // only this one is found again.
    memo.set(selectionSet, { type, sized, size, at: this.save(at), next: first });
  }

  private evaluate(
    selectionSet: SelectionSetNode,
    type: CompositeCost,
    sized: ReadonlySet<string> | null,
    size: number,
    shared: boolean,
    at: number,
  ): void {
    const width = this.width;
    // Room for this frame and the one its children use.
    if (at + 2 * width > this.stack.length) this.grow(at + 2 * width);
    const stack = this.stack;
    for (let i = at; i < at + width; i++) stack[i] = 0;

    const possibleTypes = type.possibleTypes;
    if (possibleTypes !== null) {
      // An interface or union: each possible type is priced on its own; the
      // most expensive one wins per component. The selection set is met once
      // per possible type, so what lies below it is shared. The possible
      // types' own measures are never looked up again (the entry for the
      // abstract type replaces them), unless the document shares nodes.
      const child = at + width;
      for (const object of possibleTypes) {
        if (this.input.sharesSelectionSets) this.measure(selectionSet, object, sized, size, true, child);
        else this.evaluate(selectionSet, object, sized, size, true, child);
        const stack = this.stack;
        for (let i = 0; i < width; i++) {
          const value = stack[child + i] ?? 0;
          if (value > (stack[at + i] ?? 0)) stack[at + i] = value;
        }
      }
    } else if (type.fields !== null) {
      this.collect(selectionSet.selections, type, type.fields, sized, size, shared, at);
    }
  }

  private collect(
    selections: readonly SelectionNode[],
    type: CompositeCost,
    fields: ReadonlyMap<string, FieldCost>,
    sized: ReadonlySet<string> | null,
    size: number,
    shared: boolean,
    at: number,
  ): void {
    for (const selection of selections) {
      if (selection.directives !== undefined && selection.directives.length > 0 && !this.included(selection.directives)) {
        continue;
      }
      switch (selection.kind) {
        case FIELD: {
          const name = selection.name.value;
          const field = fields.get(name) ?? this.costs.metaFields.get(name);
          if (field !== undefined) this.field(selection, field, sized !== null && sized.has(name) ? size : -1, shared, at);
          break;
        }
        case INLINE_FRAGMENT:
          if (selection.typeCondition === undefined || applies(selection.typeCondition.name.value, type)) {
            this.collect(selection.selectionSet.selections, type, fields, sized, size, shared, at);
          }
          break;
        case FRAGMENT_SPREAD: {
          const name = selection.name.value;
          const fragment = this.input.fragments.get(name);
          const expanding = (this.expanding ??= new Set());
          if (fragment === undefined || expanding.has(name) || !applies(fragment.typeCondition.name.value, type)) {
            break;
          }
          expanding.add(name);
          const spread = at + this.width;
          this.measure(fragment.selectionSet, type, sized, size, true, spread);
          expanding.delete(name);
          const stack = this.stack;
          stack[at] = sat((stack[at] ?? 0) + (stack[spread] ?? 0));
          for (let i = 1; i < this.width; i++) {
            const charge = stack[spread + i] ?? 0;
            if (charge !== 0) stack[at + i] = sat((stack[at + i] ?? 0) + charge);
          }
          break;
        }
      }
    }
  }

  /** `sizeOverride` is the enclosing connection's size when this is one of its sized fields, else -1. */
  private field(node: FieldNode, field: FieldCost, sizeOverride: number, shared: boolean, at: number): void {
    const n = sizeOverride >= 0 ? sizeOverride : field.isList ? this.listSize(node, field) : 1;
    let complexity = field.weight;
    const sub = at + this.width;
    let measured = false;
    if (node.selectionSet !== undefined && field.target !== null) {
      let childSize = -1;
      if (field.sizedFields !== null) childSize = this.slicedSize(node, field) ?? field.assumedSize ?? -1;
      if (childSize >= 0) this.measure(node.selectionSet, field.target, field.sizedFields, childSize, shared, sub);
      else this.measure(node.selectionSet, field.target, null, 0, shared, sub);
      complexity = sat(complexity + sat(n * (this.stack[sub] ?? 0)));
      measured = true;
    }
    const stack = this.stack;
    stack[at] = sat((stack[at] ?? 0) + complexity);
    if (measured) {
      for (let i = 1; i < this.width; i++) {
        const charge = stack[sub + i] ?? 0;
        if (charge !== 0) stack[at + i] = sat((stack[at + i] ?? 0) + sat(n * charge));
      }
    }
    const rules = field.rules;
    for (let r = 0; r < rules.length; r++) {
      const rule = rules[r];
      if (rule === undefined) continue;
      this.touched[rule.bucket] = 1;
      const i = at + 1 + rule.bucket;
      stack[i] = sat((stack[i] ?? 0) + (rule.cost ?? complexity));
    }
  }

  private listSize(node: FieldNode, field: FieldCost): number {
    return this.slicedSize(node, field) ?? field.assumedSize ?? this.input.defaultListSize;
  }

  /** The largest usable slicing argument value, or null when none is usable. */
  private slicedSize(node: FieldNode, field: FieldCost): number | null {
    let size: number | null = null;
    const slicing = field.slicing;
    for (let s = 0; s < slicing.length; s++) {
      const argument = slicing[s];
      if (argument === undefined) continue;
      let value = this.argumentValue(node, argument);
      // A Float literal like 1e400 is Infinity to the resolver: as huge as it gets, not absent.
      if (value === Number.POSITIVE_INFINITY) value = Number.MAX_VALUE;
      if (typeof value === 'number' && Number.isInteger(value) && value >= 0 && (size === null || value > size)) {
        size = value;
      }
    }
    return size;
  }

  /**
   * The argument's value as `valueFromAST` coerces it, its schema default
   * when absent. Any non-number (undefined, null, an object) is unusable as
   * a size, so the literal fast path only has to agree on numbers.
   */
  private argumentValue(node: FieldNode, slicing: SlicingArgument): unknown {
    const { argument, path } = slicing;
    let value: unknown = argument.defaultValue;
    const argNode = findArgument(node, argument.name);
    if (argNode !== undefined) {
      const { variables } = this.input;
      if (argNode.kind === VARIABLE) {
        if (hasOwn.call(variables, argNode.name.value)) value = variables[argNode.name.value];
      } else if (slicing.literal !== null && (argNode.kind === INT || argNode.kind === FLOAT || argNode.kind === NULL)) {
        // What `valueFromAST` returns for the built-in scalars' literals,
        // without its type checks: null (or, for a non-null type, nothing:
        // equally unusable) for `null`; else what `parseLiteral` returns, or
        // nothing where it throws.
        if (argNode.kind === NULL) return null;
        if (slicing.literal === 'Float') return parseFloat(argNode.value);
        if (argNode.kind === FLOAT) return undefined;
        const num = parseIntLiteral(argNode.value);
        return num > MAX_INT || num < MIN_INT ? undefined : num;
      } else {
        value = valueFromAST(argNode, argument.type, variables);
      }
    }
    for (const key of path) {
      if (typeof value !== 'object' || value === null) return undefined;
      value = (value as Record<string, unknown>)[key];
    }
    return value;
  }

  /** `@skip`/`@include`: a condition whose value is unknown counts as included, so nothing is under-charged. */
  private included(directives: readonly DirectiveNode[]): boolean {
    for (const directive of directives) {
      const name = directive.name.value;
      if (name !== 'skip' && name !== 'include') continue;
      let condition: ValueNode | undefined;
      for (const argument of directive.arguments ?? []) {
        if (argument.name.value === 'if') {
          condition = argument.value;
          break;
        }
      }
      let value: unknown;
      if (condition?.kind === BOOLEAN) value = condition.value;
      else if (condition?.kind === VARIABLE) value = this.input.variables[condition.name.value];
      if (value === (name === 'skip')) return false;
    }
    return true;
  }

  /** Copies the frame at `at` to the memo's store; returns where. */
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

  /** Copies a memoized frame to the frame at `at`. */
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

/** Whether a fragment on `typeCondition` applies to an object of `type`: the same type, or an interface or union it belongs to. */
function applies(typeCondition: string, type: CompositeCost): boolean {
  return typeCondition === type.name || type.abstractTypes.has(typeCondition);
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

/** The value node of the argument `name`, or undefined when the field does not pass it. */
function findArgument(node: FieldNode, name: string): ValueNode | undefined {
  const args = node.arguments;
  if (args === undefined) return undefined;
  for (let a = 0; a < args.length; a++) {
    const arg = args[a];
    if (arg !== undefined && arg.name.value === name) return arg.value;
  }
  return undefined;
}
