import { Kind, isAbstractType, isInterfaceType, isObjectType } from 'graphql';
import type { FieldNode, GraphQLSchema, SelectionNode, SelectionSetNode } from 'graphql';
import type { FederatedType, FederationModel } from './entity-fetches.js';
import type { RequiredSelections } from './required-selections.js';

/** What graphql-tools' stitching keeps of the subgraphs (the parts read here). */
export interface StitchingInfo {
  readonly fieldNodesByField?: unknown;
  readonly subschemaMap?: unknown;
  readonly mergedTypes?: unknown;
}

interface Subschema {
  readonly name?: unknown;
  readonly schema?: GraphQLSchema;
  readonly transformedSchema?: GraphQLSchema;
  /** Per type, per field: `override`, a function where a progressive override's label decides. */
  readonly merge?: Record<string, { fields?: Record<string, { override?: unknown } | undefined> } | undefined>;
}

interface MergedType {
  readonly uniqueFields?: Record<string, Subschema>;
  readonly nonUniqueFields?: Record<string, readonly Subschema[]>;
  /** Per subgraph, the key the type is fetched by there. */
  readonly selectionSets?: ReadonlyMap<unknown, SelectionSetNode>;
}

/** What a stitched schema's stitching information says about where each part of the graph is served. */
export interface StitchedParts {
  readonly graphs: Map<string, bigint>;
  readonly requires: RequiredSelections;
  readonly model: FederationModel;
}

/**
 * Reads graphql-tools' stitching information (Hive Gateway's unified
 * schema): which subgraphs serve each field (the merged types' own answer —
 * a field one or several subgraphs resolve — else every subgraph whose
 * schema has it), the key each subgraph fetches a merged type by, the
 * selection each field needs besides its keys (its `@requires`), the
 * interfaces a subgraph holds without their types (`@interfaceObject`), and
 * the fields a progressive override decides.
 */
export function readStitchingInfo(schema: GraphQLSchema, info: StitchingInfo): StitchedParts {
  const subschemas: Subschema[] = [];
  const map = info.subschemaMap;
  if (map instanceof Map) for (const value of map.values()) if (value !== null && typeof value === 'object') subschemas.push(value as Subschema);
  const bits = new Map<Subschema, bigint>();
  const byName = new Map<string, bigint>();
  subschemas.forEach((subschema, i) => {
    bits.set(subschema, 1n << BigInt(i));
    if (typeof subschema.name === 'string') byName.set(subschema.name, 1n << BigInt(i));
  });
  // A subgraph's other keys are subschemas of their own, outside the map, under the subgraph's name.
  const bitOf = (subschema: Subschema | undefined): bigint | undefined =>
    subschema === undefined ? undefined : (bits.get(subschema) ?? (typeof subschema.name === 'string' ? byName.get(subschema.name) : undefined));
  const merged = (info.mergedTypes ?? {}) as Record<string, MergedType | undefined>;
  const graphs = new Map<string, bigint>();
  const types = new Map<string, FederatedType>();
  const roots = new Set<string>();
  for (const root of [schema.getQueryType(), schema.getMutationType(), schema.getSubscriptionType()]) if (root) roots.add(root.name);

  for (const type of Object.values(schema.getTypeMap())) {
    if (!(isObjectType(type) || isInterfaceType(type)) || type.name.startsWith('__')) continue;
    const mergedType = merged[type.name];
    let typeGraphs = 0n;
    let interfaceObjects = 0n;
    const labelled = new Map<string, bigint>();
    for (const subschema of subschemas) {
      const own = ownSchema(subschema)?.getType(type.name);
      if (!(isObjectType(own) || isInterfaceType(own))) continue;
      const graph = bitOf(subschema) ?? 0n;
      typeGraphs |= graph;
      // An interface a subgraph holds as an object, or without any of its types: it cannot tell an object's type.
      if (isAbstractType(type) && (isObjectType(own) || ownSchema(subschema)?.getPossibleTypes(own).length === 0)) interfaceObjects |= graph;
      for (const [field, config] of Object.entries(subschema.merge?.[type.name]?.fields ?? {})) {
        if (typeof config?.override === 'function') labelled.set(field, (labelled.get(field) ?? 0n) | graph);
      }
    }
    const fields = new Map<string, bigint>();
    const keys = keyFields(mergedType);
    if (subschemas.length >= 2) {
      for (const field of Object.keys(type.getFields())) {
        let mask = 0n;
        const unique = mergedType?.uniqueFields?.[field];
        const shared = mergedType?.nonUniqueFields?.[field];
        if (unique !== undefined) mask = bitOf(unique) ?? 0n;
        else if (shared !== undefined) for (const subschema of shared) mask |= bitOf(subschema) ?? 0n;
        if ((unique === undefined && shared === undefined) || keys.has(field)) {
          // A key field (which the merged type may say only one subgraph serves) is had wherever the type has it.
          for (const subschema of subschemas) {
            const own = ownSchema(subschema)?.getType(type.name);
            if ((isObjectType(own) || isInterfaceType(own)) && own.getFields()[field] !== undefined) mask |= bitOf(subschema) ?? 0n;
          }
        }
        if (mask !== 0n) {
          graphs.set(`${type.name}.${field}`, mask);
          fields.set(field, mask);
        }
      }
    }
    const keysByGraph = new Map<bigint, (readonly string[])[]>();
    if (mergedType?.selectionSets instanceof Map) {
      for (const [subschema, selectionSet] of mergedType.selectionSets) {
        const graph = bitOf(subschema as Subschema);
        if (graph === undefined || selectionSet?.kind !== Kind.SELECTION_SET) continue;
        let list = keysByGraph.get(graph);
        if (list === undefined) keysByGraph.set(graph, (list = []));
        list.push(topLevelNames(selectionSet.selections));
      }
    }
    types.set(type.name, { graphs: typeGraphs, fields, keys: keysByGraph, interfaceObjects, labelled });
  }
  // Fields an object type has through an interface some subgraph holds as an object: served there.
  for (const type of Object.values(schema.getTypeMap())) {
    if (!isObjectType(type) || type.name.startsWith('__')) continue;
    const own = types.get(type.name);
    if (own === undefined) continue;
    for (const field of Object.keys(type.getFields())) {
      if (own.fields.has(field)) continue;
      let served = 0n;
      for (const iface of type.getInterfaces()) {
        const from = types.get(iface.name);
        const graphs = from?.fields.get(field) ?? 0n;
        served |= graphs & (from?.interfaceObjects ?? 0n);
      }
      if (served === 0n) continue;
      graphs.set(`${type.name}.${field}`, served);
      (own.fields as Map<string, bigint>).set(field, served);
    }
  }
  return { graphs: subschemas.length >= 2 ? graphs : new Map(), requires: stitchedRequires(info, merged), model: { types, roots } };
}

function ownSchema(subschema: Subschema): GraphQLSchema | undefined {
  return subschema.transformedSchema ?? subschema.schema;
}

/** Every field of a merged type needs its keys; what it needs besides them is what it requires. */
function stitchedRequires(info: StitchingInfo, merged: Record<string, MergedType | undefined>): RequiredSelections {
  const requires = new Map<string, readonly SelectionNode[]>();
  const byField = info.fieldNodesByField;
  if (byField === null || typeof byField !== 'object') return requires;
  for (const [type, fields] of Object.entries(byField as Record<string, unknown>)) {
    if (fields === null || typeof fields !== 'object') continue;
    const keys = keyFields(merged[type]);
    for (const [field, nodes] of Object.entries(fields as Record<string, unknown>)) {
      if (!Array.isArray(nodes)) continue;
      const required = (nodes as FieldNode[]).filter((node) => node.kind === Kind.FIELD && node.name.value !== '__typename' && !keys.has(node.name.value));
      if (required.length > 0) requires.set(`${type}.${field}`, required);
    }
  }
  return requires;
}

/** The fields of a merged type's keys, in every subgraph. */
function keyFields(type: MergedType | undefined): Set<string> {
  const names = new Set<string>();
  const sets = type?.selectionSets;
  if (!(sets instanceof Map)) return names;
  for (const set of sets.values()) if (set?.kind === Kind.SELECTION_SET) for (const name of topLevelNames(set.selections)) names.add(name);
  return names;
}

function topLevelNames(selections: readonly SelectionNode[], into: string[] = []): string[] {
  for (const selection of selections) {
    if (selection.kind === Kind.FIELD) into.push(selection.name.value);
    else if (selection.kind === Kind.INLINE_FRAGMENT) topLevelNames(selection.selectionSet.selections, into);
  }
  return into;
}
