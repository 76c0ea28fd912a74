import { getNamedType, getNullableType, isInterfaceType, isListType, isObjectType, isUnionType } from 'graphql';
import type { GraphQLField, GraphQLInterfaceType, GraphQLNamedType, GraphQLObjectType, GraphQLSchema } from 'graphql';
import { directiveApplications, directiveNames } from '../cost/cost-directives.js';
import type { Annotated } from '../cost/cost-directives.js';

/**
 * Where a subscription operation could be charged: the schema coordinates of
 * every `@tokenBucket` a subscription can reach (on the subscription root, its
 * fields, and every type and field below them, interfaces included). Empty
 * when the schema has no subscription root or no subscription is ever priced.
 */
export function subscriptionAnnotations(schema: GraphQLSchema): string[] {
  const names = directiveNames(schema).read.tokenBucket;
  const found: string[] = [];
  forEachSubscriptionElement(schema, (type, field) => {
    if (field === undefined ? annotated(schema, type, names) : annotated(schema, field, names)) found.push(field === undefined ? type.name : `${type.name}.${field.name}`);
  });
  return found;
}

/**
 * Calls `each` with every object and interface type a subscription can reach
 * (the subscription root first, through unions, interfaces and their
 * implementations), then with each of its fields.
 */
function forEachSubscriptionElement(
  schema: GraphQLSchema,
  each: (type: GraphQLObjectType | GraphQLInterfaceType, field?: GraphQLField<unknown, unknown>) => void,
): void {
  const root = schema.getSubscriptionType();
  if (!root) return;
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
    each(type);
    for (const field of Object.values(type.getFields())) {
      each(type, field);
      visit(getNamedType(field.type));
    }
    type.getInterfaces().forEach(visit);
    if (isInterfaceType(type)) schema.getPossibleTypes(type).forEach(visit);
  }
}

/**
 * What a subscription's events carry that is priced by size but, with
 * `chargeEachEvent` off, charged only once, when the subscription starts:
 * the list fields a subscription reaches (its root fields included), when a
 * bucket rule (`@tokenBucket` or `rules`, as `coordinates`) is among the
 * types and fields it reaches. Empty when events carry no list or nothing a
 * subscription reaches is charged.
 */
export function unchargedEventLists(schema: GraphQLSchema, coordinates: readonly string[]): string[] {
  const reached = new Set<string>();
  const lists: string[] = [];
  forEachSubscriptionElement(schema, (type, field) => {
    const coordinate = field === undefined ? type.name : `${type.name}.${field.name}`;
    reached.add(coordinate);
    if (field !== undefined && isListType(getNullableType(field.type))) lists.push(coordinate);
  });
  return coordinates.some((coordinate) => reached.has(coordinate)) ? lists : [];
}

/** The start-up warning of an adapter (`owner`) that does not charge each event, when `unchargedEventLists` finds any. */
export function warnOfUnchargedEvents(schema: GraphQLSchema, coordinates: readonly string[], logger: { warn(message: string): void }, owner: string): void {
  const lists = unchargedEventLists(schema, coordinates);
  if (lists.length === 0) return;
  const where = lists.length > 3 ? `${lists.slice(0, 3).join(', ')} and ${lists.length - 3} more` : lists.join(', ');
  logger.warn(
    `graphql-token-bucket: ${owner} charges a subscription once, when it starts (chargeEachEvent is false), but its events carry lists (${where}) ` +
      'whose size the schema prices: the work of each event is not charged. Set chargeEachEvent: true to charge every event as it is sent.',
  );
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
