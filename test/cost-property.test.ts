import fc from 'fast-check';
import { Kind, buildSchema, execute, getNamedType, getOperationAST, getVariableValues, isAbstractType, isCompositeType, isObjectType, parse, print, validate } from 'graphql';
import type { DocumentNode, FieldNode, FragmentDefinitionNode, GraphQLFieldResolver, GraphQLObjectType, GraphQLSchema, OperationDefinitionNode } from 'graphql';
import { collectFields, collectSubfields } from 'graphql/execution/collectFields.js';
import { describe, expect, it } from 'vitest';
import { CostModel } from '../src/cost/cost-model.js';
import { tokenBucketDirectiveTypeDefs } from '../src/directive.js';
import { IBM_COST_DIRECTIVES } from './support/graphql.js';

/** What a list without a usable size returns, and what the model assumes. */
const ASSUMED = 3;
const MAX_DEPTH = 4;

const schema = buildSchema(`
  ${tokenBucketDirectiveTypeDefs}

  type Query {
    items(first: Int): [Item] @tokenBucket(name: "items", cost: 1)
    item: Item @tokenBucket(name: "item", cost: 2)
    node: Node @tokenBucket(name: "node", cost: 1)
    things(last: Int): [Thing] @tokenBucket(name: "things", cost: 3)
  }

  interface Node {
    id: ID!
    items(first: Int = 2): [Item]
  }

  type Item implements Node {
    id: ID!
    name: String @tokenBucket(name: "name", cost: 1)
    items(first: Int = 2): [Item] @tokenBucket(name: "items", cost: 1)
    child: Item @tokenBucket(name: "item", cost: 2)
    things(last: Int): [Thing] @tokenBucket(name: "things", cost: 3)
  }

  type Other implements Node {
    id: ID!
    items(first: Int = 2): [Item] @tokenBucket(name: "items", cost: 1)
    value: Int @tokenBucket(name: "value", cost: 1)
  }

  union Thing = Item | Other
`);

/** The fixed costs written above, restated so the test does not trust the model's reading of them. */
const FIXED_COSTS: Record<string, [bucket: string, cost: number]> = {
  'Query.items': ['items', 1],
  'Query.item': ['item', 2],
  'Query.node': ['node', 1],
  'Query.things': ['things', 3],
  'Item.name': ['name', 1],
  'Item.items': ['items', 1],
  'Item.child': ['item', 2],
  'Item.things': ['things', 3],
  'Other.items': ['items', 1],
  'Other.value': ['value', 1],
};

/** Resolvers return exactly as many items as the size argument asks for. */
function sized(size: unknown): number {
  return typeof size === 'number' && size >= 0 ? size : ASSUMED;
}
const item = (i: number) => ({ __typename: 'Item', id: `i${i}` });
const other = (i: number) => ({ __typename: 'Other', id: `o${i}` });
const RESOLVERS: Record<string, GraphQLFieldResolver<unknown, unknown, Record<string, unknown>>> = {
  'Query.items': (_, args) => Array.from({ length: sized(args['first']) }, (_v, i) => item(i)),
  'Query.item': () => item(0),
  'Query.node': () => other(0),
  'Query.things': (_, args) => Array.from({ length: sized(args['last']) }, (_v, i) => (i % 2 === 0 ? item(i) : other(i))),
  'Item.name': () => 'name',
  'Item.items': (_, args) => Array.from({ length: sized(args['first']) }, (_v, i) => item(i)),
  'Item.child': () => item(0),
  'Item.things': (_, args) => Array.from({ length: sized(args['last']) }, (_v, i) => (i % 2 === 0 ? other(i) : item(i))),
  'Other.items': (_, args) => Array.from({ length: sized(args['first']) }, (_v, i) => item(i)),
  'Other.value': () => 1,
};

let spent = new Map<string, number>();
for (const type of Object.values(schema.getTypeMap())) {
  if (!isObjectType(type) || type.name.startsWith('__')) continue;
  for (const field of Object.values(type.getFields())) {
    const coordinate = `${type.name}.${field.name}`;
    const resolve = RESOLVERS[coordinate];
    const fixed = FIXED_COSTS[coordinate];
    if (resolve === undefined) continue;
    field.resolve = (source, args, context, info) => {
      if (fixed !== undefined) spent.set(fixed[0], (spent.get(fixed[0]) ?? 0) + fixed[1]);
      return resolve(source, args, context, info);
    };
  }
}

type Parent = 'Query' | 'Item' | 'Other' | 'Node' | 'Thing';
interface FieldSpec {
  name: string;
  type: Parent | null;
  size?: 'first' | 'last';
}
const FIELDS: Record<Parent, FieldSpec[]> = {
  Query: [
    { name: 'items', type: 'Item', size: 'first' },
    { name: 'item', type: 'Item' },
    { name: 'node', type: 'Node' },
    { name: 'things', type: 'Thing', size: 'last' },
  ],
  Item: [
    { name: 'id', type: null },
    { name: 'name', type: null },
    { name: 'items', type: 'Item', size: 'first' },
    { name: 'child', type: 'Item' },
    { name: 'things', type: 'Thing', size: 'last' },
  ],
  Other: [
    { name: 'id', type: null },
    { name: 'items', type: 'Item', size: 'first' },
    { name: 'value', type: null },
  ],
  Node: [
    { name: 'id', type: null },
    { name: 'items', type: 'Item', size: 'first' },
  ],
  Thing: [],
};
const CONDITIONS: Record<Parent, (Parent | null)[]> = {
  Query: [null, 'Query'],
  Item: [null, 'Item', 'Node', 'Thing'],
  Other: [null, 'Other', 'Node', 'Thing'],
  Node: [null, 'Node', 'Item', 'Other'],
  Thing: [null, 'Thing', 'Item', 'Other', 'Node'],
};

interface RandomOperation {
  query: string;
  variables: Record<string, unknown>;
}

/**
 * A random valid operation: every field with arguments gets a unique alias so
 * merged fields never conflict; fragments on Item are defined up front and
 * spread wherever an Item can appear.
 */
const operations = fc.gen().map((g): RandomOperation => {
  let aliases = 0;
  const variableDefs = new Map<string, string>();
  const variables: Record<string, unknown> = {};
  const fragments: { name: string; body: string; uses: Set<string> }[] = [];
  let uses = new Set<string>();

  const size = (): string => {
    switch (g(fc.constantFrom, 'absent', 'literal', 'variable', 'null', 'negative')) {
      case 'absent':
        return '';
      case 'literal':
        return String(g(fc.integer, { min: 0, max: 5 }));
      case 'null':
        return 'null';
      case 'negative':
        return String(g(fc.integer, { min: -3, max: -1 }));
      default: {
        const name = `n${variableDefs.size}`;
        const withDefault = g(fc.boolean);
        variableDefs.set(name, withDefault ? `$${name}: Int = ${g(fc.integer, { min: 0, max: 5 })}` : `$${name}: Int`);
        if (g(fc.boolean)) variables[name] = g(fc.option, fc.integer({ min: -1, max: 5 }), { nil: null });
        return `$${name}`;
      }
    }
  };

  const condition = (): string => {
    switch (g(fc.integer, { min: 0, max: 5 })) {
      case 0:
        return ` @skip(if: ${String(g(fc.boolean))})`;
      case 1:
        return ` @include(if: ${String(g(fc.boolean))})`;
      case 2: {
        const value = g(fc.boolean);
        variableDefs.set(`b${String(value)}`, `$b${String(value)}: Boolean!`);
        variables[`b${String(value)}`] = value;
        return ` @${g(fc.constantFrom, 'skip', 'include')}(if: $b${String(value)})`;
      }
      default:
        return '';
    }
  };

  const selectionSet = (type: Parent, depth: number, spreadable: number): string => {
    const selections: string[] = [];
    const count = g(fc.integer, { min: 1, max: 3 });
    for (let i = 0; i < count; i++) {
      const kind = g(fc.constantFrom, 'field', 'field', 'inline', 'spread', 'typename');
      const canSpread = spreadable > 0 && (type === 'Item' || type === 'Node' || type === 'Thing');
      if (kind === 'spread' && canSpread) {
        const name = `F${g(fc.integer, { min: 0, max: spreadable - 1 })}`;
        uses.add(name);
        selections.push(`...${name}${condition()}`);
      } else if (kind === 'inline' && depth < MAX_DEPTH) {
        const on = g(fc.constantFrom, ...CONDITIONS[type]);
        selections.push(`...${on === null ? '' : ` on ${on}`}${condition()} ${selectionSet(on ?? type, depth + 1, spreadable)}`);
      } else if (kind === 'typename' || FIELDS[type].length === 0) {
        selections.push(`__typename${condition()}`);
      } else {
        const field = g(fc.constantFrom, ...FIELDS[type]);
        let text = field.name;
        if (field.size !== undefined) {
          const value = size();
          text = `a${aliases++}: ${field.name}${value === '' ? '' : `(${field.size}: ${value})`}`;
        } else if (g(fc.boolean)) {
          text = `a${aliases++}: ${field.name}`;
        }
        text += condition();
        if (field.type !== null) {
          text += depth < MAX_DEPTH ? ` ${selectionSet(field.type, depth + 1, spreadable)}` : ' { __typename }';
        }
        selections.push(text);
      }
    }
    return `{ ${selections.join(' ')} }`;
  };

  const fragmentCount = g(fc.integer, { min: 0, max: 2 });
  for (let f = 0; f < fragmentCount; f++) {
    uses = new Set();
    // A fragment may spread only earlier fragments: no cycles.
    const body = selectionSet('Item', 2, f);
    fragments.push({ name: `F${f}`, body, uses });
  }
  uses = new Set();
  const body = selectionSet('Query', 0, fragmentCount);

  // Only fragments the operation reaches may be defined.
  const used = new Set<string>();
  const visit = (names: Set<string>) => {
    for (const name of names) {
      if (used.has(name)) continue;
      used.add(name);
      visit(fragments.find((f) => f.name === name)?.uses ?? new Set());
    }
  };
  visit(uses);

  const definitions = fragments.filter((f) => used.has(f.name)).map((f) => `fragment ${f.name} on Item ${f.body}`);
  const usedVariables = [...variableDefs.entries()].filter(([name]) =>
    [body, ...definitions].some((text) => new RegExp(`\\$${name}\\b`).test(text)),
  );
  const header = usedVariables.length === 0 ? '' : `(${usedVariables.map(([, def]) => def).join(', ')})`;
  const providedVariables = Object.fromEntries(
    Object.entries(variables).filter(([name]) => usedVariables.some(([used]) => used === name)),
  );
  return { query: [`query Random${header} ${body}`, ...definitions].join('\n'), variables: providedVariables };
});

describe('static cost (property)', () => {
  const model = new CostModel(schema, { defaultListSize: ASSUMED });

  it('never charges a bucket less than the fixed costs of the resolvers that actually run', async () => {
    await fc.assert(
      fc.asyncProperty(operations, async ({ query, variables }) => {
        const document = parse(query);
        expect(validate(schema, document)).toEqual([]);
        const operation = getOperationAST(document);
        if (operation == null) throw new Error('no operation');

        spent = new Map();
        const result = await execute({ schema, document, variableValues: variables });
        expect(result.errors).toBeUndefined();

        const charged = model.costOf(document, operation, variables);
        for (const [bucket, actual] of spent) {
          expect(charged.get(bucket), `bucket ${bucket}`).toBeGreaterThanOrEqual(actual);
        }
        for (const cost of charged.values()) {
          expect(Number.isSafeInteger(cost) && cost >= 0).toBe(true);
        }
      }),
      { numRuns: 300 },
    );
  });
});

/*
 * The 0.2 complexity: lists of lists, weighted scalars, an interface
 * selected through fragments, Float and custom-scalar sizes, a sized
 * connection. Resolvers return exactly the sizes asked for; every resolver
 * call is recorded as the work it stands for, per bucket: its fixed cost, or
 * (for "api", the whole operation's complexity) its weight per value it
 * produced. The static charge must never be below that work, and the
 * response's price must lie between the two.
 */
const COMPLEX_ASSUMED = 3;

const complexSchema = buildSchema(`
  ${tokenBucketDirectiveTypeDefs}
  ${IBM_COST_DIRECTIVES}
  scalar Count
  type Query @tokenBucket(name: "api") {
    items(first: Int): [Item] @tokenBucket(name: "items", cost: 1)
    grid(first: Int): [[Cell]] @listSize(assumedSize: 2)
    byFloat(first: Float): [Item]
    byCount(first: Count): [Item]
    scores(first: Int): [Int] @cost(weight: "2")
    shapes(first: Int): [Shape]
    conn(first: Int): Conn @listSize(slicingArguments: ["first"], sizedFields: ["edges"])
  }
  type Item {
    id: ID
    tags(first: Int): [String] @cost(weight: "1")
    child: Item @tokenBucket(name: "child", cost: 2)
    cells: [[Cell]]
  }
  type Cell { value: Int @cost(weight: "0.5") item: Item }
  interface Shape @tokenBucket(name: "shape", cost: 1) { area: Float @cost(weight: "3") }
  type Square implements Shape { area: Float side: Int corners(first: Int): [Cell] }
  type Circle implements Shape { area: Float radius: Float @cost(weight: "4") }
  type Conn { edges(first: Int): [Edge] total: Int }
  type Edge { node: Item cursor: String }
`);

/** What each field weighs and charges, restated so the test does not trust the model's reading of the schema. */
const COMPLEX_FIELDS: Record<string, { weight: number; fixed?: [bucket: string, cost: number] }> = {
  'Query.items': { weight: 1, fixed: ['items', 1] },
  'Query.grid': { weight: 1 },
  'Query.byFloat': { weight: 1 },
  'Query.byCount': { weight: 1 },
  'Query.scores': { weight: 2 },
  'Query.shapes': { weight: 1 },
  'Query.conn': { weight: 1 },
  'Item.id': { weight: 0 },
  'Item.tags': { weight: 1 },
  'Item.child': { weight: 1, fixed: ['child', 2] },
  'Item.cells': { weight: 1 },
  'Cell.value': { weight: 0.5 },
  'Cell.item': { weight: 1 },
  'Square.area': { weight: 3, fixed: ['shape', 1] },
  'Square.side': { weight: 0, fixed: ['shape', 1] },
  'Square.corners': { weight: 1, fixed: ['shape', 1] },
  'Circle.area': { weight: 3, fixed: ['shape', 1] },
  'Circle.radius': { weight: 4, fixed: ['shape', 1] },
  'Conn.edges': { weight: 1 },
  'Conn.total': { weight: 0 },
  'Edge.node': { weight: 1 },
  'Edge.cursor': { weight: 0 },
};

/**
 * The size a hostile resolver reads: the largest of `Number(v)`, `parseInt`,
 * `parseFloat` and a list's length (fractions rounded up), else, when none
 * is a usable number, the assumed size.
 */
function honoured(value: unknown, assumed: number): number {
  if (value === null || value === undefined || typeof value === 'boolean') return assumed;
  const read = (reading: () => number): number => {
    try {
      return reading();
    } catch {
      return Number.NaN; // an object without a prototype (a literal `{}` of a custom scalar) converts to nothing
    }
  };
  const readings = [
    read(() => Number(value)),
    read(() => Number.parseInt(String(value as string), 10)),
    read(() => Number.parseFloat(String(value as string))),
    Array.isArray(value) ? value.length : Number.NaN,
  ];
  const usable = readings.filter((n) => Number.isFinite(n) && n >= 0);
  return usable.length === 0 ? assumed : Math.ceil(Math.max(...usable));
}
const many = <T>(n: number, make: (i: number) => T): T[] => Array.from({ length: n }, (_, i) => make(i));
const grid = (rows: number, columns: number) => many(rows, () => many(columns, () => ({})));
type Args = Record<string, unknown>;
const COMPLEX_RESOLVERS: Record<string, (source: Record<string, unknown>, args: Args) => unknown> = {
  'Query.items': (_, a) => many(honoured(a['first'], COMPLEX_ASSUMED), () => ({})),
  'Query.grid': (_, a) => grid(honoured(a['first'], 2), 2),
  'Query.byFloat': (_, a) => many(honoured(a['first'], COMPLEX_ASSUMED), () => ({})),
  'Query.byCount': (_, a) => many(honoured(a['first'], COMPLEX_ASSUMED), () => ({})),
  'Query.scores': (_, a) => many(honoured(a['first'], COMPLEX_ASSUMED), (i) => i),
  'Query.shapes': (_, a) => many(honoured(a['first'], COMPLEX_ASSUMED), (i) => ({ __typename: i % 2 === 0 ? 'Square' : 'Circle' })),
  'Query.conn': (_, a) => ({ size: honoured(a['first'], COMPLEX_ASSUMED) }),
  'Item.id': () => 'i',
  'Item.tags': (_, a) => many(honoured(a['first'], COMPLEX_ASSUMED), () => 't'),
  'Item.child': () => ({}),
  'Item.cells': () => grid(COMPLEX_ASSUMED, COMPLEX_ASSUMED),
  'Cell.value': () => 1,
  'Cell.item': () => ({}),
  'Square.area': () => 4,
  'Square.side': () => 2,
  'Square.corners': (_, a) => many(honoured(a['first'], COMPLEX_ASSUMED), () => ({})),
  'Circle.area': () => 3,
  'Circle.radius': () => 1,
  // A sized field: the connection's size, or its own larger argument.
  'Conn.edges': (source, a) => many(Math.max(source['size'] as number, honoured(a['first'], 0)), () => ({})),
  'Conn.total': (source) => source['size'],
  'Edge.node': () => ({}),
  'Edge.cursor': () => 'c',
};

/** Values a resolver produced: the leaves of its lists that are not null, or 1 for a value that is not. */
function produced(value: unknown): number {
  if (Array.isArray(value)) return value.reduce((n: number, item) => n + produced(item), 0);
  return value === null || value === undefined ? 0 : 1;
}

let work = new Map<string, number>();
for (const type of Object.values(complexSchema.getTypeMap())) {
  if (!isObjectType(type) || type.name.startsWith('__')) continue;
  for (const field of Object.values(type.getFields())) {
    const coordinate = `${type.name}.${field.name}`;
    const resolve = COMPLEX_RESOLVERS[coordinate];
    const known = COMPLEX_FIELDS[coordinate];
    if (resolve === undefined || known === undefined) throw new Error(`no resolver or weight for ${coordinate}`);
    field.resolve = (source: Record<string, unknown>, args: Args) => {
      const value = resolve(source, args);
      if (known.fixed !== undefined) work.set(known.fixed[0], (work.get(known.fixed[0]) ?? 0) + known.fixed[1]);
      work.set('api', (work.get('api') ?? 0) + known.weight * produced(value));
      return value;
    };
  }
}

type ComplexParent = 'Query' | 'Item' | 'Cell' | 'Shape' | 'Square' | 'Circle' | 'Conn' | 'Edge';
const COMPLEX_SELECTIONS: Record<ComplexParent, { name: string; type: ComplexParent | null; size?: 'Int' | 'Float' | 'Count' }[]> = {
  Query: [
    { name: 'items', type: 'Item', size: 'Int' },
    { name: 'grid', type: 'Cell', size: 'Int' },
    { name: 'byFloat', type: 'Item', size: 'Float' },
    { name: 'byCount', type: 'Item', size: 'Count' },
    { name: 'scores', type: null, size: 'Int' },
    { name: 'shapes', type: 'Shape', size: 'Int' },
    { name: 'conn', type: 'Conn', size: 'Int' },
  ],
  Item: [
    { name: 'id', type: null },
    { name: 'tags', type: null, size: 'Int' },
    { name: 'child', type: 'Item' },
    { name: 'cells', type: 'Cell' },
  ],
  Cell: [
    { name: 'value', type: null },
    { name: 'item', type: 'Item' },
  ],
  Shape: [{ name: 'area', type: null }],
  Square: [
    { name: 'area', type: null },
    { name: 'side', type: null },
    { name: 'corners', type: 'Cell', size: 'Int' },
  ],
  Circle: [
    { name: 'area', type: null },
    { name: 'radius', type: null },
  ],
  Conn: [
    { name: 'edges', type: 'Edge', size: 'Int' },
    { name: 'total', type: null },
  ],
  Edge: [
    { name: 'node', type: 'Item' },
    { name: 'cursor', type: null },
  ],
};
const COMPLEX_FRAGMENTS: Partial<Record<ComplexParent, ComplexParent[]>> = { Shape: ['Square', 'Circle', 'Shape'], Square: ['Shape'], Circle: ['Shape'] };

/** Custom-scalar sizes of every JSON kind: numbers, numeric strings in every notation, lists of them, and what reads as no number. */
const COUNTS: unknown[] = ['2', '4', 3, 'x', null, [4], [[3]], ['5'], [' 2 '], '1e1', '0x3', [1, 2], {}, true, '3 rows', -0, 2.5, [], ['a', 'b']];

function literal(value: unknown): string {
  if (value === null || typeof value !== 'object') return typeof value === 'string' ? JSON.stringify(value) : String(value);
  if (Array.isArray(value)) return `[${value.map(literal).join(', ')}]`;
  return `{ ${Object.entries(value).map(([k, v]) => `${k}: ${literal(v)}`).join(', ')} }`;
}

/**
 * The operation as graphql-js runs it: every selection set collected
 * (graphql-js's own CollectFields) per runtime type, fragments inlined,
 * fields merged under their response keys, `@skip`/`@include` applied. It
 * executes exactly as the original does.
 */
function mergedEquivalent(schema: GraphQLSchema, document: DocumentNode, operation: OperationDefinitionNode, variables: Record<string, unknown>): string {
  const fragments: Record<string, FragmentDefinitionNode> = {};
  for (const definition of document.definitions) if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments[definition.name.value] = definition;
  const coerced = getVariableValues(schema, operation.variableDefinitions ?? [], variables);
  if (coerced.coerced === undefined) throw new Error('variables do not coerce');
  const values = coerced.coerced;
  const fieldsOf = (collected: Map<string, readonly FieldNode[]>, type: GraphQLObjectType): string => {
    const parts: string[] = [];
    for (const [key, nodes] of collected) {
      const first = nodes[0]!;
      const name = first.name.value;
      const args = first.arguments?.length ? `(${first.arguments.map((a) => `${a.name.value}: ${print(a.value)}`).join(', ')})` : '';
      const definition = name === '__typename' ? undefined : type.getFields()[name];
      const returned = definition === undefined ? undefined : getNamedType(definition.type);
      let sub = '';
      if (returned !== undefined && isCompositeType(returned)) {
        const runtimes = isAbstractType(returned) ? schema.getPossibleTypes(returned) : [returned];
        const inner = runtimes
          .map((runtime) => [runtime, fieldsOf(collectSubfields(schema, fragments, values, runtime, nodes), runtime)] as const)
          .filter(([, text]) => text !== '')
          .map(([runtime, text]) => `... on ${runtime.name} { ${text} }`);
        // Nothing collected: the field still runs, its object completes empty.
        sub = ` { ${inner.length > 0 ? inner.join(' ') : '... @skip(if: true) { __typename }'} }`;
      }
      parts.push(`${key}: ${name}${args}${sub}`);
    }
    return parts.join(' ');
  };
  const root = schema.getQueryType()!;
  const variableDefinitions = operation.variableDefinitions?.length ? `(${operation.variableDefinitions.map(print).join(', ')})` : '';
  return `query Merged${variableDefinitions} { ${fieldsOf(collectFields(schema, fragments, values, root, operation.selectionSet), root)} }`;
}

const complexOperations = fc.gen().map((g): RandomOperation => {
  let aliases = 0;
  const declarations: string[] = [];
  const variables: Record<string, unknown> = {};
  const fragments: string[] = [];

  const fragmentsOn = new Map<ComplexParent, string[]>();
  const keys = new Map<string, number>();

  const size = (kind: 'Int' | 'Float' | 'Count'): string => {
    const value = g(fc.constantFrom, ...(kind === 'Int' ? [0, 1, 4, -2, null] : kind === 'Float' ? [0.5, 2.5, 3.9, -1.5, null] : COUNTS));
    if (g(fc.boolean)) {
      const name = `v${declarations.length}`;
      declarations.push(`$${name}: ${kind}`);
      variables[name] = value;
      return `(first: $${name})`;
    }
    if (g(fc.boolean)) return '';
    return `(first: ${literal(value)})`;
  };

  // A response key: unique, or the one every selection of this field with these arguments shares, so that they merge.
  const keyOf = (field: string, args: string): string => {
    if (g(fc.boolean)) return `a${aliases++}`;
    const text = `${field}${args}`;
    let index = keys.get(text);
    if (index === undefined) keys.set(text, (index = keys.size));
    return `k${index}`;
  };

  const selectionSet = (type: ComplexParent, depth: number): string => {
    const selections: string[] = [];
    const count = g(fc.integer, { min: 1, max: 3 });
    for (let i = 0; i < count; i++) {
      const on = COMPLEX_FRAGMENTS[type];
      const kind = g(fc.constantFrom, 'field', 'field', 'field', 'typename', ...(on !== undefined && depth < 3 ? ['inline', 'spread'] : []));
      if (kind === 'typename') {
        selections.push('__typename');
      } else if ((kind === 'inline' || kind === 'spread') && on !== undefined) {
        const target = g(fc.constantFrom, ...on);
        const earlier = fragmentsOn.get(target) ?? [];
        if (kind === 'spread' && earlier.length > 0 && g(fc.boolean)) {
          // A fragment spread again: its fields meet the same keys elsewhere.
          selections.push(`...${g(fc.constantFrom, ...earlier)}`);
          continue;
        }
        const body = selectionSet(target, depth + 1);
        if (kind === 'inline') {
          selections.push(`... on ${target} ${body}`);
        } else {
          const name = `F${fragments.length}`;
          fragments.push(`fragment ${name} on ${target} ${body}`);
          fragmentsOn.set(target, [...earlier, name]);
          selections.push(`...${name}`);
        }
      } else {
        const fields = COMPLEX_SELECTIONS[type].filter((f) => f.type === null || depth < 3);
        const field = g(fc.constantFrom, ...fields);
        const args = field.size === undefined ? '' : size(field.size);
        const sub = field.type === null ? '' : ` ${selectionSet(field.type, depth + 1)}`;
        selections.push(`${keyOf(field.name, args)}: ${field.name}${args}${sub}`);
      }
    }
    return `{ ${selections.join(' ')} }`;
  };

  const body = selectionSet('Query', 0);
  const header = declarations.length > 0 ? `(${declarations.join(', ')})` : '';
  return { query: [`query Random${header} ${body}`, ...fragments].join('\n'), variables };
});

describe('static and response cost of the 0.2 complexity (property)', () => {
  const model = new CostModel(complexSchema, { defaultListSize: COMPLEX_ASSUMED });

  it('never charges a bucket less than the work its resolvers do, and prices the response between the two', async () => {
    await fc.assert(
      fc.asyncProperty(complexOperations, async ({ query, variables }) => {
        const document = parse(query);
        expect(validate(complexSchema, document)).toEqual([]);
        const operation = getOperationAST(document);
        if (operation == null) throw new Error('no operation');

        work = new Map();
        const result = await execute({ schema: complexSchema, document, variableValues: variables });
        expect(result.errors).toBeUndefined();

        const estimate = model.costOf(document, operation, variables);
        const actual = model.actualCostOf(document, operation, variables, result.data);
        expect([...actual.keys()]).toEqual([...estimate.keys()]);
        for (const [bucket, done] of work) {
          // Weights like 0.5 add up in binary: a hair of rounding is no under-charge.
          expect(estimate.get(bucket), `estimate of ${bucket}`).toBeGreaterThanOrEqual(Math.ceil(done - 1e-9));
          expect(actual.get(bucket), `actual of ${bucket}`).toBeGreaterThanOrEqual(Math.ceil(done - 1e-9));
        }
        for (const [bucket, cost] of estimate) {
          expect(Number.isSafeInteger(cost) && cost >= 0).toBe(true);
          expect(actual.get(bucket)).toBeLessThanOrEqual(cost);
        }

        // Priced as what runs: the same as the operation with every selection collected and merged.
        const merged = parse(mergedEquivalent(complexSchema, document, operation, variables));
        const mergedOperation = getOperationAST(merged)!;
        expect(Object.fromEntries(model.costOf(merged, mergedOperation, variables)), mergedEquivalent(complexSchema, document, operation, variables)).toEqual(
          Object.fromEntries(estimate),
        );
        expect(Object.fromEntries(model.actualCostOf(merged, mergedOperation, variables, result.data))).toEqual(Object.fromEntries(actual));
      }),
      { numRuns: 300 },
    );
  });
});
