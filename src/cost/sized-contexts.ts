import type { FieldCost, SizedContext, SizedEntry } from './schema-costs.js';

const shifted = new WeakMap<SizedContext, SizedContext>();
const merged = new WeakMap<SizedContext, WeakMap<SizedContext, SizedContext>>();

/**
 * The sized fields of a field's selection: those its enclosing annotation's
 * paths lead to (`"results { page }"` under `results`), and those of its
 * own `@listSize(sizedFields:)`, whose size becomes the nearest variable.
 * Contexts are built once per combination and reused, so the walk's memo
 * can key on them.
 */
export function childContext(parent: SizedContext | null, field: FieldCost): SizedContext | null {
  const path = parent === null ? null : (parent.entries.get(field.name)?.sub ?? null);
  const own = field.sized;
  if (own === null) return path;
  if (path === null) return own;
  let byPath = merged.get(own);
  if (byPath === undefined) merged.set(own, (byPath = new WeakMap()));
  let context = byPath.get(path);
  if (context === undefined) byPath.set(path, (context = union(own, shift(path))));
  return context;
}

/** The same context seen from one annotation further in: every variable one up. */
function shift(context: SizedContext): SizedContext {
  let result = shifted.get(context);
  if (result === undefined) {
    const entries = new Map<string, SizedEntry>();
    for (const [name, entry] of context.entries) {
      entries.set(name, { vars: entry.vars.map((v) => v + 1), sub: entry.sub === null ? null : shift(entry.sub) });
    }
    result = { entries };
    shifted.set(context, result);
  }
  return result;
}

/** Both contexts at once: a field both name takes the larger of their sizes. */
function union(a: SizedContext, b: SizedContext): SizedContext {
  const entries = new Map<string, SizedEntry>(a.entries);
  for (const [name, entry] of b.entries) {
    const other = entries.get(name);
    if (other === undefined) {
      entries.set(name, entry);
    } else {
      const sub = other.sub === null ? entry.sub : entry.sub === null ? other.sub : union(other.sub, entry.sub);
      entries.set(name, { vars: [...new Set([...other.vars, ...entry.vars])], sub });
    }
  }
  return { entries };
}
