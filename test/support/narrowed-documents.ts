import { tokenBucketDirectiveTypeDefs } from '../../src/directive.js';

/*
 * A schema whose interface field each implementation narrows to its own
 * type (`child: Node` on `Node`, `child: T7` on `T7`, as Relay connections
 * narrow `edges`), each type with a `@cost` of its own: a selection set under
 * `child` in a fragment on `Node` is collected again on each of the
 * `NARROWED_TYPES` types, which is what grows with the schema rather than the
 * document; and `f` weighs on each type what the type does, so each type is
 * a class of its own wherever `f` is selected. Documents take a `salt` so that each is distinct (no cache
 * shares their work).
 */

export const NARROWED_TYPES = 1000;

export const NARROWED_SCHEMA = `${tokenBucketDirectiveTypeDefs}
directive @cost(weight: String!) on ARGUMENT_DEFINITION | ENUM | FIELD_DEFINITION | INPUT_FIELD_DEFINITION | OBJECT | SCALAR
type Query @tokenBucket(name: "api") { nodes(first: Int): [Node] }
interface Node { id: ID child: Node f: Int }
${Array.from({ length: NARROWED_TYPES }, (_, i) => `type T${i} implements Node @cost(weight: "${i + 1}") { id: ID child: T${i} f: Int @cost(weight: "${i + 1}") }`).join('\n')}
`;

/** `{ nodes(first: 5) { ...F } }` with F on Node of `keys` aliased `child` fields, each with a sub-selection of its own. */
export function narrowedChildren(keys: number, salt = 0): string {
  const fields = Array.from({ length: keys }, (_, i) => `a${salt}_${i}: child { id b${i}: id }`).join(' ');
  return `{ nodes(first: 5) { ...F } }\nfragment F on Node { ${fields} }`;
}

/** `{ nodes(first: 1) { ...F } }` with F on Node of `keys` aliases of `f`: alike on every type but for the weight. */
export function narrowedAliases(keys: number, salt = 0): string {
  return `{ nodes(first: 1) { ...F } }\nfragment F on Node { ${Array.from({ length: keys }, (_, i) => `a${salt}_${i}: f`).join(' ')} }`;
}

/** Resolvers serving T0 objects whose child is themselves. */
export const narrowedResolvers = {
  Query: { nodes: (_: unknown, { first }: { first: number }) => Array.from({ length: first }, (_v, i) => ({ id: String(i), f: 1 })) },
  Node: { __resolveType: () => 'T0' },
  T0: { child: (parent: unknown) => parent },
};
