/**
 * The `@tokenBucket` directive definition, to add to a schema's type
 * definitions. Kept identical to `schema/token-bucket.graphql`, which ships
 * for SDL tooling that reads files rather than imports.
 */
export const tokenBucketDirectiveTypeDefs =
  'directive @tokenBucket(name: String!, cost: Int) repeatable on FIELD_DEFINITION | OBJECT | INTERFACE';
