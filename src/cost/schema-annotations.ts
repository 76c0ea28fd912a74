import { isEnumType, isInputObjectType, isInterfaceType, isIntrospectionType, isObjectType, isUnionType } from 'graphql';
import type { GraphQLSchema } from 'graphql';
import { describeValue, directiveApplications, directiveNames } from './cost-directives.js';
import type { Annotated, Application, DirectiveRole } from './cost-directives.js';

/** One `@tokenBucket` of an element: its bucket, and its fixed cost (null: the complexity is charged). */
export interface BucketAnnotation {
  readonly bucket: string;
  readonly cost: number | null;
}

/** One element's `@listSize`. */
export interface ListSizeRule {
  readonly assumedSize: number | null;
  readonly slicingArguments: readonly string[] | null;
  readonly sizedFields: readonly string[] | null;
}

/** What one element of the schema is annotated with. */
export interface ElementAnnotations {
  readonly tokenBuckets: readonly BucketAnnotation[];
  /** `@cost(weight:)`, or a field's `extensions.complexity` number; null without either. */
  readonly weight: number | null;
  readonly listSize: ListSizeRule | null;
}

/** What the schema's annotations say, element by element, and what start-up should warn about. */
export interface SchemaAnnotations {
  /** The annotations of a type, field, argument or input field (nothing for anything else). */
  of(element: object): ElementAnnotations;
  /** The names the directives go by in this schema, for messages. */
  readonly tokenBucketName: string;
  readonly costName: string;
  readonly listSizeName: string;
  /** Start-up warnings, one per kind of annotation that is not read, naming every element. */
  readonly warnings: readonly string[];
}

/** The kinds of elements, as graphql-js names directive locations. */
type ElementKind =
  | 'SCHEMA'
  | 'OBJECT'
  | 'INTERFACE'
  | 'UNION'
  | 'SCALAR'
  | 'ENUM'
  | 'ENUM_VALUE'
  | 'INPUT_OBJECT'
  | 'INPUT_FIELD_DEFINITION'
  | 'FIELD_DEFINITION'
  | 'ARGUMENT_DEFINITION';

/** Where each annotation is read: anywhere else it is refused. */
const READ: Readonly<Record<DirectiveRole, readonly ElementKind[]>> = {
  tokenBucket: ['OBJECT', 'INTERFACE', 'FIELD_DEFINITION'],
  cost: ['OBJECT', 'INTERFACE', 'UNION', 'SCALAR', 'ENUM', 'FIELD_DEFINITION', 'ARGUMENT_DEFINITION', 'INPUT_FIELD_DEFINITION'],
  listSize: ['FIELD_DEFINITION'],
};

const READ_WHERE: Readonly<Record<DirectiveRole, string>> = {
  tokenBucket: 'object types, interfaces and their fields',
  cost: 'fields, arguments, input fields, and object, interface, union, scalar and enum types',
  listSize: 'fields',
};

const WHAT: Readonly<Record<ElementKind, string>> = {
  SCHEMA: 'the schema',
  OBJECT: 'an object type',
  INTERFACE: 'an interface',
  UNION: 'a union',
  SCALAR: 'a scalar',
  ENUM: 'an enum',
  ENUM_VALUE: 'an enum value',
  INPUT_OBJECT: 'an input object type',
  INPUT_FIELD_DEFINITION: 'an input field',
  FIELD_DEFINITION: 'a field',
  ARGUMENT_DEFINITION: 'an argument',
};

const ROLES: readonly DirectiveRole[] = ['tokenBucket', 'cost', 'listSize'];
const NONE: ElementAnnotations = Object.freeze({ tokenBuckets: Object.freeze([]), weight: null, listSize: null });
const hasOwn = Object.prototype.hasOwnProperty;

/** How many elements a warning names before it counts the rest. */
const NAMED_IN_WARNING = 10;

/**
 * Reads every `@tokenBucket`, `@cost` and `@listSize` of the schema, and
 * every field's `extensions.complexity`, once, in every form schema
 * builders write them (see `directiveApplications`).
 *
 * Invariant: every application of these directives (under the names this
 * schema gives them, and under their own names where those are not the
 * ones read) and every `extensions.complexity`, on any element of the
 * schema and in any form, is read, or refused with an `Error` naming the
 * element, or named in a start-up warning — never ignored silently.
 *
 * One element annotated several times (in several forms, or a
 * non-repeatable directive repeated) counts each value once: copies that
 * say the same thing are one annotation, copies that differ are refused.
 * A field's `extensions.complexity` number is one more `@cost` weight.
 */
export function readSchemaAnnotations(schema: GraphQLSchema): SchemaAnnotations {
  const names = directiveNames(schema);
  const namesOf = names.read;
  /** The name messages give a directive: the one the schema's @link gives it, else its own. */
  const nameOf = (role: DirectiveRole): string => namesOf[role][0] ?? role;
  const byElement = new Map<object, ElementAnnotations>();
  const complexityFunctions: string[] = [];
  const complexityElsewhere: string[] = [];
  const unread = new Map<string, string[]>(names.unread.map(({ name }) => [name, []]));

  const read = (element: Annotated, coordinate: string, kind: ElementKind): void => {
    const found: Partial<Record<DirectiveRole, Application[]>> = {};
    for (const role of ROLES) {
      for (const name of namesOf[role]) {
        let applications: Application[];
        try {
          applications = directiveApplications(schema, element, name, role);
        } catch (error) {
          throw new Error(`@${name} on ${coordinate}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
        }
        if (applications.length === 0) continue;
        if (!READ[role].includes(kind)) {
          throw new Error(`@${name} on ${coordinate}: @${name} is read on ${READ_WHERE[role]}, not on ${WHAT[kind]}`);
        }
        found[role] = [...(found[role] ?? []), ...applications];
      }
    }
    for (const [name, coordinates] of unread) {
      let present: boolean;
      try {
        present = directiveApplications(schema, element, name, null).length > 0;
      } catch {
        present = true; // there, though unreadable
      }
      if (present) coordinates.push(coordinate);
    }
    let complexity: number | null = null;
    const extensions: unknown = element.extensions;
    const given: unknown = extensions !== null && typeof extensions === 'object' && hasOwn.call(extensions, 'complexity') ? (extensions as Record<string, unknown>)['complexity'] : undefined;
    if (given !== undefined && given !== null) {
      if (kind !== 'FIELD_DEFINITION') complexityElsewhere.push(coordinate);
      else if (typeof given === 'function') complexityFunctions.push(coordinate);
      else if (typeof given === 'number' && Number.isFinite(given) && given >= 0) complexity = given;
      else throw new Error(`${coordinate}: extensions.complexity must be a finite non-negative number (or a function, which is not read), got ${describeValue(given)}`);
    }
    if (found.tokenBucket === undefined && found.cost === undefined && found.listSize === undefined && complexity === null) return;
    byElement.set(element, {
      tokenBuckets: tokenBuckets(found.tokenBucket ?? [], `@${nameOf('tokenBucket')} on ${coordinate}`),
      weight: weight(found.cost ?? [], complexity, `@${nameOf('cost')} on ${coordinate}`),
      listSize: listSize(found.listSize ?? [], `@${nameOf('listSize')} on ${coordinate}`),
    });
  };

  read(schema, 'the schema', 'SCHEMA');
  for (const type of Object.values(schema.getTypeMap())) {
    if (isIntrospectionType(type)) continue;
    if (isObjectType(type) || isInterfaceType(type)) {
      read(type, type.name, isObjectType(type) ? 'OBJECT' : 'INTERFACE');
      for (const field of Object.values(type.getFields())) {
        read(field, `${type.name}.${field.name}`, 'FIELD_DEFINITION');
        for (const arg of field.args) read(arg, `${type.name}.${field.name}(${arg.name}:)`, 'ARGUMENT_DEFINITION');
      }
    } else if (isInputObjectType(type)) {
      read(type, type.name, 'INPUT_OBJECT');
      for (const field of Object.values(type.getFields())) read(field, `${type.name}.${field.name}`, 'INPUT_FIELD_DEFINITION');
    } else if (isEnumType(type)) {
      read(type, type.name, 'ENUM');
      for (const value of type.getValues()) read(value, `${type.name}.${value.name}`, 'ENUM_VALUE');
    } else {
      read(type, type.name, isUnionType(type) ? 'UNION' : 'SCALAR');
    }
  }

  const warnings: string[] = [];
  if (complexityFunctions.length > 0) {
    warnings.push(
      `graphql-token-bucket: extensions.complexity is a function on ${named(complexityFunctions)}; a function cannot be priced before the operation runs, so it is not read: ` +
        'these fields weigh their @cost, else 1 for an object and 0 for a scalar, and a list the size its slicing arguments give (first, last), else its assumed size. ' +
          'Give each a complexity number or @cost(weight:), and a list the argument that sizes it with @listSize(slicingArguments:)',
    );
  }
  if (complexityElsewhere.length > 0) {
    warnings.push(`graphql-token-bucket: extensions.complexity on ${named(complexityElsewhere)} is not read: only a field's complexity is a weight (its @cost)`);
  }
  for (const { name, why } of names.unread) {
    const coordinates = unread.get(name) ?? [];
    if (coordinates.length > 0) warnings.push(`graphql-token-bucket: @${name} on ${named(coordinates)} is not read: ${why}`);
  }

  return {
    of: (element) => byElement.get(element) ?? NONE,
    tokenBucketName: nameOf('tokenBucket'),
    costName: nameOf('cost'),
    listSizeName: nameOf('listSize'),
    warnings: Object.freeze(warnings),
  };
}

function tokenBuckets(applications: readonly Application[], what: string): readonly BucketAnnotation[] {
  const buckets: BucketAnnotation[] = [];
  for (const { args } of applications) {
    const bucket: unknown = args['name'];
    const cost: unknown = args['cost'];
    if (typeof bucket !== 'string' || bucket === '') {
      throw new Error(`${what}: name must be a non-empty string, got ${describeValue(bucket)}`);
    }
    if (cost != null && !(typeof cost === 'number' && Number.isSafeInteger(cost) && cost >= 0)) {
      throw new Error(`${what}: cost must be a non-negative integer or omitted, got ${describeValue(cost)}`);
    }
    const fixed = cost ?? null;
    const same = buckets.find((b) => b.bucket === bucket);
    if (same !== undefined) {
      if (same.cost === fixed) continue;
      throw new Error(`${what}: bucket "${bucket}" appears twice with different costs`);
    }
    buckets.push(Object.freeze({ bucket, cost: fixed }));
  }
  return Object.freeze(buckets);
}

function weight(applications: readonly Application[], complexity: number | null, what: string): number | null {
  const weights: { value: number; form: string }[] = [];
  for (const { args, form } of applications) {
    const raw: unknown = args['weight'];
    // The IBM specification declares `weight: String!` ("2.5"), Apollo `weight: Int!`.
    const value = typeof raw === 'number' ? raw : typeof raw === 'string' && raw.trim() !== '' ? Number(raw) : Number.NaN;
    if (!Number.isFinite(value) || value < 0) throw new Error(`${what}: weight must be a finite non-negative number, got ${describeValue(raw)}`);
    weights.push({ value, form });
  }
  if (complexity !== null) weights.push({ value: complexity, form: 'extensions.complexity' });
  return one(weights, (w) => w.value, what, 'weights')?.value ?? null;
}

function listSize(applications: readonly Application[], what: string): ListSizeRule | null {
  const rules: { value: ListSizeRule; form: string }[] = [];
  for (const { args, form } of applications) {
    const assumedSize: unknown = args['assumedSize'];
    if (assumedSize != null && !(typeof assumedSize === 'number' && Number.isSafeInteger(assumedSize) && assumedSize >= 0)) {
      throw new Error(`${what}: assumedSize must be a non-negative integer, got ${describeValue(assumedSize)}`);
    }
    const requireOne: unknown = args['requireOneSlicingArgument'];
    if (requireOne != null && typeof requireOne !== 'boolean') {
      throw new Error(`${what}: requireOneSlicingArgument must be a boolean, got ${describeValue(requireOne)}`);
    }
    const value: ListSizeRule = {
      assumedSize: (assumedSize as number | null | undefined) ?? null,
      slicingArguments: stringList(args['slicingArguments'], `${what}: slicingArguments`),
      sizedFields: stringList(args['sizedFields'], `${what}: sizedFields`),
    };
    rules.push({ value, form });
  }
  return one(rules, (r) => listSizeKey(r.value), what, 'arguments')?.value ?? null;
}

/** Equal for two `@listSize`s that say the same thing (names in any order, each once). */
export function listSizeKey(rule: ListSizeRule): string {
  return JSON.stringify({ ...rule, slicingArguments: sorted(rule.slicingArguments), sizedFields: sorted(rule.sizedFields) });
}

/**
 * What an element that says nothing itself takes from the interfaces it
 * implements (`copies`, one per interface, null where one says nothing):
 * the value those that say something agree on. Interfaces that differ are
 * copies that differ, refused as copies in two forms are: no interface
 * wins by the order the type names them in.
 */
export function inherited<T>(copies: readonly { coordinate: string; value: T | null }[], key: (value: T) => string, what: string, noun: string, element: string): T | null {
  let first: { coordinate: string; value: T } | undefined;
  for (const { coordinate, value } of copies) {
    if (value === null) continue;
    if (first === undefined) first = { coordinate, value };
    else if (key(value) !== key(first.value)) {
      throw new Error(`${what}: different ${noun} on the interfaces it implements, ${first.coordinate} (${key(first.value)}) and ${coordinate} (${key(value)}); give ${element} its own`);
    }
  }
  return first === undefined ? null : first.value;
}

/** The one value several copies of an annotation give; refused when they differ. */
function one<T extends { form: string }>(copies: readonly T[], key: (copy: T) => unknown, what: string, noun: string): T | undefined {
  const first = copies[0];
  for (const copy of copies) {
    if (first !== undefined && key(copy) !== key(first)) {
      const listed = copies.map((c) => `${String(key(c))} (${c.form})`).join(', ');
      throw new Error(`${what}: given more than once with different ${noun}: ${listed}; give it once`);
    }
  }
  return first;
}

function stringList(value: unknown, what: string): readonly string[] | null {
  if (value == null) return null;
  const list = Array.isArray(value) ? (value as unknown[]) : [value];
  for (const item of list) {
    if (typeof item !== 'string' || item === '') throw new Error(`${what} must be a list of names, got ${describeValue(value)}`);
  }
  return Object.freeze([...(list as string[])]);
}

function sorted(list: readonly string[] | null): readonly string[] | null {
  return list === null ? null : [...new Set(list)].sort();
}

export function named(coordinates: readonly string[]): string {
  if (coordinates.length <= NAMED_IN_WARNING) return coordinates.join(', ');
  return `${coordinates.slice(0, NAMED_IN_WARNING).join(', ')} and ${coordinates.length - NAMED_IN_WARNING} more`;
}
