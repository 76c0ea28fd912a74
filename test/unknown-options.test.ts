// SPEC §6 "Since 0.4": every adapter's options object rejects a key it does
// not know with a TypeError naming it and the valid options, so a misspelt
// option cannot silently do nothing.
import { makeExecutableSchema } from '@graphql-tools/schema';
import { describe, expect, it } from 'vitest';
import { useTokenBucket } from '../src/envelop/index.js';
import { tokenBucketSubscriptions } from '../src/graphql-ws/index.js';
import { MemoryStore, Rate, TokenBucket, tokenBucketDirectiveTypeDefs, tokenBucketPlugin } from '../src/index.js';

const schema = makeExecutableSchema({ typeDefs: `${tokenBucketDirectiveTypeDefs} type Query { a: Int @tokenBucket(name: "api", cost: 1) }` });
const valid = { store: new MemoryStore(), buckets: [new TokenBucket('api', 10, Rate.perSecond(1))], identify: () => 'x' };

const LIMITER = ['store', 'buckets', 'identify', 'rules', 'defaultListSize', 'onStoreError', 'storeTimeoutMs', 'chargeIntrospection', 'reportCost', 'refundUnusedCost', 'costHeader', 'rateLimitHeaders', 'measure', 'denyCache', 'meterProvider'];

const ADAPTERS = [
  { owner: 'tokenBucketPlugin', make: (extra: object) => tokenBucketPlugin({ ...valid, ...extra }), own: {}, options: LIMITER },
  { owner: 'useTokenBucket', make: (extra: object) => useTokenBucket({ ...valid, ...extra }), own: { chargeEachEvent: true, logger: console }, options: [...LIMITER, 'chargeEachEvent', 'logger'] },
  {
    owner: 'tokenBucketSubscriptions',
    make: (extra: object) => tokenBucketSubscriptions({ ...valid, schema, ...extra }),
    own: { chargeEachEvent: true, logger: console },
    options: [...LIMITER, 'chargeEachEvent', 'schema', 'logger'],
  },
];

describe.each(ADAPTERS)('$owner', ({ owner, make, own, options }) => {
  it('rejects a misspelt option with a TypeError naming it, the option it resembles and every valid one', () => {
    const thrown = (() => {
      try {
        make({ refundUnusedCosts: true });
      } catch (error) {
        return error;
      }
      return undefined;
    })();
    expect(thrown).toBeInstanceOf(TypeError);
    const { message } = thrown as TypeError;
    expect(message).toMatch(new RegExp(`^${owner} has no option "refundUnusedCosts" \\(did you mean "refundUnusedCost"\\?\\); its options are `));
    expect(message.slice(message.indexOf('its options are ') + 'its options are '.length).split(', ').sort()).toEqual([...options].sort());
  });

  it.each([
    [{ reportCosts: true }, '"reportCosts" (did you mean "reportCost"?)'],
    [{ ReportCost: true }, '"ReportCost" (did you mean "reportCost"?)'],
    [{ onStoreErrors: 'deny' }, '"onStoreErrors" (did you mean "onStoreError"?)'],
    [{ identity: () => 'x' }, '"identity" (did you mean "identify"?)'],
    [{ prefix: 'x' }, '"prefix";'],
    [{ cost: undefined }, '"cost";'],
  ])('rejects %o', (extra, named) => {
    expect(() => make(extra)).toThrow(TypeError);
    expect(() => make(extra)).toThrow(`${owner} has no option ${named}`);
  });

  it('takes every option it names', () => {
    expect(() => make(own)).not.toThrow();
  });
});
