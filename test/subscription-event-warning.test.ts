// SPEC §6: subscription events are unpriced by default (chargeEachEvent:
// false). A schema whose subscriptions' events carry lists priced by size
// says so at start-up, on graphql-ws and GraphQL Yoga, naming the lists, so
// what is not charged is never silent; chargeEachEvent: true, a payload
// without lists or a schema that charges no subscription say nothing.
import { buildSchema } from 'graphql';
import { createYoga } from 'graphql-yoga';
import { afterEach, describe, expect, it } from 'vitest';
import { useTokenBucket } from '../src/envelop/index.js';
import { tokenBucketSubscriptions } from '../src/graphql-ws/index.js';
import { MemoryStore, Rate, TokenBucket, tokenBucketDirectiveTypeDefs } from '../src/index.js';
import type { TokenBucketRules } from '../src/index.js';
import { disposeClients, run, serveApolloWithSockets, socketClient } from './support/adapters.js';
import { captureLogger } from './support/graphql.js';

const stops: (() => Promise<void>)[] = [];
afterEach(async () => {
  await disposeClients();
  await Promise.all(stops.splice(0).map((stop) => stop()));
});

const live = new TokenBucket('live', 100, Rate.perHour(1));

const PRICED_LISTS = `${tokenBucketDirectiveTypeDefs}
  type Review { stars: Int }
  type Product { id: ID! reviews(first: Int): [Review!]! }
  type Query { product: Product }
  type Subscription { productsAdded(first: Int): [Product!]! @tokenBucket(name: "live") }`;

const WARNING =
  'graphql-token-bucket: tokenBucketSubscriptions charges a subscription once, when it starts (chargeEachEvent is false), ' +
  'but its events carry lists (Subscription.productsAdded, Product.reviews) whose size the schema prices: the work of each event is not charged. ' +
  'Set chargeEachEvent: true to charge every event as it is sent.';

function subscriptions(sdl: string, options: { chargeEachEvent?: boolean; rules?: TokenBucketRules } = {}): string[] {
  const logger = captureLogger();
  tokenBucketSubscriptions({ schema: buildSchema(sdl), store: new MemoryStore(), buckets: [live], identify: () => 'me', logger, ...options });
  return logger.warnings;
}

describe('tokenBucketSubscriptions at start-up', () => {
  it('warns, naming the lists, when events carry lists the schema prices and chargeEachEvent is false', () => {
    expect(subscriptions(PRICED_LISTS)).toEqual([WARNING]);
  });

  it('says nothing with chargeEachEvent: true', () => {
    expect(subscriptions(PRICED_LISTS, { chargeEachEvent: true })).toEqual([]);
  });

  it('says nothing when events carry no list', () => {
    const sdl = `${tokenBucketDirectiveTypeDefs} type Query { a: Int } type Subscription { clock: String! @tokenBucket(name: "live", cost: 1) }`;
    expect(subscriptions(sdl)).toEqual([]);
  });

  it('says nothing when nothing a subscription reaches is charged', () => {
    const sdl = `${tokenBucketDirectiveTypeDefs} type Query { a: Int @tokenBucket(name: "live", cost: 1) } type Subscription { ticks: [Int!]! }`;
    expect(subscriptions(sdl)).toEqual([]);
  });

  it('warns when rules, not directives, price the subscription', () => {
    const sdl = 'type Review { stars: Int } type Product { id: ID! reviews(first: Int): [Review!]! } type Query { product: Product } type Subscription { productsAdded(first: Int): [Product!]! }';
    expect(subscriptions(sdl, { rules: { Subscription: { bucket: 'live' } } })).toEqual([WARNING]);
  });

  it('given the schema as a function: warns when the schema is first met', async () => {
    const schema = buildSchema(PRICED_LISTS);
    const logger = captureLogger();
    const server = await serveApolloWithSockets({
      schema,
      logger,
      sockets: {
        ...tokenBucketSubscriptions({ store: new MemoryStore(), buckets: [live], identify: () => 'me', schema: () => schema, logger }),
        roots: { query: { product: () => ({ id: '1', reviews: [] }) } },
      },
    });
    stops.push(() => server.stop());
    expect(logger.warnings).toEqual([]);
    expect(await run(socketClient(server.wsUrl), { query: '{ product { id } }' })).toEqual({ results: [{ data: { product: { id: '1' } } }], completed: true });
    expect(logger.warnings).toEqual([WARNING]);
  });
});

describe('useTokenBucket in GraphQL Yoga at start-up', () => {
  it('warns the same way for subscriptions over SSE, and not with chargeEachEvent: true', () => {
    for (const chargeEachEvent of [false, true]) {
      const logger = captureLogger();
      createYoga({ schema: buildSchema(PRICED_LISTS), logging: false, plugins: [useTokenBucket({ store: new MemoryStore(), buckets: [live], identify: () => 'me', logger, chargeEachEvent })] });
      expect(logger.warnings).toEqual(chargeEachEvent ? [] : [WARNING.replace('tokenBucketSubscriptions', 'useTokenBucket')]);
    }
  });
});
