import { Kind, isAbstractType, valueFromAST } from 'graphql';
import type {
  DirectiveNode,
  FieldNode,
  FragmentDefinitionNode,
  GraphQLNamedType,
  GraphQLObjectType,
  GraphQLSchema,
  SelectionNode,
  SelectionSetNode,
} from 'graphql';
import type { FieldCost, SchemaCosts, SlicingArgument } from './schema-costs.js';

/** What a selection set costs per instance of its parent. */
interface Measure {
  complexity: number;
  /** Indexed like `SchemaCosts.bucketNames`. */
  readonly charges: Float64Array;
}

/** One memoized evaluation of a selection set; a short list per node, as most nodes meet one type. */
interface MemoEntry {
  readonly type: GraphQLNamedType;
  readonly sized: ReadonlySet<string> | null;
  readonly size: number;
  readonly measure: Measure;
  readonly next: MemoEntry | undefined;
}

export interface MeasureInput {
  readonly schema: GraphQLSchema;
  readonly costs: SchemaCosts;
  readonly defaultListSize: number;
  readonly fragments: ReadonlyMap<string, FragmentDefinitionNode>;
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
export function measureOperation(input: MeasureInput, selectionSet: SelectionSetNode, root: GraphQLObjectType): OperationMeasure {
  const walk = new Walk(input);
  const measure = walk.measure(selectionSet, root, null, 0);
  return { charges: measure.charges, touched: walk.touched };
}

const hasOwn = Object.prototype.hasOwnProperty;

function sat(value: number): number {
  return value > Number.MAX_VALUE ? Number.MAX_VALUE : value;
}

class Walk {
  readonly touched: Uint8Array;
  private readonly bucketCount: number;
  private readonly memo = new Map<SelectionSetNode, MemoEntry>();
  /** Fragments being expanded on the current path: a cycle (invalid anyway) is cut, not followed. */
  private readonly expanding = new Set<string>();

  constructor(private readonly input: MeasureInput) {
    this.bucketCount = input.costs.bucketNames.length;
    this.touched = new Uint8Array(this.bucketCount);
  }

  measure(selectionSet: SelectionSetNode, type: GraphQLNamedType, sized: ReadonlySet<string> | null, size: number): Measure {
    const first = this.memo.get(selectionSet);
    for (let entry = first; entry !== undefined; entry = entry.next) {
      if (entry.type === type && entry.sized === sized && entry.size === size) return entry.measure;
    }
    const measure: Measure = { complexity: 0, charges: new Float64Array(this.bucketCount) };
    if (isAbstractType(type)) {
      // Each possible type is priced on its own; the most expensive one wins per component.
      for (const possible of this.input.costs.possibleTypes.get(type) ?? []) {
        const one = this.measure(selectionSet, possible, sized, size);
        if (one.complexity > measure.complexity) measure.complexity = one.complexity;
        for (let b = 0; b < this.bucketCount; b++) {
          const charge = one.charges[b] ?? 0;
          if (charge > (measure.charges[b] ?? 0)) measure.charges[b] = charge;
        }
      }
    } else {
      const fields = this.input.costs.fields.get(type as GraphQLObjectType);
      if (fields !== undefined) this.collect(selectionSet.selections, type as GraphQLObjectType, fields, sized, size, measure);
    }
    this.memo.set(selectionSet, { type, sized, size, measure, next: first });
    return measure;
  }

  private collect(
    selections: readonly SelectionNode[],
    type: GraphQLObjectType,
    fields: ReadonlyMap<string, FieldCost>,
    sized: ReadonlySet<string> | null,
    size: number,
    out: Measure,
  ): void {
    for (const selection of selections) {
      if (selection.directives !== undefined && selection.directives.length > 0 && !this.included(selection.directives)) {
        continue;
      }
      switch (selection.kind) {
        case Kind.FIELD: {
          const name = selection.name.value;
          const field = fields.get(name) ?? this.input.costs.metaFields.get(name);
          if (field !== undefined) this.field(selection, field, sized !== null && sized.has(name) ? size : -1, out);
          break;
        }
        case Kind.INLINE_FRAGMENT:
          if (selection.typeCondition === undefined || this.applies(selection.typeCondition.name.value, type)) {
            this.collect(selection.selectionSet.selections, type, fields, sized, size, out);
          }
          break;
        case Kind.FRAGMENT_SPREAD: {
          const name = selection.name.value;
          const fragment = this.input.fragments.get(name);
          if (fragment === undefined || this.expanding.has(name) || !this.applies(fragment.typeCondition.name.value, type)) {
            break;
          }
          this.expanding.add(name);
          const spread = this.measure(fragment.selectionSet, type, sized, size);
          this.expanding.delete(name);
          out.complexity = sat(out.complexity + spread.complexity);
          for (let b = 0; b < this.bucketCount; b++) {
            const charge = spread.charges[b] ?? 0;
            if (charge !== 0) out.charges[b] = sat((out.charges[b] ?? 0) + charge);
          }
          break;
        }
      }
    }
  }

  /** `sizeOverride` is the enclosing connection's size when this is one of its sized fields, else -1. */
  private field(node: FieldNode, field: FieldCost, sizeOverride: number, out: Measure): void {
    const n = sizeOverride >= 0 ? sizeOverride : field.isList ? this.listSize(node, field) : 1;
    let complexity = field.weight;
    let sub: Measure | undefined;
    if (node.selectionSet !== undefined && field.composite) {
      let childSize = -1;
      if (field.sizedFields !== null) childSize = this.slicedSize(node, field) ?? field.assumedSize ?? -1;
      sub =
        childSize >= 0
          ? this.measure(node.selectionSet, field.type, field.sizedFields, childSize)
          : this.measure(node.selectionSet, field.type, null, 0);
      complexity = sat(complexity + sat(n * sub.complexity));
    }
    out.complexity = sat(out.complexity + complexity);
    if (sub !== undefined) {
      for (let b = 0; b < this.bucketCount; b++) {
        const charge = sub.charges[b] ?? 0;
        if (charge !== 0) out.charges[b] = sat((out.charges[b] ?? 0) + sat(n * charge));
      }
    }
    for (const rule of field.rules) {
      this.touched[rule.bucket] = 1;
      out.charges[rule.bucket] = sat((out.charges[rule.bucket] ?? 0) + (rule.cost ?? complexity));
    }
  }

  private listSize(node: FieldNode, field: FieldCost): number {
    return this.slicedSize(node, field) ?? field.assumedSize ?? this.input.defaultListSize;
  }

  /** The largest usable slicing argument value, or null when none is usable. */
  private slicedSize(node: FieldNode, field: FieldCost): number | null {
    let size: number | null = null;
    for (const slicing of field.slicing) {
      const value = this.argumentValue(node, slicing);
      if (typeof value === 'number' && Number.isInteger(value) && value >= 0 && (size === null || value > size)) {
        size = value;
      }
    }
    return size;
  }

  private argumentValue(node: FieldNode, slicing: SlicingArgument): unknown {
    const { argument, path } = slicing;
    let value: unknown = argument.defaultValue;
    const argNode = node.arguments?.find((a) => a.name.value === argument.name);
    if (argNode !== undefined) {
      const { variables } = this.input;
      if (argNode.value.kind !== Kind.VARIABLE) {
        value = valueFromAST(argNode.value, argument.type, variables);
      } else if (hasOwn.call(variables, argNode.value.name.value)) {
        value = variables[argNode.value.name.value];
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
      const condition = directive.arguments?.find((a) => a.name.value === 'if')?.value;
      let value: unknown;
      if (condition?.kind === Kind.BOOLEAN) value = condition.value;
      else if (condition?.kind === Kind.VARIABLE) value = this.input.variables[condition.name.value];
      if (value === (name === 'skip')) return false;
    }
    return true;
  }

  private applies(typeCondition: string, type: GraphQLObjectType): boolean {
    if (typeCondition === type.name) return true;
    const condition = this.input.schema.getType(typeCondition);
    return condition !== undefined && isAbstractType(condition) && this.input.schema.isSubType(condition, type);
  }
}
