// What the cost model reads of a schema's annotations, in every form schema
// builders write them, and what it refuses or warns about at start-up: an
// annotation is read, or refused, or named in a warning — never ignored.
import {
  GraphQLEnumType,
  GraphQLInputObjectType,
  GraphQLInt,
  GraphQLList,
  GraphQLObjectType,
  GraphQLSchema,
  GraphQLString,
  GraphQLUnionType,
  Kind,
  buildSchema,
  getOperationAST,
  parse,
} from 'graphql';
import type { DirectiveNode, FieldDefinitionNode, GraphQLFieldConfig, ObjectTypeDefinitionNode } from 'graphql';
import { describe, expect, it } from 'vitest';
import { CostModel } from '../src/index.js';

function costOf(model: CostModel, query: string): Record<string, number> {
  const document = parse(query);
  return Object.fromEntries(model.costOf(document, getOperationAST(document)!));
}

/** The AST a builder writes for a field carrying `directives`, declared nowhere (NestJS's and TypeGraphQL's `@Directive`). */
function fieldNode(directives: string): FieldDefinitionNode {
  return (parse(`type T { f: Int ${directives} }`).definitions[0] as ObjectTypeDefinitionNode).fields![0]!;
}

/** `Query { a: Int, list: [Query] }` charged to `api`, with `a` given `config` (an astNode, extensions). */
function schemaWith(config: Partial<GraphQLFieldConfig<unknown, unknown>>): GraphQLSchema {
  const Query: GraphQLObjectType = new GraphQLObjectType({
    name: 'Query',
    extensions: { directives: { tokenBucket: { name: 'api' } } },
    fields: () => ({ a: { type: GraphQLInt, ...config }, list: { type: new GraphQLList(Query) } }),
  });
  return new GraphQLSchema({ query: Query });
}

/** `{ a }` alone: the weight `a` is read with. */
const weightOf = (schema: GraphQLSchema): number => costOf(new CostModel(schema), '{ a }')['api']!;

describe('reading', () => {
  it('reads @cost and @listSize written in SDL without a declaration', () => {
    const schema = buildSchema(
      `directive @tokenBucket(name: String!, cost: Int) repeatable on FIELD_DEFINITION | OBJECT | INTERFACE
      type Query { a: Int @tokenBucket(name: "api") @cost(weight: "9") list: [Query] @tokenBucket(name: "api") @listSize(assumedSize: 1) }`,
      { assumeValidSDL: true },
    );
    // a 9; list 1 × (1 + a 9) = 10, and the a inside it charges its own 9 again
    expect(costOf(new CostModel(schema), '{ a list { a } }')).toEqual({ api: 28 });
  });

  it('reads a weight written as a string, an Int or a Float, and as a number or a string in extensions', () => {
    for (const written of ['"2.5"', '2.5', '3']) expect(weightOf(schemaWith({ astNode: fieldNode(`@cost(weight: ${written})`) }))).toBe(Math.ceil(Number(written.replaceAll('"', ''))));
    for (const weight of [4, '4', 4.5]) expect(weightOf(schemaWith({ extensions: { directives: { cost: { weight } } } }))).toBe(Math.ceil(Number(weight)));
  });

  it('reads every application of @tokenBucket in the array form and in the object form', () => {
    const model = new CostModel(
      schemaWith({
        extensions: {
          directives: [
            { name: 'tokenBucket', args: { name: 'a', cost: 2 } },
            { name: 'tokenBucket', args: { name: 'b' } },
          ],
        },
      }),
    );
    expect(model.annotations.map(({ coordinate, bucket, cost }) => `${coordinate} ${bucket} ${cost}`)).toEqual(['Query api null', 'Query.a a 2', 'Query.a b null']);
  });

  it("reads a field's extensions.complexity number as its weight, and ignores one left undefined (TypeGraphQL, NestJS)", () => {
    expect(weightOf(schemaWith({ extensions: { complexity: 6 } }))).toBe(6);
    expect(weightOf(schemaWith({ extensions: { complexity: undefined } }))).toBe(0);
    expect(new CostModel(schemaWith({ extensions: { complexity: null } })).warnings).toEqual([]);
  });

  it('counts copies that say the same thing once, in any forms (Pothos writes both)', () => {
    const schema = schemaWith({
      astNode: fieldNode('@cost(weight: "7") @tokenBucket(name: "x", cost: 1)'),
      extensions: { complexity: 7, directives: { cost: { weight: 7 }, tokenBucket: [{ name: 'x', cost: 1 }, { name: 'x', cost: 1 }] } },
    });
    const model = new CostModel(schema);
    expect(model.annotations.filter((a) => a.coordinate === 'Query.a')).toEqual([{ coordinate: 'Query.a', bucket: 'x', cost: 1 }]);
    expect(costOf(model, '{ a }')).toEqual({ api: 7, x: 1 });
  });
});

describe('refused at start-up, naming the element', () => {
  const refuses = (config: Partial<GraphQLFieldConfig<unknown, unknown>>, message: RegExp): void => {
    expect(() => new CostModel(schemaWith(config))).toThrow(message);
  };

  it('copies of one annotation that differ, in one form or across forms', () => {
    refuses({ astNode: fieldNode('@cost(weight: "7")'), extensions: { directives: { cost: { weight: 9 } } } }, /@cost on Query\.a: given more than once with different weights: 7 \(astNode\), 9 \(extensions\.directives\)/);
    refuses({ astNode: fieldNode('@cost(weight: "7") @cost(weight: "8")') }, /@cost on Query\.a: given more than once with different weights/);
    refuses({ astNode: fieldNode('@cost(weight: "7")'), extensions: { complexity: 5 } }, /@cost on Query\.a: .*7 \(astNode\), 5 \(extensions\.complexity\)/);
    refuses({ astNode: fieldNode('@tokenBucket(name: "x", cost: 1)'), extensions: { directives: { tokenBucket: { name: 'x', cost: 2 } } } }, /@tokenBucket on Query\.a: bucket "x" appears twice/);
    refuses(
      { type: new GraphQLList(GraphQLInt), astNode: fieldNode('@listSize(assumedSize: 3)'), extensions: { directives: [{ name: 'listSize', args: { assumedSize: 30 } }] } },
      /@listSize on Query\.a: given more than once with different arguments/,
    );
  });

  it('an argument the directive does not take, or one that does not coerce as its declaration would', () => {
    refuses({ astNode: fieldNode('@cost(wieght: "7")') }, /@cost on Query\.a: unknown argument "wieght"/);
    refuses({ astNode: fieldNode('@cost(weight: "1", weight: "100")') }, /@cost on Query\.a: the argument "weight" is given twice/);
    refuses({ astNode: fieldNode('@cost(weight: true)') }, /@cost on Query\.a: Argument "weight" has invalid value true/);
    refuses({ astNode: fieldNode('@cost') }, /@cost on Query\.a: Argument "weight" of required type/);
    refuses({ astNode: fieldNode('@tokenBucket(name: "x", cost: "3")') }, /@tokenBucket on Query\.a: Argument "cost" has invalid value "3"/);
    refuses({ type: new GraphQLList(GraphQLInt), astNode: fieldNode('@listSize(assumedSize: 2.5)') }, /@listSize on Query\.a: Argument "assumedSize" has invalid value 2\.5/);
    refuses({ extensions: { directives: { cost: { weight: 7, multipliers: ['first'] } } } }, /@cost on Query\.a: unknown argument "multipliers" \(extensions\.directives\)/);
    refuses({ extensions: { directives: { cost: 'heavy' } } }, /@cost on Query\.a: extensions\.directives holds "heavy" where an object of arguments belongs/);
    refuses({ extensions: { directives: { cost: { weight: 'heavy' } } } }, /@cost on Query\.a: weight must be a finite non-negative number, got "heavy"/);
  });

  it('a variable, which no schema can give a value', () => {
    const variable: DirectiveNode = {
      kind: Kind.DIRECTIVE,
      name: { kind: Kind.NAME, value: 'tokenBucket' },
      arguments: [
        { kind: Kind.ARGUMENT, name: { kind: Kind.NAME, value: 'name' }, value: { kind: Kind.STRING, value: 'x' } },
        { kind: Kind.ARGUMENT, name: { kind: Kind.NAME, value: 'cost' }, value: { kind: Kind.VARIABLE, name: { kind: Kind.NAME, value: 'c' } } },
      ],
    };
    refuses({ astNode: { ...fieldNode(''), directives: [variable] } as FieldDefinitionNode }, /@tokenBucket on Query\.a: the argument holds the variable \$c/);
  });

  it('an extensions.complexity that is not a non-negative number or a function', () => {
    for (const complexity of ['5', -1, Number.NaN, Number.POSITIVE_INFINITY, { value: 5 }]) {
      refuses({ extensions: { complexity } }, /Query\.a: extensions\.complexity must be a finite non-negative number/);
    }
  });

  it('an annotation where it is not read: an enum value, an input object type, a union, an argument, the schema', () => {
    const Color = new GraphQLEnumType({ name: 'Color', values: { RED: { extensions: { directives: { cost: { weight: 5 } } } } } });
    expect(() => new CostModel(schemaWith({ args: { color: { type: Color } } }))).toThrow(/@cost on Color\.RED: @cost is read on fields, .*, not on an enum value/);
    const Filter = new GraphQLInputObjectType({ name: 'Filter', extensions: { directives: [{ name: 'cost', args: { weight: 5 } }] }, fields: { q: { type: GraphQLString } } });
    expect(() => new CostModel(schemaWith({ args: { filter: { type: Filter } } }))).toThrow(/@cost on Filter: .*not on an input object type/);
    const Search = new GraphQLUnionType({ name: 'Search', types: () => [Item], extensions: { directives: { tokenBucket: { name: 'x' } } } });
    const Item = new GraphQLObjectType({ name: 'Item', fields: { id: { type: GraphQLInt } } });
    expect(() => new CostModel(new GraphQLSchema({ query: new GraphQLObjectType({ name: 'Query', fields: { s: { type: Search } } }) }))).toThrow(
      /@tokenBucket on Search: @tokenBucket is read on object types, interfaces and their fields, not on a union/,
    );
    expect(() => new CostModel(schemaWith({ args: { first: { type: GraphQLInt, extensions: { directives: { listSize: { assumedSize: 5 } } } } } }))).toThrow(
      /@listSize on Query\.a\(first:\): @listSize is read on fields, not on an argument/,
    );
    const rooted = new GraphQLSchema({ query: new GraphQLObjectType({ name: 'Query', fields: { a: { type: GraphQLInt } } }), extensions: { directives: { tokenBucket: { name: 'x' } } } });
    expect(() => new CostModel(rooted)).toThrow(/@tokenBucket on the schema: .*not on the schema/);
  });
});

describe('start-up warnings, naming every element', () => {
  it('a complexity function, which cannot be priced before the operation runs', () => {
    const model = new CostModel(schemaWith({ extensions: { complexity: () => 5 } }));
    expect(model.warnings).toEqual([expect.stringMatching(/^graphql-token-bucket: extensions\.complexity is a function on Query\.a; .*not read/)]);
    expect(costOf(model, '{ a }')).toEqual({ api: 0 });
  });

  it('a complexity somewhere other than a field', () => {
    const Item = new GraphQLObjectType({ name: 'Item', extensions: { complexity: 5 }, fields: { id: { type: GraphQLInt } } });
    const model = new CostModel(new GraphQLSchema({ query: new GraphQLObjectType({ name: 'Query', fields: { item: { type: Item } } }) }));
    expect(model.warnings).toEqual([expect.stringContaining("extensions.complexity on Item is not read: only a field's complexity is a weight")]);
  });

  it("another @cost the schema declares (graphql-cost-analysis's, without weight), in every form", () => {
    const schema = buildSchema(`
      directive @tokenBucket(name: String!, cost: Int) repeatable on FIELD_DEFINITION | OBJECT | INTERFACE
      directive @cost(complexity: Int, multipliers: [String]) on FIELD_DEFINITION | OBJECT
      type Query @tokenBucket(name: "api") { a: Int @cost(complexity: 5) b: Item }
      type Item @cost(complexity: 2) { id: ID }
    `);
    const model = new CostModel(schema);
    expect(model.warnings).toEqual([expect.stringMatching(/@cost on Query\.a, Item is not read: the schema declares another @cost, which this package does not read; declare @cost\(weight: String!\)/)]);
  });

  it('@cost under its own name in a schema whose @link renames it', () => {
    const schema = buildSchema(
      `
      schema @link(url: "https://specs.apollo.dev/cost/v0.1", import: [{ name: "@cost", as: "@weight" }]) { query: Query }
      directive @link(url: String!, as: String, import: [Import]) repeatable on SCHEMA
      scalar Import
      directive @weight(weight: Int!) on FIELD_DEFINITION
      directive @tokenBucket(name: String!, cost: Int) repeatable on FIELD_DEFINITION | OBJECT | INTERFACE
      type Query @tokenBucket(name: "api") { a: Int @weight(weight: 3) b: Int @cost(weight: "4") }
    `,
      { assumeValidSDL: true },
    );
    const model = new CostModel(schema);
    expect(model.warnings).toEqual([expect.stringContaining("@cost on Query.b is not read: this schema's @link names the directive @weight")]);
    expect(costOf(model, '{ a b }')).toEqual({ api: 3 });
  });

  it('names ten elements and counts the rest', () => {
    const fields = Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`f${i}`, { type: GraphQLInt, extensions: { complexity: () => 1 } }]));
    const model = new CostModel(new GraphQLSchema({ query: new GraphQLObjectType({ name: 'Query', fields }) }));
    expect(model.warnings[0]).toContain('Query.f0, Query.f1, Query.f2, Query.f3, Query.f4, Query.f5, Query.f6, Query.f7, Query.f8, Query.f9 and 2 more;');
  });
});
