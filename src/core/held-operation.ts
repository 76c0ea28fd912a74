import type { DocumentNode } from 'graphql';

/*
 * What runs is what was priced, against later plugins too.
 *
 * Invariant: the executor receives the very document, operation name and
 * variables the limiter priced — the document deep-frozen, the variables a
 * deep-frozen copy, both held on the objects the server hands to its
 * executor by read-only properties whose setter refuses the operation — so no
 * code that runs after pricing can make the executor run anything else, in
 * place or by replacing it.
 *
 * A change made in place throws a TypeError in strict-mode code (ES modules,
 * classes) and does nothing in sloppy-mode code; a replacement reaches the
 * adapter's `refuse`, which logs it and fails the operation (or, where a
 * throw would end more than the operation, leaves the value priced in
 * place). Either way what
 * executes is what was charged; a plugin that means to change the operation
 * must run before the limiter prices it.
 */

/** Documents frozen here: each is walked once, however many requests reuse it (servers cache parsed documents). */
const frozenDocuments = new WeakSet<object>();
/** Copies `frozenVariables` returned: handing one in again returns it as it is. */
const frozenCopies = new WeakSet<object>();

/**
 * Freezes every node of `document` (its `loc` tokens aside, which execution
 * never reads), so that no code can rewrite what was priced in place.
 * Iterative: documents nest as deep as graphql-js's parser allows.
 */
export function freezeDocument(document: DocumentNode): DocumentNode {
  if (frozenDocuments.has(document)) return document;
  const seen = new Set<object>();
  const pending: object[] = [document];
  for (let node = pending.pop(); node !== undefined; node = pending.pop()) {
    if (seen.has(node)) continue;
    seen.add(node);
    for (const key of Object.keys(node)) {
      if (key === 'loc') continue;
      const child: unknown = (node as Record<string, unknown>)[key];
      if (typeof child === 'object' && child !== null) pending.push(child);
    }
    Object.freeze(node);
  }
  frozenDocuments.add(document);
  return document;
}

/**
 * A deep-frozen copy of a request's variables: arrays and plain objects are
 * copied (own keys as they are, `__proto__` included), anything else — an
 * uploaded file, a class instance — is kept as it is. `null` and `undefined`
 * pass through. Iterative, and each object copied once (a shared or cyclic
 * value keeps its shape).
 */
export function frozenVariables<T>(variables: T): T {
  if (!copyable(variables) || frozenCopies.has(variables)) return variables;
  const copies = new Map<object, object>();
  const pending: [object, object][] = [];
  const copyOf = (value: object): object => {
    let copy = copies.get(value);
    if (copy === undefined) {
      copy = Array.isArray(value) ? new Array<unknown>(value.length) : (Object.create(Object.getPrototypeOf(value) as object | null) as object);
      copies.set(value, copy);
      pending.push([value, copy]);
    }
    return copy;
  };
  const root = copyOf(variables);
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [source, copy] = next;
    for (const key of Object.keys(source)) {
      const value: unknown = (source as Record<string, unknown>)[key];
      const held = copyable(value) ? copyOf(value) : value;
      // defineProperty keeps a `__proto__` key a key, where assignment would set the prototype (and is several times slower).
      if (key === '__proto__') Object.defineProperty(copy, key, { value: held, enumerable: true, writable: true, configurable: true });
      else (copy as Record<string, unknown>)[key] = held;
    }
  }
  for (const copy of copies.values()) Object.freeze(copy);
  frozenCopies.add(root);
  return root as T;
}

/** Arrays and plain objects, as JSON makes them. */
function copyable(value: unknown): value is object {
  if (typeof value !== 'object' || value === null) return false;
  if (Array.isArray(value)) return true;
  const prototype: unknown = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

/** Properties held on each object, so that a second limiter on the same request holds them once. */
const heldProperties = new WeakMap<object, Set<string>>();

/**
 * Makes each of `values` a read-only property of `target`: reading gives the
 * value priced; assigning the same value does nothing; assigning another
 * calls `refuse` with the property's name, which throws (the operation
 * fails) or returns (the value priced stays), and the property cannot be
 * deleted or redefined.
 */
export function holdProperties(target: object, values: Readonly<Record<string, unknown>>, refuse: (name: string) => void): void {
  let held = heldProperties.get(target);
  if (held === undefined) heldProperties.set(target, (held = new Set()));
  for (const [name, value] of Object.entries(values)) {
    if (held.has(name)) continue;
    held.add(name);
    Object.defineProperty(target, name, {
      enumerable: true,
      configurable: false,
      get: () => value,
      set: (next: unknown) => {
        if (next !== value) refuse(name);
      },
    });
  }
}

/**
 * The logger's line for a change made after pricing: by default the
 * operation is refused and the change belongs in a plugin listed earlier;
 * `outcome` and `advice` say otherwise.
 */
export function changedAfterPricing(
  what: string,
  owner: string,
  outcome = 'so the operation is refused',
  advice = `A plugin that changes the operation must run before ${owner} (earlier in the plugins list, or in an earlier hook).`,
): string {
  return `graphql-token-bucket: ${what} was changed after ${owner} priced it, ${outcome}: what runs must be what was charged. ${advice}`;
}
