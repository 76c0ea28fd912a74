import {
  Kind,
  SchemaMetaFieldDef,
  TypeMetaFieldDef,
  TypeNameMetaFieldDef,
  getNamedType,
  getNullableType,
  isAbstractType,
  isCompositeType,
  isEnumType,
  isInputObjectType,
  isInterfaceType,
  isIntrospectionType,
  isListType,
  isObjectType,
  isScalarType,
} from 'graphql';
import type {
  GraphQLArgument,
  GraphQLCompositeType,
  GraphQLField,
  GraphQLInputType,
  GraphQLNamedType,
  GraphQLObjectType,
  GraphQLOutputType,
  GraphQLSchema,
  SelectionNode,
} from 'graphql';
import { NO_SLICING, inexactSlicingWarnings, sizedFieldsContext, slicingArgumentsOf } from './list-size-rules.js';
import { inherited, listSizeKey, readSchemaAnnotations } from './schema-annotations.js';
import type { ListSizeRule, SchemaAnnotations } from './schema-annotations.js';
import { requiredSelectionCosts } from './required-selections.js';
import type { RequiredSelections } from './required-selections.js';
import type { FederationModel } from './entity-fetches.js';
import { sat } from './selections.js';
import { FieldShapes } from './field-shapes.js';

/** One `@tokenBucket` as written in the schema. */
export interface TokenBucketAnnotation {
  /** `'Query.search'` for a field, `'Query'` for a type-level directive. */
  coordinate: string;
  /** The directive's `name` argument. */
  bucket: string;
  /** The fixed cost, or null when the field's complexity is charged. */
  cost: number | null;
  /** Set when the rule comes from the `rules` option rather than a directive. */
  fromRules?: true;
}

/** A bucket rule given without a directive, by schema coordinate (`rules` option). */
export interface CoordinateRule {
  readonly bucket: string;
  readonly cost: number | null;
}

/** What a schema's directives do not say, given beside it. */
export interface SchemaCostExtras {
  /** `'Query.search'` or `'Query'` → rules, as `@tokenBucket` there would say. An unknown coordinate is an error. */
  readonly rules?: ReadonlyMap<string, readonly CoordinateRule[]> | undefined;
  /** Federation: the selection a field's resolver needs from other subgraphs (`@requires`), which it also pays for. */
  readonly requires?: RequiredSelections | undefined;
  /** Federation: per field (`'Product.reviews'`), the subgraphs that resolve it, one bit each (as many bits as subgraphs). */
  readonly graphs?: ReadonlyMap<string, bigint> | undefined;
  /** Federation: how each subgraph finds each entity, for the fetches a required selection needs. */
  readonly federation?: FederationModel | undefined;
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

/** How an argument or input field value is priced (IBM `@cost` on arguments and input fields). */
export type InputCost = LeafInputCost | ListInputCost | ObjectInputCost;

/** A scalar or enum: its type's `@cost`, 0 without one. */
export interface LeafInputCost {
  readonly kind: 'leaf';
  readonly cost: number;
}

export interface ListInputCost {
  readonly kind: 'list';
  readonly of: InputCost;
}

export interface ObjectInputCost {
  readonly kind: 'object';
  readonly fields: ReadonlyMap<string, InputFieldCost>;
}

export interface InputFieldCost {
  /** `@cost` on the input field, null without one. */
  readonly cost: number | null;
  readonly input: InputCost;
}

export interface ArgumentCost {
  readonly name: string;
  /** `@cost` on the argument, null without one. */
  readonly cost: number | null;
  readonly input: InputCost;
}

/**
 * The fields of a selection that take a size from an enclosing field's
 * `@listSize(sizedFields:)`. A size is named by a variable index: 0 is the
 * nearest enclosing annotation, 1 the one around it, and so on.
 */
export interface SizedContext {
  readonly entries: ReadonlyMap<string, SizedEntry>;
}

export interface SizedEntry {
  /** The sizes this field takes (the largest counts); empty when it only leads to sized fields below. */
  readonly vars: readonly number[];
  /** The sized fields inside this field's selection (`"results { page }"`), or null. */
  readonly sub: SizedContext | null;
}

/** Everything the per-request walks need to know about one field of one concrete type. */
export interface FieldCost {
  readonly name: string;
  /** What each value of the field weighs: its own `@cost`, else its type's (an interface or union: its most expensive possible type's). */
  readonly weight: number;
  /** True when the weight is the type's, not the field's own: then an object of a known type weighs what its own type does. */
  readonly typeWeighted: boolean;
  readonly isList: boolean;
  /** How many list levels wrap the named type: 0 for `T`, 1 for `[T]`, 2 for `[[T]]`. */
  readonly listDepth: number;
  /** The product of the sizes of the inner levels of a list of lists (1 for a plain list or none). */
  readonly innerCount: number;
  /** The named return type. */
  readonly type: GraphQLNamedType;
  /** The return type when it is composite: the walks only descend into such a type. */
  readonly target: CompositeCost | null;
  readonly slicing: readonly SlicingArgument[];
  readonly assumedSize: number | null;
  /** This field's own `@listSize(sizedFields:)`, its size as variable 0; null without one. */
  readonly sized: SizedContext | null;
  readonly rules: readonly BucketRule[];
  /** The arguments that can cost anything when given; null when none can. */
  readonly arguments: readonly ArgumentCost[] | null;
  /**
   * Federation: the subgraphs that resolve this field, one bit each (0n when
   * not federated; a bigint, so any number of subgraphs have a bit of their own). An object a field returns comes from the field's
   * subgraphs; each other subgraph its selection needs is one more fetch.
   */
  readonly graphs: bigint;
  /**
   * Federation, a field with `@requires`: the subgraphs of what it requires
   * (first level), fetched before it, which is then fetched on its own.
   * Null for any other field.
   */
  readonly requiredGraphs: readonly bigint[] | null;
}

/**
 * An object, interface or union type as the walks see it: everything they
 * would otherwise ask graphql-js (`isAbstractType`, `getPossibleTypes`,
 * `isSubType`) per selection, answered once at start-up.
 */
export interface CompositeCost {
  readonly type: GraphQLCompositeType;
  readonly name: string;
  /** An object type's fields by name, `__typename` included; null for an interface or union. */
  readonly fields: ReadonlyMap<string, FieldCost> | null;
  /** An interface's or union's possible object types; null for an object type. */
  readonly possibleTypes: readonly CompositeCost[] | null;
  /**
   * An interface's or union's possible types, one per class of types whose
   * fields of the abstract type (and `__typename`) price alike: a selection
   * set that names no narrower type costs the same on every type of a class.
   * Null for an object type.
   */
  readonly representatives: readonly CompositeCost[] | null;
  /** For an interface or union: the class (an index into `representatives`) of each of `possibleTypes`. Null for an object type. */
  readonly classes: readonly number[] | null;
  /** For an object type: the names of the interfaces and unions it belongs to, so a fragment on one of them applies. */
  readonly abstractTypes: ReadonlySet<string>;
  /** The type-level `@tokenBucket`s of this type (an object type: its interfaces' too). */
  readonly typeRules: readonly BucketRule[];
  /** This type's number among the schema's composite types, from 0: for keys of memo tables. */
  readonly index: number;
  /** What an object of this type weighs: its `@cost`, else 1; an interface or union, the most of that and its possible types' weights. */
  readonly weight: number;
}

export interface SchemaCosts {
  readonly annotations: readonly TokenBucketAnnotation[];
  readonly bucketNames: readonly string[];
  /** Every object (introspection types included), interface and union type. */
  readonly types: ReadonlyMap<GraphQLNamedType, CompositeCost>;
  /** `__schema`, `__type`, `__typename` where a type's own fields do not have them: they charge nothing. */
  readonly metaFields: ReadonlyMap<string, FieldCost>;
  /** What start-up should warn about: annotations not read, slicing arguments read by every JavaScript reading. */
  readonly warnings: readonly string[];
  /** Numbers for field shapes: equal for two fields that price every selection of them alike. */
  readonly shapes: FieldShapes;
}

interface MutableCompositeCost extends CompositeCost {
  readonly fields: Map<string, FieldCost> | null;
  possibleTypes: readonly CompositeCost[] | null;
  representatives: readonly CompositeCost[] | null;
  classes: readonly number[] | null;
  readonly abstractTypes: Set<string>;
  typeRules: readonly BucketRule[];
  weight: number;
}

const NO_RULES: readonly BucketRule[] = Object.freeze([]);

/** An element annotations are read from, and its coordinate for messages. */
interface Source<T> {
  readonly element: T;
  readonly coordinate: string;
}

const ENTITIES_SLICING: readonly string[] = Object.freeze(['representations']);

/**
 * Reads every `@tokenBucket`, `@cost` and `@listSize` of the schema once and
 * flattens them into per-field lookups, so that pricing an operation never
 * touches a directive.
 */
export function compileSchemaCosts(
  schema: GraphQLSchema,
  defaultListSize: number,
  chargeIntrospection = true,
  extras: SchemaCostExtras = {},
): SchemaCosts {
  return new Compiler(schema, defaultListSize, chargeIntrospection, extras).compile();
}

class Compiler {
  private readonly annotated: SchemaAnnotations;
  private readonly annotations: TokenBucketAnnotation[] = [];
  private readonly bucketIndex = new Map<string, number>();
  private readonly bucketsOf = new Map<object, readonly BucketRule[]>();
  private readonly typeWeights = new Map<GraphQLNamedType, number | null>();
  private readonly inputCosts = new Map<GraphQLNamedType, InputCost>();
  private readonly composites = new Map<GraphQLNamedType, MutableCompositeCost>();
  /** Numbers for field shapes, shared with the walks (`SchemaCosts.shapes`). */
  private readonly fieldShapes = new FieldShapes();
  /** The coordinates of `extras.rules` found in the schema. */
  private readonly ruled = new Set<string>();
  /** Fields with a slicing argument that is not an `Int` (nor a list), for a start-up warning. */
  private readonly inexactSlicing = new Set<string>();
  /** What each introspection list can hold in this schema, once one is priced. */
  private introspectionSizes: ReadonlyMap<string, number> | null = null;

  constructor(
    private readonly schema: GraphQLSchema,
    private readonly defaultListSize: number,
    private readonly chargeIntrospection: boolean,
    private readonly extras: SchemaCostExtras,
  ) {
    this.annotated = readSchemaAnnotations(schema);
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
    for (const coordinate of this.extras.rules?.keys() ?? []) {
      if (!this.ruled.has(coordinate)) {
        throw new Error(`rules: "${coordinate}" is not an object type, an interface or one of their fields in the schema`);
      }
    }

    const composites = this.composites;
    for (const type of types) {
      if (isCompositeType(type)) {
        composites.set(type, {
          type,
          name: type.name,
          index: composites.size,
          fields: isObjectType(type) ? new Map() : null,
          possibleTypes: null,
          representatives: null,
          classes: null,
          abstractTypes: new Set(),
          typeRules: this.typeRules(type),
          weight: this.typeWeight(type) ?? 1,
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
        if (abstract !== undefined) {
          abstract.possibleTypes = Object.freeze(possibleTypes);
          // An object behind an interface or union weighs what its own type does: the field, what the most expensive one does.
          for (const possible of possibleTypes) abstract.weight = Math.max(abstract.weight, possible.weight);
        }
      }
    }
    for (const type of types) {
      if (isObjectType(type)) {
        const byName = composites.get(type)?.fields;
        if (byName === undefined || byName === null) continue;
        for (const field of Object.values(type.getFields())) byName.set(field.name, this.fieldCost(type, field));
        byName.set(TypeNameMetaFieldDef.name, this.typenameCost(type));
      }
    }
    if (this.extras.requires !== undefined) {
      // A field's resolver runs only once the gateway fetched what it requires: that work is the field's too.
      for (const [field, extra] of requiredSelectionCosts(composites, this.extras.requires, this.defaultListSize, this.extras.federation)) {
        const owner = composites.get(field.owner);
        owner?.fields?.set(field.cost.name, { ...field.cost, weight: field.cost.weight + extra });
      }
    }

    // Introspection is part of "every operation's whole complexity": the root
    // query type's own directives apply to __schema and __type as to its fields.
    const query = this.schema.getQueryType();
    const rootFields = query ? composites.get(query)?.fields : undefined;
    if (query && rootFields && this.chargeIntrospection) {
      for (const meta of [SchemaMetaFieldDef, TypeMetaFieldDef]) rootFields.set(meta.name, this.fieldCost(query, meta));
    }

    for (const type of types) {
      const abstract = isAbstractType(type) ? composites.get(type) : undefined;
      if (abstract?.possibleTypes != null) Object.assign(abstract, this.classes(type, abstract.possibleTypes));
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
      warnings: Object.freeze([...this.annotated.warnings, ...inexactSlicingWarnings(this.inexactSlicing)]),
      shapes: this.fieldShapes,
    };
  }

  private fieldCost(owner: GraphQLObjectType | null, field: GraphQLField<unknown, unknown>): FieldCost {
    const coordinate = owner === null ? field.name : `${owner.name}.${field.name}`;
    const interfaceFields: Source<GraphQLField<unknown, unknown>>[] = [];
    if (owner !== null) {
      for (const iface of owner.getInterfaces()) {
        const inherited = iface.getFields()[field.name];
        if (inherited !== undefined) interfaceFields.push({ element: inherited, coordinate: `${iface.name}.${field.name}` });
      }
    }
    const type = getNamedType(field.type);
    const listDepth = listDepthOf(field.type);

    // @cost and @listSize written on an interface field are meant for every
    // implementation that does not say otherwise.
    const { costName, listSizeName } = this.annotated;
    const ownWeight =
      this.readWeight(field) ??
      inherited(interfaceFields.map((s) => ({ coordinate: s.coordinate, value: this.readWeight(s.element) })), String, `@${costName} on ${coordinate}`, 'weights', coordinate);
    // Without one of its own, a field weighs its type: an interface or union, its most expensive possible type.
    const typeWeighted = ownWeight === null;
    const weight = ownWeight ?? this.composites.get(type)?.weight ?? this.typeWeight(type) ?? 0;
    const listSize =
      this.readListSize(field) ??
      inherited(interfaceFields.map((s) => ({ coordinate: s.coordinate, value: this.readListSize(s.element) })), listSizeKey, `@${listSizeName} on ${coordinate}`, 'arguments', coordinate);

    const assumedSize = listSize?.assumedSize ?? (owner !== null && isIntrospectionType(owner) ? this.introspectionSize(owner, field) : null);
    // Every inner level of a list of lists multiplies too: by the size it is assumed to have.
    let innerCount = 1;
    for (let level = 1; level < listDepth; level++) innerCount = sat(innerCount * (assumedSize ?? this.defaultListSize));

    const what = `@${this.annotated.listSizeName} on ${coordinate}`;
    const sized = listSize?.sizedFields != null ? sizedFieldsContext(type, listSize.sizedFields, what) : null;
    const slicingArguments = listSize?.slicingArguments ?? (this.isEntities(owner, field) ? ENTITIES_SLICING : null);
    if (listSize !== null && listDepth === 0 && sized === null) {
      throw new Error(`${what}: the field is not a list and @${this.annotated.listSizeName} names no sizedFields, so it sizes nothing`);
    }
    const slicing = listDepth > 0 || sized !== null ? slicingArgumentsOf(field, slicingArguments, coordinate, what, this.inexactSlicing) : NO_SLICING;

    return {
      name: field.name,
      weight,
      typeWeighted,
      isList: listDepth > 0,
      listDepth,
      innerCount,
      type,
      target: this.composites.get(type) ?? null,
      slicing,
      assumedSize,
      sized,
      rules: owner === null ? NO_RULES : this.rules(owner, { element: field, coordinate }, interfaceFields),
      arguments: this.argumentCosts(field, coordinate, interfaceFields),
      graphs: this.extras.graphs?.get(coordinate) ?? 0n,
      requiredGraphs: this.requiredGraphs(owner, coordinate),
    };
  }

  /** The subgraphs of a `@requires` field's required fields, first level (each field's bits; 0 for one not federated). */
  private requiredGraphs(owner: GraphQLObjectType | null, coordinate: string): readonly bigint[] | null {
    const selections = this.extras.requires?.get(coordinate);
    if (owner === null || selections === undefined || this.extras.graphs === undefined) return null;
    const graphs: bigint[] = [];
    const add = (list: readonly SelectionNode[]): void => {
      for (const selection of list) {
        if (selection.kind === Kind.FIELD) graphs.push(this.extras.graphs?.get(`${owner.name}.${selection.name.value}`) ?? 0n);
        else if (selection.kind === Kind.INLINE_FRAGMENT) add(selection.selectionSet.selections);
      }
    };
    add(selections);
    return Object.freeze(graphs);
  }

  /**
   * A subgraph's `_entities(representations:)` returns one entity per
   * representation: the gateway's list is its size (a list argument counts
   * its elements), not an assumed one.
   */
  private isEntities(owner: GraphQLObjectType | null, field: GraphQLField<unknown, unknown>): boolean {
    if (owner === null || owner !== this.schema.getQueryType() || field.name !== '_entities') return false;
    const representations = field.args.find((a) => a.name === 'representations');
    return representations !== undefined && isListType(getNullableType(representations.type));
  }

  /**
   * An introspection list's size: the longest it can be in this schema,
   * where that is more than `defaultListSize`. The schema says how many
   * types, fields or arguments introspection returns; assuming fewer, a
   * schema of 500 types would answer `{ __schema { types { fields { … } } } }`
   * with 50 times the work charged per level. Null for anything else.
   */
  private introspectionSize(owner: GraphQLObjectType, field: GraphQLField<unknown, unknown>): number | null {
    const key = `${owner.name}.${field.name}`;
    let sizes = this.introspectionSizes;
    if (sizes === null) {
      const types = Object.values(this.schema.getTypeMap());
      const directives = this.schema.getDirectives();
      let fields = 0;
      let interfaces = 0;
      let possibleTypes = 0;
      let enumValues = 0;
      let inputFields = 0;
      let fieldArgs = 0;
      for (const type of types) {
        if (isObjectType(type) || isInterfaceType(type)) {
          const all = Object.values(type.getFields());
          fields = Math.max(fields, all.length);
          for (const f of all) fieldArgs = Math.max(fieldArgs, f.args.length);
          interfaces = Math.max(interfaces, type.getInterfaces().length);
        }
        if (isAbstractType(type)) possibleTypes = Math.max(possibleTypes, this.schema.getPossibleTypes(type).length);
        if (isEnumType(type)) enumValues = Math.max(enumValues, type.getValues().length);
        if (isInputObjectType(type)) inputFields = Math.max(inputFields, Object.keys(type.getFields()).length);
      }
      this.introspectionSizes = sizes = new Map([
        ['__Schema.types', types.length],
        ['__Schema.directives', directives.length],
        ['__Type.fields', fields],
        ['__Type.interfaces', interfaces],
        ['__Type.possibleTypes', possibleTypes],
        ['__Type.enumValues', enumValues],
        ['__Type.inputFields', inputFields],
        ['__Field.args', fieldArgs],
        ['__Directive.args', Math.max(0, ...directives.map((d) => d.args.length))],
        ['__Directive.locations', Math.max(0, ...directives.map((d) => d.locations.length))],
      ]);
    }
    const size = sizes.get(key);
    return size === undefined ? null : Math.max(size, this.defaultListSize);
  }

  /** The classes of `type`'s possible types whose fields of `type` (its own, and `__typename`) price alike, and one type of each. */
  private classes(
    type: GraphQLNamedType,
    possibleTypes: readonly CompositeCost[],
  ): { representatives: readonly CompositeCost[]; classes: readonly number[] } {
    const names = [...(isInterfaceType(type) ? Object.keys(type.getFields()) : []), TypeNameMetaFieldDef.name];
    const bySignature = new Map<string, number>();
    const representatives: CompositeCost[] = [];
    const classes = possibleTypes.map((possible) => {
      const signature = names
        .map((name) => {
          const field = possible.fields?.get(name);
          return field === undefined ? '-' : String(this.fieldShapes.of(field));
        })
        .join(' ');
      let index = bySignature.get(signature);
      if (index === undefined) {
        bySignature.set(signature, (index = representatives.length));
        representatives.push(possible);
      }
      return index;
    });
    return {
      representatives: representatives.length === possibleTypes.length ? possibleTypes : Object.freeze(representatives),
      classes: Object.freeze(classes),
    };
  }

  /** `__typename` on an object type: weighs nothing, charges what the type's (and its interfaces') directives say. */
  private typenameCost(owner: GraphQLObjectType): FieldCost {
    return {
      name: TypeNameMetaFieldDef.name,
      weight: 0,
      typeWeighted: false,
      isList: false,
      listDepth: 0,
      innerCount: 1,
      type: getNamedType(TypeNameMetaFieldDef.type),
      target: null,
      slicing: NO_SLICING,
      assumedSize: null,
      sized: null,
      rules: this.rules(owner, null, []),
      arguments: null,
      graphs: 0n,
      requiredGraphs: null,
    };
  }

  /**
   * Four levels, the first to name a bucket giving its rule: the field's
   * own, its interfaces' same field, the type's own, the type's interfaces.
   * The interfaces of one level that name a bucket must give it one cost:
   * one implementation annotated twice differently is refused, whichever
   * interface it names first.
   */
  private rules(owner: GraphQLObjectType, field: Source<object> | null, interfaceFields: readonly Source<object>[]): readonly BucketRule[] {
    const levels: { sources: readonly Source<object>[]; element: string }[] = [
      { sources: field === null ? [] : [field], element: field?.coordinate ?? owner.name },
      { sources: interfaceFields, element: field?.coordinate ?? owner.name },
      { sources: [{ element: owner, coordinate: owner.name }], element: owner.name },
      { sources: owner.getInterfaces().map((i) => ({ element: i, coordinate: i.name })), element: owner.name },
    ];
    const rules = new Map<number, BucketRule>();
    for (const { sources, element } of levels) {
      const level = new Map<number, { rule: BucketRule; coordinate: string }>();
      for (const { element: source, coordinate } of sources) {
        for (const rule of this.bucketsOf.get(source) ?? NO_RULES) {
          if (rules.has(rule.bucket)) continue;
          const other = level.get(rule.bucket);
          if (other === undefined) level.set(rule.bucket, { rule, coordinate });
          else if (other.rule.cost !== rule.cost) {
            const bucket = [...this.bucketIndex.keys()][rule.bucket] ?? '';
            const cost = (r: BucketRule): string => (r.cost === null ? 'its complexity' : String(r.cost));
            throw new Error(
              `@${this.annotated.tokenBucketName} on ${element}: bucket "${bucket}" has different costs on the interfaces it implements, ` +
                `${other.coordinate} (${cost(other.rule)}) and ${coordinate} (${cost(rule)}); give ${element} its own @${this.annotated.tokenBucketName}(name: "${bucket}")`,
            );
          }
        }
      }
      for (const [bucket, { rule }] of level) rules.set(bucket, rule);
    }
    return rules.size === 0 ? NO_RULES : Object.freeze([...rules.values()]);
  }

  private typeRules(type: GraphQLCompositeType): readonly BucketRule[] {
    if (isObjectType(type)) return this.rules(type, null, []);
    return this.bucketsOf.get(type) ?? NO_RULES;
  }

  private readTokenBuckets(node: object, coordinate: string): readonly BucketRule[] {
    const rules: BucketRule[] = [];
    for (const { bucket, cost } of this.annotated.of(node).tokenBuckets) {
      rules.push(Object.freeze({ bucket: this.bucketIndexOf(bucket), cost }));
      this.annotations.push(Object.freeze({ coordinate, bucket, cost }));
    }
    const given = this.extras.rules?.get(coordinate);
    if (given !== undefined) {
      this.ruled.add(coordinate);
      for (const { bucket, cost } of given) {
        const index = this.bucketIndexOf(bucket);
        const same = rules.find((r) => r.bucket === index);
        if (same !== undefined) {
          if (same.cost === cost) continue;
          throw new Error(`rules["${coordinate}"]: bucket "${bucket}" is given twice with different costs (a rule and a @tokenBucket, or two rules)`);
        }
        rules.push(Object.freeze({ bucket: index, cost }));
        this.annotations.push(Object.freeze({ coordinate, bucket, cost, fromRules: true as const }));
      }
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
      weight = this.readWeight(type);
      this.typeWeights.set(type, weight);
    }
    return weight;
  }

  private readWeight(node: object): number | null {
    return this.annotated.of(node).weight;
  }

  private readListSize(node: object): ListSizeRule | null {
    return this.annotated.of(node).listSize;
  }

  private argumentCosts(field: GraphQLField<unknown, unknown>, coordinate: string, interfaceFields: readonly Source<GraphQLField<unknown, unknown>>[]): readonly ArgumentCost[] | null {
    const costs: ArgumentCost[] = [];
    for (const argument of field.args) {
      const copies: { coordinate: string; value: number | null }[] = [];
      for (const { element, coordinate: at } of interfaceFields) {
        const same = element.args.find((a) => a.name === argument.name);
        if (same !== undefined) copies.push({ coordinate: `${at}(${argument.name}:)`, value: this.readWeight(same) });
      }
      const at = `${coordinate}(${argument.name}:)`;
      const cost = this.readWeight(argument) ?? inherited(copies, String, `@${this.annotated.costName} on ${at}`, 'weights', at);
      const input = this.inputCost(argument.type);
      if (cost !== null || mayCost(input)) costs.push({ name: argument.name, cost, input });
    }
    return costs.length === 0 ? null : Object.freeze(costs);
  }

  private inputCost(type: GraphQLInputType): InputCost {
    const nullable = getNullableType(type);
    if (isListType(nullable)) return { kind: 'list', of: this.inputCost(nullable.ofType as GraphQLInputType) };
    const named = nullable as GraphQLNamedType;
    const known = this.inputCosts.get(named);
    if (known !== undefined) return known;
    if (isInputObjectType(named)) {
      // Registered before its fields: an input type may contain itself.
      const fields = new Map<string, InputFieldCost>();
      const cost: ObjectInputCost = { kind: 'object', fields };
      this.inputCosts.set(named, cost);
      for (const field of Object.values(named.getFields())) {
        fields.set(field.name, { cost: this.readWeight(field), input: this.inputCost(field.type) });
      }
      return cost;
    }
    const cost: LeafInputCost = {
      kind: 'leaf',
      cost: isScalarType(named) || isEnumType(named) ? (this.typeWeight(named) ?? 0) : 0,
    };
    this.inputCosts.set(named, cost);
    return cost;
  }
}

function listDepthOf(type: GraphQLOutputType): number {
  let depth = 0;
  let current: GraphQLOutputType = type;
  for (;;) {
    const nullable = getNullableType(current);
    if (!isListType(nullable)) return depth;
    depth++;
    current = nullable.ofType as GraphQLOutputType;
  }
}

/** An input object always costs (1 by default); a scalar or enum only with a `@cost`. */
function mayCost(input: InputCost): boolean {
  switch (input.kind) {
    case 'object':
      return true;
    case 'list':
      return mayCost(input.of);
    case 'leaf':
      return input.cost > 0;
  }
}
