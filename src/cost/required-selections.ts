import { Kind } from 'graphql';
import type { GraphQLNamedType, SelectionNode } from 'graphql';
import { EntityFetches } from './entity-fetches.js';
import type { FederationModel } from './entity-fetches.js';
import type { CompositeCost, FieldCost } from './schema-costs.js';
import { sat } from './selections.js';
import { sizeOf } from './sizes.js';

/**
 * Federation's `@requires`: per field (`'Product.shippingEstimate'`), the
 * selection on its parent type that the gateway fetches from other
 * subgraphs before that field's resolver can run.
 */
export type RequiredSelections = ReadonlyMap<string, readonly SelectionNode[]>;

/** A field whose weight grows by what its required selection costs. */
export interface RequiringField {
  readonly owner: GraphQLNamedType;
  readonly cost: FieldCost;
}

/**
 * What each required selection costs, priced statically as the gateway
 * sends it (no variables: every list at its schema default, assumed or
 * default size; an abstract type at its most expensive possible type). A
 * required field that itself requires more pays for that too; a cycle
 * counts each field's own weight once.
 */
export function requiredSelectionCosts(
  types: ReadonlyMap<GraphQLNamedType, CompositeCost>,
  requires: RequiredSelections,
  defaultListSize: number,
  federation: FederationModel = { types: new Map(), roots: new Set() },
): Map<RequiringField, number> {
  const byName = new Map<string, CompositeCost>();
  for (const composite of types.values()) byName.set(composite.name, composite);
  const extras = new Map<string, number>();
  // A field set has no fragments and no variables.
  const fetches = new EntityFetches(federation, new Map(), {});
  const pending = new Set<string>();

  const extraOf = (coordinate: string): number => {
    const known = extras.get(coordinate);
    if (known !== undefined) return known;
    const selections = requires.get(coordinate);
    const owner = byName.get(coordinate.slice(0, coordinate.indexOf('.')));
    if (selections === undefined || owner === undefined || pending.has(coordinate)) return 0;
    pending.add(coordinate);
    const extra = costOn(owner, selections);
    pending.delete(coordinate);
    extras.set(coordinate, extra);
    return extra;
  };

  const costOn = (on: CompositeCost, selections: readonly SelectionNode[]): number => {
    if (on.fields === null) {
      let most = 0;
      for (const possible of on.possibleTypes ?? []) most = Math.max(most, costOn(possible, selections));
      return most;
    }
    let total = 0;
    for (const selection of selections) {
      if (selection.kind === Kind.INLINE_FRAGMENT) {
        const condition = selection.typeCondition?.name.value;
        if (condition === undefined || condition === on.name || on.abstractTypes.has(condition)) {
          total = sat(total + costOn(on, selection.selectionSet.selections));
        }
        continue;
      }
      if (selection.kind !== Kind.FIELD) continue; // a field set has no named fragments
      const field = on.fields.get(selection.name.value);
      if (field === undefined) continue;
      const count = field.isList ? sat(listSize(field, defaultListSize) * field.innerCount) : 1;
      let below = 0;
      if (selection.selectionSet !== undefined && field.target !== null) {
        below = sat(costOn(field.target, selection.selectionSet.selections) + fetches.perObject(on, field, selection, [selection.selectionSet]));
      }
      const weight = field.weight + extraOf(`${on.name}.${field.name}`);
      total = sat(total + sat(count * (weight + below)));
    }
    return total;
  };

  const result = new Map<RequiringField, number>();
  for (const coordinate of requires.keys()) {
    const dot = coordinate.indexOf('.');
    const owner = byName.get(coordinate.slice(0, dot));
    const cost = owner?.fields?.get(coordinate.slice(dot + 1));
    if (owner === undefined || cost === undefined) continue;
    const extra = extraOf(coordinate);
    if (extra > 0) result.set({ owner: owner.type, cost }, extra);
  }
  return result;
}

/** A list's size with no arguments given: its slicing arguments' defaults, else its assumed size, else the default. */
function listSize(field: FieldCost, defaultListSize: number): number {
  let size = -1;
  for (const { argument, path } of field.slicing) {
    let value: unknown = argument.defaultValue;
    for (const key of path) value = value !== null && typeof value === 'object' ? (value as Record<string, unknown>)[key] : undefined;
    const read = sizeOf(value);
    if (read >= 0 && read > size) size = read;
  }
  return size >= 0 ? size : (field.assumedSize ?? defaultListSize);
}
