import { getDirective } from '@graphql-tools/utils';
import {
  GraphQLFloat,
  GraphQLInt,
  SchemaMetaFieldDef,
  TypeMetaFieldDef,
  TypeNameMetaFieldDef,
  getNamedType,
  getNullableType,
  isAbstractType,
  isCompositeType,
  isInterfaceType,
  isListType,
  isObjectType,
  isIntrospectionType,
} from 'graphql';
import type {
  GraphQLArgument,
  GraphQLCompositeType,
  GraphQLField,
  GraphQLInterfaceType,
  GraphQLNamedType,
  GraphQLObjectType,
  GraphQLSchema,
} from 'graphql';

/** One `@tokenBucket` as written in the schema. */
export interface TokenBucketAnnotation {
  /** `'Query.search'` for a field, `'Query'` for a type-level directive. */
  coordinate: string;
  /** The directive's `name` argument. */
  bucket: string;
  /** The fixed cost, or null when the field's complexity is charged. */
  cost: number | null;
}

/** A bucket a field charges: by index into `SchemaCosts.bucketNames`. */
export interface BucketRule {
  readonly bucket: number;
  readonly cost: number | null;
}

/** An argument whose value sizes a list; `path` walks into an input object (`input.first`). */
export interface SlicingArgument {
  readonly argument: GraphQLArgument;
  readonly path: readonly string[];
  /**
   * `'Int'` or `'Float'` when the argument itself (no `path`) is of that
   * built-in scalar, nullable or not: the walk then reads a literal the way
   * its `parseLiteral` does instead of calling `valueFromAST`. Else null.
   */
  readonly literal: 'Int' | 'Float' | null;
}

/** Everything the per-request walk needs to know about one field of one concrete type. */
export interface FieldCost {
  readonly weight: number;
  readonly isList: boolean;
  /** The named return type. */
  readonly type: GraphQLNamedType;
  /** The return type when it is composite: the walk only descends into such a type. */
  readonly target: CompositeCost | null;
  readonly slicing: readonly SlicingArgument[];
  readonly assumedSize: number | null;
  /** Child fields that take this (non-list) field's size, e.g. a Relay connection's `edges`. */
  readonly sizedFields: ReadonlySet<string> | null;
  readonly rules: readonly BucketRule[];
}

/**
 * An object, interface or union type as the walk sees it: everything it
 * would otherwise ask graphql-js (`isAbstractType`, `getPossibleTypes`,
 * `isSubType`) per selection, answered once at start-up.
 */
export interface CompositeCost {
  readonly type: GraphQLCompositeType;
  readonly name: string;
  /** An object type's fields by name; null for an interface or union. */
  readonly fields: ReadonlyMap<string, FieldCost> | null;
  /** An interface's or union's possible object types; null for an object type. */
  readonly possibleTypes: readonly CompositeCost[] | null;
  /** For an object type: the names of the interfaces and unions it belongs to, so a fragment on one of them applies. */
  readonly abstractTypes: ReadonlySet<string>;
}

export interface SchemaCosts {
  readonly annotations: readonly TokenBucketAnnotation[];
  readonly bucketNames: readonly string[];
  /** Every object (introspection types included), interface and union type. */
  readonly types: ReadonlyMap<GraphQLNamedType, CompositeCost>;
  /** `__typename`, `__schema`, `__type`: valid on types that do not declare them. */
  readonly metaFields: ReadonlyMap<string, FieldCost>;
}

interface MutableCompositeCost extends CompositeCost {
  readonly fields: Map<string, FieldCost> | null;
  possibleTypes: readonly CompositeCost[] | null;
  readonly abstractTypes: Set<string>;
}

type Directable = Parameters<typeof getDirective>[1];

interface ListSizeRule {
  assumedSize: number | null;
  slicingArguments: readonly string[] | null;
  sizedFields: readonly string[] | null;
}

const NO_RULES: readonly BucketRule[] = Object.freeze([]);
const NO_SLICING: readonly SlicingArgument[] = Object.freeze([]);

/**
 * Reads every `@tokenBucket`, `@cost` and `@listSize` of the schema once and
 * flattens them into per-field lookups, so that pricing an operation never
 * touches a directive.
 */
export function compileSchemaCosts(schema: GraphQLSchema, chargeIntrospection = true): SchemaCosts {
  return new Compiler(schema, chargeIntrospection).compile();
}

class Compiler {
  private readonly readsCost: boolean;
  private readonly readsListSize: boolean;
  private readonly annotations: TokenBucketAnnotation[] = [];
  private readonly bucketIndex = new Map<string, number>();
  private readonly bucketsOf = new Map<object, readonly BucketRule[]>();
  private readonly typeWeights = new Map<GraphQLNamedType, number | null>();
  private readonly composites = new Map<GraphQLNamedType, MutableCompositeCost>();

  constructor(
    private readonly schema: GraphQLSchema,
    private readonly chargeIntrospection: boolean,
  ) {
    // Only directives the schema declares are read: another directive named
    // `cost` without a `weight` is not the IBM one.
    this.readsCost = schema.getDirective('cost')?.args.some((a) => a.name === 'weight') ?? false;
    this.readsListSize = schema.getDirective('listSize') !== undefined;
  }

  compile(): SchemaCosts {
    const types = Object.values(this.schema.getTypeMap());
    for (const type of types) {
      if ((isObjectType(type) || isInterfaceType(type)) && !isIntrospectionType(type)) {
        this.bucketsOf.set(type, this.readTokenBuckets(type, type.name));
        for (const field of Object.values(type.getFields())) {
          this.bucketsOf.set(field, this.readTokenBuckets(field, `${type.name}.${field.name}`));
        }
      }
    }

    const composites = this.composites;
    for (const type of types) {
      if (isCompositeType(type)) {
        composites.set(type, {
          type,
          name: type.name,
          fields: isObjectType(type) ? new Map() : null,
          possibleTypes: null,
          abstractTypes: new Set(),
        });
      }
    }
    for (const type of types) {
      if (isAbstractType(type)) {
        const possibleTypes: CompositeCost[] = [];
        for (const object of this.schema.getPossibleTypes(type)) {
          const composite = composites.get(object);
          if (composite === undefined) continue;
          possibleTypes.push(composite);
          // What `schema.isSubType(type, object)` answers.
          composite.abstractTypes.add(type.name);
        }
        const abstract = composites.get(type);
        if (abstract !== undefined) abstract.possibleTypes = Object.freeze(possibleTypes);
      }
    }
    for (const type of types) {
      if (isObjectType(type)) {
        const byName = composites.get(type)?.fields;
        for (const field of Object.values(type.getFields())) {
          byName?.set(field.name, this.fieldCost(type, field));
        }
      }
    }

    // Introspection is part of "every operation's whole complexity": the root
    // query type's own directives apply to __schema and __type as to its fields.
    const query = this.schema.getQueryType();
    const rootFields = query ? composites.get(query)?.fields : undefined;
    if (query && rootFields && this.chargeIntrospection) {
      for (const meta of [SchemaMetaFieldDef, TypeMetaFieldDef]) rootFields.set(meta.name, this.fieldCost(query, meta));
    }

    const metaFields = new Map<string, FieldCost>();
    for (const meta of [TypeNameMetaFieldDef, SchemaMetaFieldDef, TypeMetaFieldDef]) {
      metaFields.set(meta.name, this.fieldCost(null, meta));
    }

    return {
      annotations: Object.freeze(this.annotations),
      bucketNames: Object.freeze([...this.bucketIndex.keys()]),
      types: composites,
      metaFields,
    };
  }

  private fieldCost(owner: GraphQLObjectType | null, field: GraphQLField<unknown, unknown>): FieldCost {
    const coordinate = owner === null ? field.name : `${owner.name}.${field.name}`;
    const interfaceFields: GraphQLField<unknown, unknown>[] = [];
    const interfaceCoordinates: string[] = [];
    if (owner !== null) {
      for (const iface of owner.getInterfaces()) {
        const inherited = iface.getFields()[field.name];
        if (inherited !== undefined) {
          interfaceFields.push(inherited);
          interfaceCoordinates.push(`${iface.name}.${field.name}`);
        }
      }
    }
    const type = getNamedType(field.type);
    const isList = isListType(getNullableType(field.type));

    // @cost and @listSize written on an interface field are meant for every
    // implementation that does not say otherwise.
    let weight = this.readWeight(field, coordinate);
    let listSize = this.readListSize(field, coordinate);
    interfaceFields.forEach((inherited, i) => {
      weight ??= this.readWeight(inherited, interfaceCoordinates[i] ?? coordinate);
      listSize ??= this.readListSize(inherited, interfaceCoordinates[i] ?? coordinate);
    });
    weight ??= this.typeWeight(type) ?? (isCompositeType(type) ? 1 : 0);

    const sizedFields = !isList && listSize?.sizedFields != null ? this.sizedFields(type, listSize.sizedFields, coordinate) : null;
    const slicing = isList || sizedFields !== null ? this.slicing(field, listSize?.slicingArguments ?? null, coordinate) : NO_SLICING;

    return {
      weight,
      isList,
      type,
      target: this.composites.get(type) ?? null,
      slicing,
      assumedSize: listSize?.assumedSize ?? null,
      sizedFields,
      rules: owner === null ? NO_RULES : this.rules(owner, field, interfaceFields),
    };
  }

  /** Field-level first, then the interfaces' same field, then the type-level directives: the first rule for a bucket wins. */
  private rules(
    owner: GraphQLObjectType,
    field: GraphQLField<unknown, unknown>,
    interfaceFields: readonly GraphQLField<unknown, unknown>[],
  ): readonly BucketRule[] {
    const sources: object[] = [field, ...interfaceFields, owner];
    for (const iface of owner.getInterfaces()) {
      if (iface.getFields()[field.name] !== undefined) sources.push(iface);
    }
    const rules = new Map<number, BucketRule>();
    for (const source of sources) {
      for (const rule of this.bucketsOf.get(source) ?? NO_RULES) {
        if (!rules.has(rule.bucket)) rules.set(rule.bucket, rule);
      }
    }
    return rules.size === 0 ? NO_RULES : Object.freeze([...rules.values()]);
  }

  private readTokenBuckets(node: Directable, coordinate: string): readonly BucketRule[] {
    const rules: BucketRule[] = [];
    for (const args of this.directive(node, 'tokenBucket', coordinate)) {
      const bucket: unknown = args['name'];
      const cost: unknown = args['cost'];
      if (typeof bucket !== 'string' || bucket === '') {
        throw new Error(`@tokenBucket on ${coordinate}: name must be a non-empty string, got ${describe(bucket)}`);
      }
      if (cost != null && !(typeof cost === 'number' && Number.isSafeInteger(cost) && cost >= 0)) {
        throw new Error(`@tokenBucket on ${coordinate}: cost must be a non-negative integer or omitted, got ${describe(cost)}`);
      }
      const fixed = cost ?? null;
      const index = this.bucketIndexOf(bucket);
      const same = rules.find((r) => r.bucket === index);
      if (same !== undefined) {
        if (same.cost === fixed) continue;
        throw new Error(`@tokenBucket on ${coordinate}: bucket "${bucket}" appears twice with different costs`);
      }
      rules.push(Object.freeze({ bucket: index, cost: fixed }));
      this.annotations.push(Object.freeze({ coordinate, bucket, cost: fixed }));
    }
    return rules.length === 0 ? NO_RULES : Object.freeze(rules);
  }

  private bucketIndexOf(name: string): number {
    let index = this.bucketIndex.get(name);
    if (index === undefined) {
      index = this.bucketIndex.size;
      this.bucketIndex.set(name, index);
    }
    return index;
  }

  private typeWeight(type: GraphQLNamedType): number | null {
    let weight = this.typeWeights.get(type);
    if (weight === undefined) {
      weight = this.readWeight(type, type.name);
      this.typeWeights.set(type, weight);
    }
    return weight;
  }

  private readWeight(node: Directable, coordinate: string): number | null {
    if (!this.readsCost) return null;
    const args = this.directive(node, 'cost', coordinate)[0];
    if (args === undefined) return null;
    const raw: unknown = args['weight'];
    // The IBM specification declares `weight: String!` ("2.5"), Apollo `weight: Int!`.
    const weight = typeof raw === 'number' ? raw : typeof raw === 'string' && raw.trim() !== '' ? Number(raw) : NaN;
    if (!Number.isFinite(weight) || weight < 0) {
      throw new Error(`@cost on ${coordinate}: weight must be a finite non-negative number, got ${describe(raw)}`);
    }
    return weight;
  }

  private readListSize(node: Directable, coordinate: string): ListSizeRule | null {
    if (!this.readsListSize) return null;
    const args = this.directive(node, 'listSize', coordinate)[0];
    if (args === undefined) return null;
    const assumedSize: unknown = args['assumedSize'];
    if (assumedSize != null && !(typeof assumedSize === 'number' && Number.isSafeInteger(assumedSize) && assumedSize >= 0)) {
      throw new Error(`@listSize on ${coordinate}: assumedSize must be a non-negative integer, got ${describe(assumedSize)}`);
    }
    return {
      assumedSize: assumedSize ?? null,
      slicingArguments: stringList(args['slicingArguments'], `@listSize on ${coordinate}: slicingArguments`),
      sizedFields: stringList(args['sizedFields'], `@listSize on ${coordinate}: sizedFields`),
    };
  }

  private slicing(
    field: GraphQLField<unknown, unknown>,
    declared: readonly string[] | null,
    coordinate: string,
  ): readonly SlicingArgument[] {
    const slicing: SlicingArgument[] = [];
    if (declared !== null) {
      for (const name of declared) {
        const [argName = '', ...path] = name.split('.');
        const argument = field.args.find((a) => a.name === argName);
        if (argument === undefined) {
          throw new Error(`@listSize on ${coordinate}: slicing argument "${name}" is not an argument of the field`);
        }
        slicing.push({ argument, path, literal: literalKind(argument, path) });
      }
    } else {
      for (const argument of field.args) {
        if (argument.name === 'first' || argument.name === 'last') {
          slicing.push({ argument, path: [], literal: literalKind(argument, []) });
        }
      }
    }
    return slicing.length === 0 ? NO_SLICING : Object.freeze(slicing);
  }

  private sizedFields(type: GraphQLNamedType, names: readonly string[], coordinate: string): ReadonlySet<string> {
    if (isObjectType(type) || isInterfaceType(type)) {
      const fields = (type as GraphQLObjectType | GraphQLInterfaceType).getFields();
      for (const name of names) {
        if (fields[name] === undefined) {
          throw new Error(`@listSize on ${coordinate}: sized field "${name}" is not a field of ${type.name}`);
        }
      }
    }
    return new Set(names);
  }

  private directive(node: Directable, name: string, coordinate: string): readonly Record<string, unknown>[] {
    try {
      return getDirective(this.schema, node, name) ?? [];
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      throw new Error(`@${name} on ${coordinate}: ${reason}`, { cause: error });
    }
  }
}

/** Only the built-in scalars themselves (not a custom scalar named `Int`) have a known `parseLiteral`. */
function literalKind(argument: GraphQLArgument, path: readonly string[]): 'Int' | 'Float' | null {
  if (path.length > 0) return null;
  const type = getNullableType(argument.type);
  return type === GraphQLInt ? 'Int' : type === GraphQLFloat ? 'Float' : null;
}

function stringList(value: unknown, what: string): readonly string[] | null {
  if (value == null) return null;
  const list = Array.isArray(value) ? (value as unknown[]) : [value];
  for (const item of list) {
    if (typeof item !== 'string' || item === '') throw new Error(`${what} must be a list of names, got ${describe(value)}`);
  }
  return list as string[];
}

function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number') return String(value);
  if (typeof value === 'bigint') return `${value}n`;
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
