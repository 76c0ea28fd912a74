import type { BucketKey } from '../stores/bucket-store.js';
import { keyString } from '../stores/validate.js';
import { TokenBucket } from '../token-bucket.js';

/**
 * What `identify` returns for a bucket: whose tokens (`7`, `"7"` and `7n` are
 * the same identity), or whose tokens and the bucket of that identity's plan:
 * a `TokenBucket` of the same name with its own capacity and rate.
 */
export type Identity = BucketKey | { readonly key: BucketKey; readonly bucket: TokenBucket };

/** An identity whose key and bucket were checked. */
export interface ResolvedIdentity {
  readonly key: BucketKey;
  readonly bucket: TokenBucket;
}

/**
 * Reads what `identify` returned for `configured`. Throws a `TypeError` or
 * `RangeError` naming the bucket and what is wrong: a value that is not a key
 * (`undefined`, `null`, a symbol, `NaN`, an object that is not a plan), or a
 * plan whose bucket is not a `TokenBucket` named like the configured one (a
 * different name would charge the wrong bucket, or none).
 */
export function resolveIdentity(identity: unknown, configured: TokenBucket): ResolvedIdentity {
  if (typeof identity !== 'object' || identity === null) {
    checkKey(identity, configured, '');
    return { key: identity as BucketKey, bucket: configured };
  }
  const { key, bucket } = identity as { key?: unknown; bucket?: unknown };
  if (!('key' in identity) || !('bucket' in identity)) {
    throw new TypeError(
      `identify returned ${shown(identity)} without ${'key' in identity ? 'bucket' : 'key'} for bucket "${configured.name}", which is not an identity: ` +
        'return a key (string, number or bigint) or { key, bucket }',
    );
  }
  if (!(bucket instanceof TokenBucket)) {
    throw new TypeError(`identify returned { key, bucket } for bucket "${configured.name}" whose bucket is not a TokenBucket`);
  }
  if (bucket.name !== configured.name) {
    throw new RangeError(
      `identify returned a plan's bucket named "${bucket.name}" for bucket "${configured.name}": a plan's TokenBucket must have the name of the bucket it replaces`,
    );
  }
  checkKey(key, configured, ' as the key of a plan');
  return { key: key as BucketKey, bucket };
}

function checkKey(key: unknown, configured: TokenBucket, as: string): void {
  try {
    keyString(key as BucketKey);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    const Fault = error instanceof RangeError ? RangeError : TypeError;
    throw new Fault(`identify returned ${shown(key)}${as} for bucket "${configured.name}", which is not an identity: ${reason}`);
  }
}

/** A value that is not a key, as a log shows it: never its contents, which may be anything. */
function shown(value: unknown): string {
  switch (typeof value) {
    case 'undefined':
    case 'boolean':
    case 'number':
      return String(value);
    case 'symbol':
      return 'a symbol';
    case 'function':
      return 'a function';
    default:
      return value === null ? 'null' : Array.isArray(value) ? 'an array' : 'an object';
  }
}
