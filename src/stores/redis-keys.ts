import { createHash } from 'node:crypto';
import type { TokenBucket } from '../token-bucket.js';

/** Default prefix of every Redis key the store writes. */
export const DEFAULT_PREFIX = 'tb:';

/** Identities kept as they are in a key: short, and free of `{`, `}` and `#`. */
const PLAIN_IDENTITY = /^[A-Za-z0-9._:@/+=-]{1,40}$/;

/** The longest key part an identity can become. */
export const MAX_IDENTITY_PART = 42;

/**
 * The hash-tagged part of a key for one identity. Short plain identities are
 * kept readable; anything else becomes `#` and 132 bits of SHA-256 over its
 * UTF-16 code units (so lone surrogates stay distinct). A plain identity
 * never contains `#`, so the two forms cannot collide, and the braces make
 * every bucket of one identity share a Redis Cluster hash slot.
 */
export function identityTag(identity: string): string {
  if (PLAIN_IDENTITY.test(identity)) return `{${identity}}`;
  const digest = createHash('sha256').update(identity, 'utf16le').digest('base64url');
  return `{#${digest.slice(0, 22)}}`;
}

/** A UTF-16 surrogate without its pair: every client sends it as U+FFFD, so two such prefixes would share keys. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

export function validatePrefix(prefix: unknown): string {
  if (typeof prefix !== 'string' || prefix.length > 64 || /[{}]/.test(prefix) || LONE_SURROGATE.test(prefix)) {
    throw new RangeError(
      `RedisStore prefix must be a string of at most 64 characters without braces or lone surrogates, got ${JSON.stringify(prefix)}`,
    );
  }
  return prefix;
}

/** `prefix{identity}bucket`: at most prefix + 42 + 64 characters. */
export function redisKey(prefix: string, tag: string, bucket: TokenBucket): string {
  return prefix + tag + bucket.name;
}
