// One priced schema as each code-first builder writes it — graphql-js
// objects (directives on astNode without a declaration, as NestJS's
// @Directive does; extensions.directives in graphql-tools' object form and
// in the array form; extensions.complexity), Pothos' directives plugin,
// TypeGraphQL's @Directive and complexity — served by Apollo Server and
// GraphQL Yoga: the charge a client sees is the same everywhere.
import 'reflect-metadata';
import SchemaBuilder from '@pothos/core';
import DirectivesPlugin from '@pothos/plugin-directives';
import { GraphQLID, GraphQLInt, GraphQLList, GraphQLObjectType, GraphQLSchema, parse, specifiedDirectives } from 'graphql';
import type { FieldDefinitionNode, GraphQLDirective, ObjectTypeDefinitionNode } from 'graphql';
import { Directive, Field, ID, Int, ObjectType, Query, Resolver, buildSchemaSync } from 'type-graphql';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryStore, Rate, TokenBucket, costDirective, listSizeDirective, tokenBucketDirective } from '../src/index.js';
import { TRANSPORTS, serveLimited } from './support/limited-servers.js';
import type { LimitedServer } from './support/limited-servers.js';

interface Item {
  id: string;
  price: number;
}

/** Three items, as many as `@listSize(assumedSize: 3)` says. */
const items = (): Item[] => [1, 2, 3].map((i) => ({ id: String(i), price: i }));

/** `{ items { id price } }`: 3 × (Item 1 + id 0 + price 7) = 24; read without @cost and @listSize, 10 × 1 = 10. */
const QUERY = '{ items { id price } }';
const PRICE = 24;

/** The AST a builder writes for a field carrying `directives` (NestJS's and TypeGraphQL's `@Directive` parse the string so). */
function fieldNode(name: string, type: string, directives: string): FieldDefinitionNode {
  const definition = parse(`type T { ${name}: ${type} ${directives} }`).definitions[0] as ObjectTypeDefinitionNode;
  return definition.fields![0]!;
}

function typeNode(name: string, directives: string): ObjectTypeDefinitionNode {
  return parse(`type ${name} ${directives} { _: Int }`).definitions[0] as ObjectTypeDefinitionNode;
}

/** graphql-js objects, each annotation given by `annotate` for its element; `directives` declared in the schema. */
function objects(
  annotate: {
    query?: { astNode?: ObjectTypeDefinitionNode };
    items: { astNode?: FieldDefinitionNode; extensions?: Record<string, unknown> };
    price: { astNode?: FieldDefinitionNode; extensions?: Record<string, unknown> };
  },
  directives: readonly GraphQLDirective[] = [],
): GraphQLSchema {
  const Item = new GraphQLObjectType({
    name: 'Item',
    fields: { id: { type: GraphQLID }, price: { type: GraphQLInt, ...annotate.price } },
  });
  return new GraphQLSchema({
    query: new GraphQLObjectType({
      name: 'Query',
      ...annotate.query,
      fields: { items: { type: new GraphQLList(Item), resolve: items, ...annotate.items } },
    }),
    directives: [...specifiedDirectives, ...directives],
  });
}

interface PothosDirectives {
  Directives: {
    tokenBucket: { locations: 'FIELD_DEFINITION' | 'OBJECT' | 'INTERFACE'; args: { name: string; cost?: number } };
    cost: { locations: 'FIELD_DEFINITION' | 'OBJECT'; args: { weight: string } };
    listSize: { locations: 'FIELD_DEFINITION'; args: { assumedSize?: number; slicingArguments?: string[] } };
  };
}

function pothos(useGraphQLToolsUnorderedDirectives: boolean, directives: readonly GraphQLDirective[] = []): GraphQLSchema {
  const builder = new SchemaBuilder<PothosDirectives>({ plugins: [DirectivesPlugin], directives: { useGraphQLToolsUnorderedDirectives } });
  const ItemRef = builder.objectRef<Item>('Item').implement({
    fields: (t) => ({ id: t.exposeID('id'), price: t.exposeInt('price', { directives: { cost: { weight: '7' } } }) }),
  });
  builder.queryType({
    directives: { tokenBucket: { name: 'api' } },
    fields: (t) => ({ items: t.field({ type: [ItemRef], directives: { listSize: { assumedSize: 3 } }, resolve: items }) }),
  });
  return builder.toSchema({ directives });
}

/**
 * TypeGraphQL's API, called as its decorators would be (the project compiles
 * standard decorators; TypeGraphQL's are the legacy kind). `price` carries
 * `@Directive('@cost(weight: "7")')`, `tax` the option `complexity: 7`.
 */
function typeGraphql(itemName: string, directives: readonly GraphQLDirective[] = []): GraphQLSchema {
  class TgItem {
    id!: string;
    price!: number;
    tax!: number;
  }
  ObjectType(itemName)(TgItem);
  Field(() => ID)(TgItem.prototype, 'id');
  Field(() => Int)(TgItem.prototype, 'price');
  Directive('@cost(weight: "7")')(TgItem.prototype, 'price');
  Field(() => Int, { complexity: 7 })(TgItem.prototype, 'tax');
  class ItemResolver {
    items(): (Item & { tax: number })[] {
      return items().map((item) => ({ ...item, tax: 1 }));
    }
  }
  const method = Object.getOwnPropertyDescriptor(ItemResolver.prototype, 'items')!;
  Query(() => [TgItem])(ItemResolver.prototype, 'items', method);
  Directive('@tokenBucket(name: "api")')(ItemResolver.prototype, 'items', method);
  Directive('@listSize(assumedSize: 3)')(ItemResolver.prototype, 'items', method);
  Resolver(() => TgItem)(ItemResolver);
  return buildSchemaSync({ resolvers: [ItemResolver], validate: false, directives: [...directives] });
}

const DECLARED = [tokenBucketDirective, costDirective, listSizeDirective];

// Built once each (TypeGraphQL keeps its metadata per process: each of its schemas names its item type differently).
const schemas: [string, GraphQLSchema][] = [
  [
    'graphql-js objects, directives on astNode without declarations (NestJS @Directive)',
    objects({
      query: { astNode: typeNode('Query', '@tokenBucket(name: "api")') },
      items: { astNode: fieldNode('items', '[Item]', '@listSize(assumedSize: 3)') },
      price: { astNode: fieldNode('price', 'Int', '@cost(weight: "7")') },
    }),
  ],
  [
    "graphql-js objects, extensions.directives in graphql-tools' object form",
    objects({
      items: { extensions: { directives: { tokenBucket: [{ name: 'api' }], listSize: { assumedSize: 3 } } } },
      price: { extensions: { directives: { cost: { weight: 7 } } } },
    }),
  ],
  [
    'graphql-js objects, extensions.directives in the array form',
    objects({
      items: {
        extensions: {
          directives: [
            { name: 'tokenBucket', args: { name: 'api' } },
            { name: 'listSize', args: { assumedSize: 3 } },
          ],
        },
      },
      price: { extensions: { directives: [{ name: 'cost', args: { weight: '7' } }] } },
    }),
  ],
  [
    "graphql-js objects, extensions.complexity (graphql-query-complexity's)",
    objects({
      items: { astNode: fieldNode('items', '[Item]', '@tokenBucket(name: "api") @listSize(assumedSize: 3)') },
      price: { extensions: { complexity: 7 } },
    }),
  ],
  ['Pothos with its directives plugin', pothos(false)],
  ["Pothos with its directives plugin, in graphql-tools' object form", pothos(true)],
  ['TypeGraphQL @Directive', typeGraphql('Item')],
  ['TypeGraphQL @Directive, the directives declared', typeGraphql('DeclaredItem', DECLARED)],
  [
    'graphql-js objects, directives on astNode declared with the exported GraphQLDirective objects',
    objects(
      {
        query: { astNode: typeNode('Query', '@tokenBucket(name: "api")') },
        items: { astNode: fieldNode('items', '[Item]', '@listSize(assumedSize: 3)') },
        price: { astNode: fieldNode('price', 'Int', '@cost(weight: "7")') },
      },
      DECLARED,
    ),
  ],
  [
    "graphql-js objects, extensions.directives in graphql-tools' object form, declared",
    objects(
      {
        items: { extensions: { directives: { tokenBucket: [{ name: 'api' }], listSize: { assumedSize: 3 } } } },
        price: { extensions: { directives: { cost: { weight: '7' } } } },
      },
      DECLARED,
    ),
  ],
  ['Pothos with its directives plugin, the directives declared', pothos(false, DECLARED)],
];

const api = new TokenBucket('api', 1000, Rate.perSecond(1));
let server: LimitedServer | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
});

describe.each(TRANSPORTS)('%s', (transport) => {
  it.each(schemas)(`%s: ${QUERY} is charged ${PRICE}, with no warning`, async (_, schema) => {
    server = await serveLimited(transport, schema, {}, { store: new MemoryStore(), buckets: [api], reportCost: true });
    const answer = await server.post({ query: QUERY });
    expect(answer.status).toBe(200);
    expect(answer.body.data).toEqual({ items: items().map(({ id, price }) => ({ id, price })) });
    expect(answer.body.extensions?.['rateLimit']).toEqual({ api: { cost: PRICE, remaining: 1000 - PRICE, capacity: 1000 } });
    expect(server.logger.warnings).toEqual([]);
  });

  it("TypeGraphQL's complexity option: { items { id tax } } is charged 24", async () => {
    server = await serveLimited(transport, schemas.find(([name]) => name.startsWith('TypeGraphQL'))![1], {}, { store: new MemoryStore(), buckets: [api], reportCost: true });
    const answer = await server.post({ query: '{ items { id tax } }' });
    expect(answer.body.extensions?.['rateLimit']).toEqual({ api: { cost: 24, remaining: 976, capacity: 1000 } });
  });
});
