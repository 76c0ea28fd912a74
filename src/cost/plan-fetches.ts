import { Kind, isObjectType, parse } from 'graphql';
import type {
  DocumentNode,
  FieldNode,
  FragmentDefinitionNode,
  GraphQLSchema,
  OperationDefinitionNode,
  SelectionNode,
  SelectionSetNode,
} from 'graphql';
import type { FetchCounts } from './fetch-counts.js';

/** A query plan as `@apollo/query-planner` builds it: the parts read here. */
export interface QueryPlan {
  readonly node?: PlanNode;
}

/** A node of a query plan (`Sequence`, `Parallel`, `Flatten`, `Fetch`, `Condition`, `Defer`, `Subscription`). */
export interface PlanNode {
  readonly kind: string;
  readonly nodes?: readonly PlanNode[];
  /** Flatten: the response path the fetch below merges into (`"@"` for each list). */
  readonly path?: readonly (string | number)[];
  readonly node?: PlanNode;
  /** Fetch: what it sends each entity's representation of; absent for a root fetch. */
  readonly requires?: readonly unknown[];
  readonly operation?: string;
  readonly operationDocumentNode?: DocumentNode;
  readonly ifClause?: PlanNode;
  readonly elseClause?: PlanNode;
  /** Defer: `{ node }`; Subscription: the fetch that starts it. */
  readonly primary?: unknown;
  readonly deferred?: readonly { readonly node?: PlanNode }[];
  readonly rest?: PlanNode;
}

/** Any type: what a fetch that names no narrower type returns at a place. */
const EVERY_TYPE = '';

/**
 * A place of the client's response (a response path, lists flattened) and
 * the fields of the operation that answer there.
 */
class Place {
  readonly nodes: FieldNode[] = [];
  readonly selectionSets: SelectionSetNode[] = [];
  private children: Map<string, Place> | null = null;
  /** Per type a fetch is narrowed to (`EVERY_TYPE` for none): the fetches that return this place's objects. */
  fetches: Map<string, number> | null = null;

  constructor(private readonly fragments: ReadonlyMap<string, FragmentDefinitionNode>) {}

  /** The place below this one at response key `key`, or undefined when the operation selects nothing there. */
  child(key: string): Place | undefined {
    if (this.children === null) {
      this.children = new Map();
      for (const set of this.selectionSets) this.collect(set.selections, new Set());
    }
    return this.children.get(key);
  }

  /** Every field by response key, through inline fragments and fragment spreads, whatever their type conditions and directives. */
  private collect(selections: readonly SelectionNode[], spread: Set<string>): void {
    for (const selection of selections) {
      if (selection.kind === Kind.FIELD) {
        const key = selection.alias?.value ?? selection.name.value;
        let place = this.children!.get(key);
        if (place === undefined) this.children!.set(key, (place = new Place(this.fragments)));
        place.nodes.push(selection);
        if (selection.selectionSet !== undefined) place.selectionSets.push(selection.selectionSet);
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        this.collect(selection.selectionSet.selections, spread);
      } else if (!spread.has(selection.name.value)) {
        spread.add(selection.name.value);
        const fragment = this.fragments.get(selection.name.value);
        if (fragment !== undefined) this.collect(fragment.selectionSet.selections, spread);
      }
    }
  }

  /** One more fetch returns this place's objects (of type `type`, or of any). */
  fetched(type: string): void {
    this.fetches ??= new Map();
    this.fetches.set(type, (this.fetches.get(type) ?? 0) + 1);
  }
}

/**
 * The entity fetches of a query plan, counted per object of the client's
 * operation. Every fetch of the plan returns objects at places of the
 * response: a root fetch those of the fields it selects, an entity fetch
 * the entities it is sent (one per object at the place it merges into,
 * narrowed to the types it names) and those of the fields it selects below
 * them. An object the complexity counts once, `n` fetches return: it costs
 * `n − 1` more. Places the client does not select (what only a `@requires`
 * or a key needs) are the required selection's to price.
 *
 * The work is that of reading the plan once: each fetch's selection is
 * walked once, beside the places of the operation it reaches.
 */
export function planFetchCounts(plan: QueryPlan, document: DocumentNode, operation: OperationDefinitionNode, schema: GraphQLSchema): FetchCounts {
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const definition of document.definitions) if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments.set(definition.name.value, definition);
  const root = new Place(fragments);
  root.selectionSets.push(operation.selectionSet);
  const places: Place[] = [];
  const reached = (place: Place, type: string): void => {
    if (place.fetches === null) places.push(place);
    place.fetched(type);
  };

  const fetch = (node: PlanNode, at: Place | undefined): void => {
    if (at === undefined) return;
    const fetchDocument = node.operationDocumentNode ?? parse(node.operation ?? '{ __typename }', { noLocation: true });
    const own = new Map<string, FragmentDefinitionNode>();
    let selectionSet: SelectionSetNode | undefined;
    for (const definition of fetchDocument.definitions) {
      if (definition.kind === Kind.FRAGMENT_DEFINITION) own.set(definition.name.value, definition);
      else if (definition.kind === Kind.OPERATION_DEFINITION) selectionSet ??= definition.selectionSet;
    }
    if (selectionSet === undefined) return;
    // Each place once per fetch, however often the fetch's fragments spread there.
    const seen = new Set<Place>();
    const walk = (selections: readonly SelectionNode[], place: Place, spread: Set<string>): void => {
      for (const selection of selections) {
        if (selection.kind === Kind.FIELD) {
          if (selection.selectionSet === undefined) continue;
          const below = place.child(selection.alias?.value ?? selection.name.value);
          if (below === undefined) continue;
          if (!seen.has(below)) {
            seen.add(below);
            reached(below, EVERY_TYPE);
          }
          walk(selection.selectionSet.selections, below, spread);
        } else if (selection.kind === Kind.INLINE_FRAGMENT) {
          walk(selection.selectionSet.selections, place, spread);
        } else if (!spread.has(selection.name.value)) {
          const fragment = own.get(selection.name.value);
          if (fragment === undefined) continue;
          walk(fragment.selectionSet.selections, place, new Set(spread).add(selection.name.value));
        }
      }
    };
    if (node.requires === undefined) {
      walk(selectionSet.selections, at, new Set());
      return;
    }
    // An entity fetch: `_entities(representations:) { ... on T { … } }`, one entity per object at its place.
    const entities = selectionSet.selections.find((s): s is FieldNode => s.kind === Kind.FIELD && s.selectionSet !== undefined);
    if (entities?.selectionSet === undefined) return;
    const types = new Set<string>();
    for (const selection of entities.selectionSet.selections) {
      const condition = selection.kind === Kind.INLINE_FRAGMENT ? selection.typeCondition?.name.value : undefined;
      types.add(condition !== undefined && isObjectType(schema.getType(condition)) ? condition : EVERY_TYPE);
    }
    for (const type of types) reached(at, type);
    walk(entities.selectionSet.selections, at, new Set());
  };

  const visit = (node: PlanNode | undefined, at: Place | undefined): void => {
    if (node === undefined || at === undefined) return;
    switch (node.kind) {
      case 'Fetch':
        fetch(node, at);
        return;
      case 'Flatten': {
        let place: Place | undefined = at;
        for (const step of node.path ?? []) {
          // Lists (`@`) and type conditions (`... on T`) stay at the same place.
          if (typeof step !== 'string' || step === '@' || step.startsWith('...')) continue;
          place = place?.child(step);
        }
        visit(node.node, place);
        return;
      }
      case 'Condition':
        // Priced for either branch: the plan is the same whatever the variables.
        visit(node.ifClause, at);
        visit(node.elseClause, at);
        return;
      case 'Defer':
        visit((node.primary as { readonly node?: PlanNode } | undefined)?.node, at);
        for (const deferred of node.deferred ?? []) visit(deferred.node, at);
        return;
      case 'Subscription':
        visit(node.primary as PlanNode | undefined, at);
        visit(node.rest, at);
        return;
      default:
        for (const child of node.nodes ?? []) visit(child, at);
    }
  };
  visit(plan.node, root);

  const extra = new Map<FieldNode, number>();
  for (const place of places) {
    const fetches = place.fetches!;
    let narrowest = 0;
    for (const [type, count] of fetches) if (type !== EVERY_TYPE && count > narrowest) narrowest = count;
    const more = (fetches.get(EVERY_TYPE) ?? 0) + narrowest - 1;
    if (more <= 0) continue;
    // A field spread at several places takes the most of them.
    for (const node of place.nodes) extra.set(node, Math.max(extra.get(node) ?? 0, more));
  }
  return { perObject: (_parent, _field, node) => extra.get(node) ?? 0 };
}
