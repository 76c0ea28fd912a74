import { Kind, parse, valueFromASTUntyped } from 'graphql';
import type { ConstDirectiveNode, DocumentNode, FieldDefinitionNode, SelectionNode } from 'graphql';
import type { FederatedType, FederationModel } from './entity-fetches.js';
import type { RequiredSelections } from './required-selections.js';

/** What a supergraph's `@join__*` directives say about where each part of the graph is served. */
export interface JoinDirectives {
  /** Per field (`'Product.reviews'`), the subgraphs that serve it, one bit each. */
  readonly graphs: Map<string, bigint>;
  /** Per field with `@requires`, what it requires (every subgraph's, together). */
  readonly requires: RequiredSelections;
  readonly model: FederationModel;
  /** The labels of the progressive overrides (`@join__field(overrideLabel:)`). */
  readonly labels: ReadonlySet<string>;
}

type TypeDefinition = Extract<DocumentNode['definitions'][number], { kind: typeof Kind.OBJECT_TYPE_DEFINITION | typeof Kind.OBJECT_TYPE_EXTENSION | typeof Kind.INTERFACE_TYPE_DEFINITION | typeof Kind.INTERFACE_TYPE_EXTENSION }>;

function isTypeDefinition(definition: DocumentNode['definitions'][number]): definition is TypeDefinition {
  return (
    definition.kind === Kind.OBJECT_TYPE_DEFINITION ||
    definition.kind === Kind.OBJECT_TYPE_EXTENSION ||
    definition.kind === Kind.INTERFACE_TYPE_DEFINITION ||
    definition.kind === Kind.INTERFACE_TYPE_EXTENSION
  );
}

interface TypeBuilder {
  graphs: bigint;
  fields: Map<string, bigint>;
  keys: Map<bigint, string[][]>;
  interfaceObjects: bigint;
  labelled: Map<string, bigint>;
}

/**
 * Reads a supergraph's `@join__type(graph:, key:, resolvable:,
 * isInterfaceObject:)` and `@join__field(graph:, requires:, external:,
 * usedOverridden:, overrideLabel:)` under the namespace its `@link` gives
 * the join spec. A field without `@join__field` is served by every subgraph
 * of its type.
 */
export function readJoinDirectives(document: DocumentNode, namespace: string): JoinDirectives {
  const bit = new Map<string, bigint>();
  for (const definition of document.definitions) {
    if (definition.kind === Kind.ENUM_TYPE_DEFINITION && definition.name.value === `${namespace}__Graph`) {
      (definition.values ?? []).forEach((value, i) => bit.set(value.name.value, 1n << BigInt(i)));
    }
  }
  const graphOf = (directive: ConstDirectiveNode): bigint | null => {
    const graph = directive.arguments?.find((a) => a.name.value === 'graph')?.value;
    return graph?.kind === Kind.ENUM ? (bit.get(graph.value) ?? null) : null;
  };
  const joinType = `${namespace}__type`;
  const joinField = `${namespace}__field`;
  const graphs = new Map<string, bigint>();
  const requires = new Map<string, SelectionNode[]>();
  const builders = new Map<string, TypeBuilder>();
  const labels = new Set<string>();
  const roots = rootTypes(document);

  for (const definition of document.definitions) {
    if (!isTypeDefinition(definition)) continue;
    const name = definition.name.value;
    let type = builders.get(name);
    if (type === undefined) builders.set(name, (type = { graphs: 0n, fields: new Map(), keys: new Map(), interfaceObjects: 0n, labelled: new Map() }));
    for (const directive of definition.directives ?? []) {
      if (directive.name.value !== joinType) continue;
      const graph = graphOf(directive);
      if (graph === null) continue;
      type.graphs |= graph;
      const args = directiveArguments(directive);
      if (args['isInterfaceObject'] === true) type.interfaceObjects |= graph;
      if (typeof args['key'] === 'string' && args['resolvable'] !== false) {
        let keys = type.keys.get(graph);
        if (keys === undefined) type.keys.set(graph, (keys = []));
        keys.push(topLevelFields(args['key'], name));
      }
    }
  }

  // Fields an object type has through an interface some subgraph holds as an object (`@join__field` naming no graph).
  const inherited: [TypeDefinition, string][] = [];
  if (bit.size > 0) {
    for (const definition of document.definitions) {
      if (!isTypeDefinition(definition)) continue;
      const type = builders.get(definition.name.value)!;
      for (const field of definition.fields ?? []) {
        const coordinate = `${definition.name.value}.${field.name.value}`;
        let served = 0n;
        let joined = false;
        for (const directive of field.directives ?? []) {
          if (directive.name.value !== joinField) continue;
          const graph = graphOf(directive);
          if (graph === null) {
            if ((directive.arguments ?? []).length === 0) inherited.push([definition, field.name.value]);
            continue;
          }
          joined = true;
          const args = directiveArguments(directive);
          if (typeof args['overrideLabel'] === 'string') {
            labels.add(args['overrideLabel']);
            type.labelled.set(field.name.value, (type.labelled.get(field.name.value) ?? 0n) | graph);
          }
          if (args['external'] === true || args['usedOverridden'] === true) continue;
          served |= graph;
        }
        const resolved = joined ? served : type.graphs;
        if (resolved !== 0n) {
          graphs.set(coordinate, resolved);
          type.fields.set(field.name.value, resolved);
        }
      }
    }
  }
  for (const [definition, field] of inherited) {
    // Served where the interface is held as an object.
    let served = 0n;
    for (const named of definition.interfaces ?? []) {
      const from = builders.get(named.name.value);
      const graphs = from?.fields.get(field) ?? 0n;
      served |= (graphs & (from?.interfaceObjects ?? 0n)) || graphs;
    }
    if (served === 0n) continue;
    graphs.set(`${definition.name.value}.${field}`, served);
    builders.get(definition.name.value)!.fields.set(field, served);
  }
  for (const definition of document.definitions) {
    if (!isTypeDefinition(definition)) continue;
    for (const field of definition.fields ?? []) addRequires(requires, `${definition.name.value}.${field.name.value}`, field, joinField);
  }
  const types = new Map<string, FederatedType>();
  for (const [name, type] of builders) types.set(name, type);
  return { graphs, requires, model: { types, roots }, labels };
}

/** The root operation types' names: the schema definition's, else the default names. */
function rootTypes(document: DocumentNode): Set<string> {
  const roots = new Set<string>();
  for (const definition of document.definitions) {
    if (definition.kind === Kind.SCHEMA_DEFINITION || definition.kind === Kind.SCHEMA_EXTENSION) {
      for (const operation of definition.operationTypes ?? []) roots.add(operation.type.name.value);
    }
  }
  if (roots.size === 0) for (const name of ['Query', 'Mutation', 'Subscription']) roots.add(name);
  return roots;
}

export function directiveArguments(directive: ConstDirectiveNode): Record<string, unknown> {
  const args: Record<string, unknown> = {};
  for (const argument of directive.arguments ?? []) args[argument.name.value] = valueFromASTUntyped(argument.value);
  return args;
}

function addRequires(requires: Map<string, SelectionNode[]>, coordinate: string, field: FieldDefinitionNode, joinField: string): void {
  for (const directive of field.directives ?? []) {
    if (directive.name.value !== joinField) continue;
    const fields = directiveArguments(directive)['requires'];
    if (typeof fields !== 'string' || fields.trim() === '') continue;
    const selections = fieldSet(fields, `@requires on ${coordinate}`);
    const known = requires.get(coordinate);
    if (known === undefined) requires.set(coordinate, [...selections]);
    else known.push(...selections);
  }
}

/** The top-level field names of a key (`"id org { id }"` → id, org). */
function topLevelFields(fields: string, type: string): string[] {
  const names: string[] = [];
  const add = (selections: readonly SelectionNode[]): void => {
    for (const selection of selections) {
      if (selection.kind === Kind.FIELD) names.push(selection.name.value);
      else if (selection.kind === Kind.INLINE_FRAGMENT) add(selection.selectionSet.selections);
    }
  };
  add(fieldSet(fields, `@key on ${type}`));
  return names;
}

/** A federation field set (`"a b { c }"`) as the selections of a selection set. */
export function fieldSet(fields: string, where: string): readonly SelectionNode[] {
  const document = parse(`{${fields}}`, { noLocation: true });
  const [operation] = document.definitions;
  if (operation?.kind !== Kind.OPERATION_DEFINITION || document.definitions.length !== 1) {
    throw new Error(`${where}: "${fields}" is not a field set`);
  }
  return operation.selectionSet.selections;
}
