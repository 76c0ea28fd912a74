import { DirectiveLocation, GraphQLBoolean, GraphQLDirective, GraphQLInt, GraphQLList, GraphQLNonNull, GraphQLString } from 'graphql';

/**
 * The `@tokenBucket` directive definition, to add to a schema's type
 * definitions. Kept identical to `schema/token-bucket.graphql`, which ships
 * for SDL tooling that reads files rather than imports.
 */
export const tokenBucketDirectiveTypeDefs =
  'directive @tokenBucket(name: String!, cost: Int) repeatable on FIELD_DEFINITION | OBJECT | INTERFACE';

/**
 * `@cost` and `@listSize` as the IBM GraphQL cost directive specification
 * declares them (`weight: String!`, so a weight may be fractional: `"2.5"`).
 * Kept identical to `schema/cost.graphql`. A schema may declare them the
 * Apollo way instead (`weight: Int!`); both are read.
 */
export const costDirectiveTypeDefs = [
  'directive @cost(weight: String!) on ARGUMENT_DEFINITION | ENUM | FIELD_DEFINITION | INPUT_FIELD_DEFINITION | OBJECT | SCALAR',
  'directive @listSize(assumedSize: Int, slicingArguments: [String!], sizedFields: [String!], requireOneSlicingArgument: Boolean = true) on FIELD_DEFINITION',
].join('\n');

const names = new GraphQLList(new GraphQLNonNull(GraphQLString));

/** `@tokenBucket` as a graphql-js object, for code-first schemas (`new GraphQLSchema({ directives })`, Pothos, TypeGraphQL, NestJS). */
export const tokenBucketDirective = new GraphQLDirective({
  name: 'tokenBucket',
  isRepeatable: true,
  locations: [DirectiveLocation.FIELD_DEFINITION, DirectiveLocation.OBJECT, DirectiveLocation.INTERFACE],
  args: {
    name: { type: new GraphQLNonNull(GraphQLString) },
    cost: { type: GraphQLInt },
  },
});

/** `@cost` as a graphql-js object: the IBM declaration, `weight: String!`. */
export const costDirective = new GraphQLDirective({
  name: 'cost',
  locations: [
    DirectiveLocation.ARGUMENT_DEFINITION,
    DirectiveLocation.ENUM,
    DirectiveLocation.FIELD_DEFINITION,
    DirectiveLocation.INPUT_FIELD_DEFINITION,
    DirectiveLocation.OBJECT,
    DirectiveLocation.SCALAR,
  ],
  args: { weight: { type: new GraphQLNonNull(GraphQLString) } },
});

/** `@listSize` as a graphql-js object. */
export const listSizeDirective = new GraphQLDirective({
  name: 'listSize',
  locations: [DirectiveLocation.FIELD_DEFINITION],
  args: {
    assumedSize: { type: GraphQLInt },
    slicingArguments: { type: names },
    sizedFields: { type: names },
    requireOneSlicingArgument: { type: GraphQLBoolean, defaultValue: true },
  },
});
