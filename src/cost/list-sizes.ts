import { Kind, getNullableType, isInputObjectType, isListType, valueFromAST } from 'graphql';
import type { FieldNode, ValueNode } from 'graphql';
import type { FieldCost, SlicingArgument } from './schema-costs.js';
import { findArgument } from './selections.js';
import { largerSize, sizeOf } from './sizes.js';

const hasOwn = Object.prototype.hasOwnProperty;
const MAX_INT = 2147483647;
const MIN_INT = -2147483648;
const NO_PATH: readonly string[] = [];

/**
 * The sizes an operation gives its lists, read from its arguments with the
 * request's variables: the coerced value (what execution passes to the
 * resolver) and the value as sent (what a custom scalar may hide), the
 * larger of the two, each by `sizeOf` (every standard JavaScript reading).
 */
export class ListSizes {
  constructor(
    private readonly defaultListSize: number,
    /** Coerced variable values. */
    private readonly variables: Readonly<Record<string, unknown>>,
    /** The variables as the request sent them. */
    private readonly rawVariables: Readonly<Record<string, unknown>>,
  ) {}

  /**
   * A list's size: its largest slicing argument, else the assumed size. A
   * value no resolver can be trusted to honour (null, negative, not a
   * number) counts as the assumed size, and as at least 1: `slice(0, true)`
   * and `Array.from({ length: true })` make one item.
   */
  of(node: FieldNode, field: FieldCost): number {
    const assumed = field.assumedSize ?? this.defaultListSize;
    let size = -1;
    const slicing = field.slicing;
    for (let s = 0; s < slicing.length; s++) {
      const value = this.slicingSize(node, slicing[s]!);
      if (Number.isNaN(value)) continue;
      const candidate = value < 0 ? Math.max(assumed, 1) : value;
      if (candidate > size) size = candidate;
    }
    return size < 0 ? assumed : size;
  }

  /** A sized field's own slicing argument, where usable; 0 without one (its assumed size does not count). */
  own(node: FieldNode, field: FieldCost): number {
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
    const variables = this.variables;
    if (argNode.kind === Kind.VARIABLE) {
      const name = argNode.name.value;
      // A variable that did not coerce, or was not sent: the argument's default, if any.
      const coerced = hasOwn.call(variables, name) ? walkPath(variables[name], path) : walkPath(argument.defaultValue, path);
      const raw = hasOwn.call(this.rawVariables, name) ? sizeOf(walkPath(this.rawVariables[name], path), list) : Number.NaN;
      return largerSize(sizeOf(coerced, list), raw);
    }
    if (slicing.literal !== null) {
      // What `valueFromAST` returns for the built-in scalars' literals,
      // without its type checks; else what `parseLiteral` would reject.
      if (argNode.kind === Kind.NULL) return -1;
      if (slicing.literal === 'Float' && (argNode.kind === Kind.INT || argNode.kind === Kind.FLOAT)) return sizeOf(parseFloat(argNode.value));
      if (slicing.literal === 'Int' && argNode.kind === Kind.INT) {
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
      if (current?.kind !== Kind.OBJECT) return Number.NaN;
      current = current.fields.find((f) => f.name.value === key)?.value;
    }
    if (current === undefined) return Number.NaN;
    if (current.kind === Kind.VARIABLE) {
      const name = current.name.value;
      return hasOwn.call(this.rawVariables, name) ? sizeOf(this.rawVariables[name], list) : Number.NaN;
    }
    if (list) return current.kind === Kind.LIST ? current.values.length : current.kind === Kind.NULL ? -1 : 1;
    switch (current.kind) {
      case Kind.INT:
      case Kind.FLOAT:
      case Kind.STRING:
        return sizeOf(current.value);
      case Kind.LIST: {
        // Its length, or what its first element reads as when larger (nested lists too).
        let size: number = current.values.length;
        let first: ValueNode | undefined = current.values[0];
        while (first?.kind === Kind.LIST) {
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
