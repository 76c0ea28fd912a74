import fc from 'fast-check';
import { buildSchema, execute, getOperationAST, isObjectType, parse, validate } from 'graphql';
import type { GraphQLFieldResolver } from 'graphql';
import { describe, expect, it } from 'vitest';
import { CostModel } from '../src/cost/cost-model.js';
import { tokenBucketDirectiveTypeDefs } from '../src/directive.js';

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
