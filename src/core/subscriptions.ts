import { getNamedType, isInterfaceType, isObjectType, isUnionType } from 'graphql';
import type { GraphQLInterfaceType, GraphQLNamedType, GraphQLObjectType, GraphQLSchema } from 'graphql';
import { directiveApplications, directiveNames } from '../cost/cost-directives.js';
import type { Annotated } from '../cost/cost-directives.js';

/**
 * Where a subscription operation could be charged: the schema coordinates of
 * every `@tokenBucket` a subscription can reach (on the subscription root, its
 * fields, and every type and field below them, interfaces included). Empty
 * when the schema has no subscription root or no subscription is ever priced.
 */
export function subscriptionAnnotations(schema: GraphQLSchema): string[] {
  const root = schema.getSubscriptionType();
  if (!root) return [];
  const found: string[] = [];
  const names = directiveNames(schema).read.tokenBucket;
  const seen = new Set<GraphQLNamedType>();
  const queue: GraphQLNamedType[] = [root];
  const visit = (type: GraphQLNamedType): void => {
    if (!seen.has(type)) {
      seen.add(type);
      queue.push(type);
    }
  };
  for (let type = queue.shift(); type !== undefined; type = queue.shift()) {
    if (isUnionType(type)) {
      type.getTypes().forEach(visit);
      continue;
    }
    if (!isObjectType(type) && !isInterfaceType(type)) continue;
    if (annotated(schema, type, names)) found.push(type.name);
    for (const field of Object.values(type.getFields())) {
      if (annotated(schema, field, names)) found.push(`${type.name}.${field.name}`);
      visit(getNamedType(field.type));
    }
    (type as GraphQLObjectType | GraphQLInterfaceType).getInterfaces().forEach(visit);
    if (isInterfaceType(type)) schema.getPossibleTypes(type).forEach(visit);
  }
  return found;
}

/** Whether `node` has a `@tokenBucket` under one of `names`, in any form the cost model reads (one it cannot read fails the model's start-up first). */
function annotated(schema: GraphQLSchema, node: Annotated, names: readonly string[]): boolean {
  try {
    return names.some((name) => directiveApplications(schema, node, name, 'tokenBucket').length > 0);
  } catch {
    return true;
  }
}

/** Schemas whose graphql-ws subscriptions a `tokenBucketSubscriptions` limits, in this process. */
const limitedOverWebSockets = new WeakSet<GraphQLSchema>();

/** Called by `tokenBucketSubscriptions` for the schema it serves. */
export function markSubscriptionsLimited(schema: GraphQLSchema): void {
  limitedOverWebSockets.add(schema);
}

/** Whether a `tokenBucketSubscriptions` whose schema is a function (it may serve any) was made in this process. */
let limitedLazily = false;

/** Called by `tokenBucketSubscriptions` given its schema as a function. */
export function markSubscriptionsLimitedLazily(): void {
  limitedLazily = true;
}

/** Whether a `tokenBucketSubscriptions` was made for this schema in this process, or one that may serve it. */
export function subscriptionsLimited(schema: GraphQLSchema): boolean {
  return limitedOverWebSockets.has(schema) || limitedLazily;
}
