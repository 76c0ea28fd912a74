import { tokenBucketDirectiveTypeDefs } from '../../src/directive.js';

/*
 * Documents that made pricing cost more than graphql-js validation of them,
 * each about 200 KB, against one schema: an interface `Node` of `TYPES`
 * object types (a union `Any` of them too), each type reachable from a field
 * of its own on `Query`, and a recursive input object for large literals.
 * Each builder takes a `salt` so that concurrent requests are distinct
 * documents (no cache shares their work).
 */

/** Possible types of `Node` and members of `Any`. */
export const HOSTILE_TYPES = 1000;

export const HOSTILE_SCHEMA = `${tokenBucketDirectiveTypeDefs}
directive @cost(weight: String!) on ARGUMENT_DEFINITION | ENUM | FIELD_DEFINITION | INPUT_FIELD_DEFINITION | OBJECT | SCALAR
directive @listSize(assumedSize: Int, slicingArguments: [String!], sizedFields: [String!], requireOneSlicingArgument: Boolean = true) on FIELD_DEFINITION
type Query @tokenBucket(name: "api") {
  node(id: ID): Node
  nodes(first: Int): [Node]
  search(first: Int): [Any]
${Array.from({ length: HOSTILE_TYPES }, (_, i) => `  t${i}: T${i}`).join('\n')}
}
input Filter { and: [Filter!] or: [Filter!] name: String value: Int }
interface Node { id: ID f(filter: Filter): Int }
union Any = ${Array.from({ length: HOSTILE_TYPES }, (_, i) => `T${i}`).join(' | ')}
${Array.from({ length: HOSTILE_TYPES }, (_, i) => `type T${i} implements Node { id: ID f(filter: Filter): Int own${i}: Int }`).join('\n')}
`;

export interface HostileDocument {
  readonly name: string;
  readonly description: string;
  readonly source: string;
}

const aliases = (count: number, salt: number, field = 'id'): string => Array.from({ length: count }, (_, i) => `a${salt}_${i}: ${field}`).join(' ');

/** A fragment of 20,000 aliased fields spread in 200 type conditions under `node(id:)`. */
export function nodeConditions(salt = 0): HostileDocument {
  const conditions = Array.from({ length: 200 }, (_, i) => `... on T${i} { ...F }`).join(' ');
  return {
    name: 'node(id:), a 20,000-field fragment in 200 type conditions',
    description: 'node(id:) { ... on T0 { ...F } … ×200 }, F on Node of 20,000 aliased ids',
    source: `{ node(id: "${salt}") { ${conditions} } }\nfragment F on Node { ${aliases(20000, salt)} }`,
  };
}

/** A fragment on the interface spread under 1,000 fields of distinct object types. */
export function distinctTypes(salt = 0): HostileDocument {
  const fields = Array.from({ length: HOSTILE_TYPES }, (_, i) => `t${i} { ...F }`).join(' ');
  return {
    name: 'a fragment on an interface under 1,000 fields of distinct types',
    description: '{ t0 { ...F } … t999 { ...F } }, F on Node of 18,000 aliased ids',
    source: `{ ${fields} }\nfragment F on Node { ${aliases(18000, salt)} }`,
  };
}

/** A union whose members each spread one shared fragment. */
export function unionMembers(salt = 0): HostileDocument {
  const members = Array.from({ length: HOSTILE_TYPES }, (_, i) => `... on T${i} { ...F }`).join(' ');
  return {
    name: 'a union whose 1,000 members each spread one fragment',
    description: 'search(first: 5) { ... on T0 { ...F } … ×1,000 }, F on Node of 17,000 aliased ids',
    source: `{ search(first: 5) { ${members} } }\nfragment F on Node { ${aliases(17000, salt)} }`,
  };
}

/** A filter literal of `depth` nested `and` lists, each holding `width` leaves beside the next level. */
function filterLiteral(depth: number, width: number, salt: number): string {
  let inner = `{ name: "x${salt}" }`;
  for (let d = 0; d < depth; d++) {
    const leaves = Array.from({ length: width }, (_, i) => `{ value: ${i} }`).join(' ');
    inner = `{ and: [${leaves} ${inner}] }`;
  }
  return inner;
}

/** One large literal argument in a fragment spread in 200 type conditions. */
export function largeLiteral(salt = 0): HostileDocument {
  const conditions = Array.from({ length: 200 }, (_, i) => `... on T${i} { ...F }`).join(' ');
  return {
    name: 'a 190 KB literal argument in a fragment under 200 type conditions',
    description: 'node { ... on T0 { ...F } … ×200 }, F on Node { f(filter: <190 KB literal>) }',
    source: `{ node(id: "${salt}") { ${conditions} } }\nfragment F on Node { f(filter: ${filterLiteral(50, 300, salt)}) }`,
  };
}

export const HOSTILE_SHAPES: readonly ((salt?: number) => HostileDocument)[] = [nodeConditions, distinctTypes, unionMembers, largeLiteral];
