import type { CompositeCost, SchemaCosts } from './schema-costs.js';

/*
 * What the walks ask about types, answered once per schema (or per pair of
 * types) and kept: membership, the classes of an interface's or union's
 * possible types (schema-costs.ts: types that price the fields it declares
 * alike), and a number per field shape, so that "does this type price these
 * fields as that one does" is a comparison of numbers.
 */

/** Whether the object type `type` is `condition` or one of its possible types. */
export function within(type: CompositeCost, condition: CompositeCost): boolean {
  return type === condition || type.abstractTypes.has(condition.name);
}

const byName = new WeakMap<SchemaCosts, ReadonlyMap<string, CompositeCost>>();

/** The object, interface or union type of that name, or undefined. */
export function typeNamed(costs: SchemaCosts, name: string): CompositeCost | undefined {
  let names = byName.get(costs);
  if (names === undefined) {
    const map = new Map<string, CompositeCost>();
    for (const composite of costs.types.values()) map.set(composite.name, composite);
    byName.set(costs, (names = map));
  }
  return names.get(name);
}

const coverTables = new WeakMap<CompositeCost, Map<CompositeCost, boolean>>();

/** Whether every possible type of `inner` is one of `outer`'s: a fragment on `outer` then applies wherever `inner` does. */
export function covers(outer: CompositeCost, inner: CompositeCost): boolean {
  if (outer === inner) return true;
  if (outer.possibleTypes === null) return false;
  if (inner.possibleTypes === null) return inner.abstractTypes.has(outer.name);
  let known = coverTables.get(outer);
  if (known === undefined) coverTables.set(outer, (known = new Map()));
  let answer = known.get(inner);
  if (answer === undefined) known.set(inner, (answer = inner.possibleTypes.every((possible) => possible.abstractTypes.has(outer.name))));
  return answer;
}

const meetTables = new WeakMap<CompositeCost, Map<CompositeCost, boolean>>();

/** Whether two abstract types share a possible type. */
export function meet(a: CompositeCost, b: CompositeCost): boolean {
  if (a.possibleTypes === null) return within(a, b);
  if (b.possibleTypes === null) return within(b, a);
  let known = meetTables.get(a);
  if (known === undefined) meetTables.set(a, (known = new Map()));
  let answer = known.get(b);
  if (answer === undefined) known.set(b, (answer = a.possibleTypes.some((possible) => possible.abstractTypes.has(b.name))));
  return answer;
}

/** An abstract type's possible types grouped by class, and the class of each. */
export interface Classes {
  readonly members: readonly (readonly CompositeCost[])[];
  readonly of: ReadonlyMap<CompositeCost, number>;
}

const classTables = new WeakMap<CompositeCost, Classes>();

/** The classes of an interface's or union's possible types (one class holding the type itself for an object type). */
export function classesOf(type: CompositeCost): Classes {
  let classes = classTables.get(type);
  if (classes === undefined) {
    const members: CompositeCost[][] = [];
    const of = new Map<CompositeCost, number>();
    if (type.possibleTypes === null) {
      members.push([type]);
      of.set(type, 0);
    } else {
      type.possibleTypes.forEach((possible, i) => {
        const index = type.classes?.[i] ?? i;
        while (members.length <= index) members.push([]);
        members[index]!.push(possible);
        of.set(possible, index);
      });
    }
    classTables.set(type, (classes = { members, of }));
  }
  return classes;
}

const meetingTables = new WeakMap<CompositeCost, Map<CompositeCost, readonly (readonly number[])[]>>();

/**
 * For each class of `outer`, the classes of `inner` holding one of its
 * types: what a part on `inner` can be worth on a type of that class is the
 * most it is worth on those.
 */
export function classesMeeting(outer: CompositeCost, inner: CompositeCost): readonly (readonly number[])[] {
  let byInner = meetingTables.get(outer);
  if (byInner === undefined) meetingTables.set(outer, (byInner = new Map()));
  let table = byInner.get(inner);
  if (table === undefined) {
    const outerClasses = classesOf(outer);
    const innerClasses = classesOf(inner);
    table = outerClasses.members.map((members) => {
      const found = new Set<number>();
      for (const member of members) {
        const index = innerClasses.of.get(member);
        if (index !== undefined) found.add(index);
      }
      return [...found];
    });
    byInner.set(inner, table);
  }
  return table;
}
