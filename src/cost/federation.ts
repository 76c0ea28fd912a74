import { printSchemaWithDirectives } from '@graphql-tools/utils';
import { Kind, buildASTSchema, isInterfaceType, isObjectType, parse, valueFromASTUntyped, visit } from 'graphql';
import type { ConstDirectiveNode, DocumentNode, FieldDefinitionNode, FieldNode, GraphQLDirective, GraphQLSchema, SelectionNode, SelectionSetNode } from 'graphql';
import { importedNames, parseSpecUrl } from './cost-directives.js';
import type { RequiredSelections } from './required-selections.js';

/** The schema a federated graph is priced against, and what its `@requires` fields need fetched first. */
export interface PricingSource {
  readonly schema: GraphQLSchema;
  readonly requires?: RequiredSelections | undefined;
  /** Per field (`'Product.reviews'`), the subgraphs that resolve it, one bit each (as many bits as subgraphs): what entity fetches are priced by. */
  readonly graphs?: ReadonlyMap<string, bigint> | undefined;
}

const JOIN_SPEC = 'specs.apollo.dev/join';
const TOKEN_BUCKET = 'tokenBucket';

/**
 * A supergraph SDL (Apollo Gateway's `coreSupergraphSdl`) as the cost model
 * reads it. The API schema a gateway serves has every directive stripped;
 * the supergraph keeps `@cost` and `@listSize` under the names its `@link`
 * gives them, `@tokenBucket` wherever `@composeDirective` brought it (under
 * any URL: the directive imported as `@tokenBucket`, renamed or not), and
 * each field's `@join__field(requires:)`.
 *
 * Throws a `GraphQLError` (a syntax or schema error) for an SDL that is not
 * a supergraph graphql-js can build.
 */
export function supergraphPricing(sdl: string): PricingSource {
  let document = parse(sdl, { noLocation: true });
  const links = schemaLinks(document);
  let joinNamespace = 'join';
  let tokenBucketName: string | null = null;
  for (const link of links) {
    const spec = typeof link['url'] === 'string' ? parseSpecUrl(link['url']) : null;
    if (spec === null) continue;
    const as = typeof link['as'] === 'string' && link['as'] !== '' ? link['as'] : spec.name;
    if (spec.identity === JOIN_SPEC) joinNamespace = as;
    const imported = importedNames(link['import']).get(TOKEN_BUCKET);
    if (imported !== undefined) tokenBucketName = imported;
    else if (spec.name === TOKEN_BUCKET && tokenBucketName === null) tokenBucketName = as;
  }
  if (tokenBucketName !== null && tokenBucketName !== TOKEN_BUCKET && !declares(document, TOKEN_BUCKET)) {
    document = renameDirective(document, tokenBucketName, TOKEN_BUCKET);
  }
  const requires = joinRequires(document, `${joinNamespace}__field`);
  return { schema: buildASTSchema(document), requires, graphs: joinGraphs(document, joinNamespace) };
}

/**
 * A schema stitched from subgraphs (Hive Gateway's unified schema) as the
 * cost model reads it: the schema itself, which keeps the subgraphs'
 * directives, and from its stitching information the selection each field
 * needs besides its keys (its `@requires`) and the subgraphs that resolve
 * each field.
 */
export function stitchedPricing(schema: GraphQLSchema): PricingSource {
  const pricing = withOwnDirectiveNames(schema);
  const info = (schema.extensions as { stitchingInfo?: StitchingInfo } | undefined)?.stitchingInfo;
  const byField = info?.fieldNodesByField;
  if (info === undefined || byField === null || typeof byField !== 'object') return { schema: pricing };
  const graphs = stitchedGraphs(schema, info);
  const requires = new Map<string, readonly SelectionNode[]>();
  const merged = (info.mergedTypes ?? {}) as Record<string, MergedType | undefined>;
  for (const [type, fields] of Object.entries(byField as Record<string, unknown>)) {
    if (fields === null || typeof fields !== 'object') continue;
    // Every field of a merged type needs its keys; what it needs besides them is what it requires.
    const keys = keyFields(merged[type]);
    for (const [field, nodes] of Object.entries(fields as Record<string, unknown>)) {
      if (!Array.isArray(nodes)) continue;
      const required = (nodes as FieldNode[]).filter((node) => node.kind === Kind.FIELD && node.name.value !== '__typename' && !keys.has(node.name.value));
      if (required.length > 0) requires.set(`${type}.${field}`, required);
    }
  }
  return { schema: pricing, requires, graphs };
}

/** What graphql-tools' stitching keeps of the subgraphs (the parts read here). */
interface StitchingInfo {
  readonly fieldNodesByField?: unknown;
  readonly subschemaMap?: unknown;
  readonly mergedTypes?: unknown;
}

interface Subschema {
  readonly schema?: GraphQLSchema;
  readonly transformedSchema?: GraphQLSchema;
}

interface MergedType {
  readonly uniqueFields?: Record<string, Subschema>;
  readonly nonUniqueFields?: Record<string, readonly Subschema[]>;
  /** Per subgraph, the key the type is fetched by there. */
  readonly selectionSets?: ReadonlyMap<unknown, SelectionSetNode>;
}

/** The fields of a merged type's keys, in every subgraph. */
function keyFields(type: MergedType | undefined): Set<string> {
  const names = new Set<string>();
  const sets = type?.selectionSets;
  if (!(sets instanceof Map)) return names;
  const add = (selections: readonly SelectionNode[]): void => {
    for (const selection of selections) {
      if (selection.kind === Kind.FIELD) names.add(selection.name.value);
      else if (selection.kind === Kind.INLINE_FRAGMENT) add(selection.selectionSet.selections);
    }
  };
  for (const set of sets.values()) if (set?.kind === Kind.SELECTION_SET) add(set.selections);
  return names;
}

/**
 * Which subgraphs resolve each field of a stitched schema: the merged
 * types' own answer (a field one or several subgraphs resolve), else every
 * subgraph whose schema has the field (root fields, keys).
 */
function stitchedGraphs(schema: GraphQLSchema, info: StitchingInfo): Map<string, bigint> {
  const graphs = new Map<string, bigint>();
  const subschemas: Subschema[] = [];
  const map = info.subschemaMap;
  if (map instanceof Map) for (const value of map.values()) if (value !== null && typeof value === 'object') subschemas.push(value as Subschema);
  if (subschemas.length < 2) return graphs;
  const bitOf = new Map<Subschema, bigint>();
  subschemas.forEach((subschema, i) => bitOf.set(subschema, 1n << BigInt(i)));
  const merged = (info.mergedTypes ?? {}) as Record<string, MergedType | undefined>;
  for (const type of Object.values(schema.getTypeMap())) {
    if (!(isObjectType(type) || isInterfaceType(type)) || type.name.startsWith('__')) continue;
    const mergedType = merged[type.name];
    for (const field of Object.keys(type.getFields())) {
      let mask = 0n;
      const unique = mergedType?.uniqueFields?.[field];
      const shared = mergedType?.nonUniqueFields?.[field];
      if (unique !== undefined) mask = bitOf.get(unique) ?? 0n;
      else if (shared !== undefined) for (const subschema of shared) mask |= bitOf.get(subschema) ?? 0n;
      else {
        for (const subschema of subschemas) {
          const own = (subschema.transformedSchema ?? subschema.schema)?.getType(type.name);
          if ((isObjectType(own) || isInterfaceType(own)) && own.getFields()[field] !== undefined) mask |= bitOf.get(subschema) ?? 0n;
        }
      }
      if (mask !== 0n) graphs.set(`${type.name}.${field}`, mask);
    }
  }
  return graphs;
}

/** What tells each directive apart by its arguments, when no `@link` says which is which. */
const SHAPES: readonly { name: string; is: (directive: GraphQLDirective) => boolean }[] = [
  { name: TOKEN_BUCKET, is: (d) => d.args.length === 2 && d.args.some((a) => a.name === 'name') && d.args.some((a) => a.name === 'cost') },
  { name: 'cost', is: (d) => d.args.length === 1 && d.args[0]?.name === 'weight' },
  { name: 'listSize', is: (d) => d.args.some((a) => a.name === 'assumedSize') && d.args.some((a) => a.name === 'slicingArguments') },
];

/**
 * A stitched schema keeps the subgraphs' directives under the names they
 * imported them by (`@weight` for `@cost`) but not the `@link` that says so:
 * a directive that is the only one of its shape is read under its own name
 * (the schema rebuilt from its SDL for pricing), so a renamed import is
 * never silently left unpriced.
 */
function withOwnDirectiveNames(schema: GraphQLSchema): GraphQLSchema {
  const renames: [string, string][] = [];
  for (const { name, is } of SHAPES) {
    if (schema.getDirective(name) !== undefined) continue;
    const candidates = schema.getDirectives().filter(is);
    if (candidates.length === 1 && candidates[0] !== undefined) renames.push([candidates[0].name, name]);
  }
  if (renames.length === 0) return schema;
  let document = parse(printSchemaWithDirectives(schema), { noLocation: true });
  for (const [from, to] of renames) document = renameDirective(document, from, to);
  return buildASTSchema(document, { assumeValidSDL: true });
}

/** The arguments of every `@link` on the schema definition and its extensions. */
function schemaLinks(document: DocumentNode): Record<string, unknown>[] {
  const links: Record<string, unknown>[] = [];
  for (const definition of document.definitions) {
    if (definition.kind !== Kind.SCHEMA_DEFINITION && definition.kind !== Kind.SCHEMA_EXTENSION) continue;
    for (const directive of definition.directives ?? []) {
      if (directive.name.value === 'link') links.push(directiveArguments(directive));
    }
  }
  return links;
}

function directiveArguments(directive: ConstDirectiveNode): Record<string, unknown> {
  const args: Record<string, unknown> = {};
  for (const argument of directive.arguments ?? []) args[argument.name.value] = valueFromASTUntyped(argument.value);
  return args;
}

function declares(document: DocumentNode, name: string): boolean {
  return document.definitions.some((d) => d.kind === Kind.DIRECTIVE_DEFINITION && d.name.value === name);
}

function renameDirective(document: DocumentNode, from: string, to: string): DocumentNode {
  const renamed = (node: { name: { value: string } }) => (node.name.value === from ? { ...node, name: { ...node.name, value: to } } : undefined);
  return visit(document, { DirectiveDefinition: renamed, Directive: renamed });
}

/**
 * Which subgraphs resolve each field: its `@join__field(graph:)`s (not
 * `external`, not overridden), else every subgraph of its type's
 * `@join__type`s.
 */
function joinGraphs(document: DocumentNode, namespace: string): Map<string, bigint> {
  const bit = new Map<string, bigint>();
  for (const definition of document.definitions) {
    if (definition.kind === Kind.ENUM_TYPE_DEFINITION && definition.name.value === `${namespace}__Graph`) {
      (definition.values ?? []).forEach((value, i) => bit.set(value.name.value, 1n << BigInt(i)));
    }
  }
  const graphs = new Map<string, bigint>();
  if (bit.size === 0) return graphs;
  const graphOf = (directive: ConstDirectiveNode): bigint | null => {
    const graph = directive.arguments?.find((a) => a.name.value === 'graph')?.value;
    return graph?.kind === Kind.ENUM ? (bit.get(graph.value) ?? null) : null;
  };
  for (const definition of document.definitions) {
    if (
      definition.kind !== Kind.OBJECT_TYPE_DEFINITION &&
      definition.kind !== Kind.OBJECT_TYPE_EXTENSION &&
      definition.kind !== Kind.INTERFACE_TYPE_DEFINITION &&
      definition.kind !== Kind.INTERFACE_TYPE_EXTENSION
    ) {
      continue;
    }
    let typeGraphs = 0n;
    for (const directive of definition.directives ?? []) {
      if (directive.name.value === `${namespace}__type`) typeGraphs |= graphOf(directive) ?? 0n;
    }
    for (const field of definition.fields ?? []) {
      let fieldGraphs = 0n;
      let joined = false;
      for (const directive of field.directives ?? []) {
        if (directive.name.value !== `${namespace}__field`) continue;
        const graph = graphOf(directive);
        if (graph === null) continue;
        joined = true;
        const args = directiveArguments(directive);
        if (args['external'] === true || args['usedOverridden'] === true) continue;
        fieldGraphs |= graph;
      }
      const resolved = joined ? fieldGraphs : typeGraphs;
      if (resolved !== 0n) graphs.set(`${definition.name.value}.${field.name.value}`, resolved);
    }
  }
  return graphs;
}

/** `@join__field(requires: "weight dimensions { size }")` of every field, by coordinate (every subgraph's, together). */
function joinRequires(document: DocumentNode, joinField: string): RequiredSelections {
  const requires = new Map<string, SelectionNode[]>();
  for (const definition of document.definitions) {
    switch (definition.kind) {
      case Kind.OBJECT_TYPE_DEFINITION:
      case Kind.OBJECT_TYPE_EXTENSION:
      case Kind.INTERFACE_TYPE_DEFINITION:
      case Kind.INTERFACE_TYPE_EXTENSION:
        for (const field of definition.fields ?? []) addRequires(requires, `${definition.name.value}.${field.name.value}`, field, joinField);
        break;
      default:
    }
  }
  return requires;
}

function addRequires(requires: Map<string, SelectionNode[]>, coordinate: string, field: FieldDefinitionNode, joinField: string): void {
  for (const directive of field.directives ?? []) {
    if (directive.name.value !== joinField) continue;
    const fields = directiveArguments(directive)['requires'];
    if (typeof fields !== 'string' || fields.trim() === '') continue;
    const selections = fieldSet(fields, coordinate);
    const known = requires.get(coordinate);
    if (known === undefined) requires.set(coordinate, [...selections]);
    else known.push(...selections);
  }
}

/** A federation field set (`"a b { c }"`) as the selections of a selection set. */
function fieldSet(fields: string, coordinate: string): readonly SelectionNode[] {
  const document = parse(`{${fields}}`, { noLocation: true });
  const [operation] = document.definitions;
  if (operation?.kind !== Kind.OPERATION_DEFINITION || document.definitions.length !== 1) {
    throw new Error(`@requires on ${coordinate}: "${fields}" is not a field set`);
  }
  return operation.selectionSet.selections;
}
