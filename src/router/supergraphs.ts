import { createHash } from 'node:crypto';
import type { GraphQLSchema } from 'graphql';
import { describeError } from '../core/errors.js';
import type { Limiter } from '../core/limiter.js';
import type { Logger } from '../core/options.js';
import { supergraphPricing } from '../cost/federation.js';
import type { RouterRequest } from './options.js';

/** How many distinct supergraphs are kept built: the Router's current one, and those of Routers not yet updated. */
export const MAX_SUPERGRAPHS = 4;

/** A supergraph SDL the Router sent, as the limiter prices operations against it. */
export type Supergraph =
  /** `schema` keys its model in the limiter. */
  | { readonly kind: 'accepted'; readonly hash: string; readonly schema: GraphQLSchema }
  /** It failed the limiter's checks (logged once): operations against it are answered RATE_LIMITER_UNAVAILABLE. */
  | { readonly kind: 'refused'; readonly hash: string };

/**
 * Every supergraph SDL is built into a cost model once, priced as Apollo
 * Gateway's plugin prices its `coreSupergraphSdl` — save that each object
 * costs the most of its plans under every setting of the progressive
 * overrides' labels, which the Router sets per request — and kept while it
 * is among the `MAX_SUPERGRAPHS` used last. The Router sends the whole SDL
 * with every payload; the response stage may find it again by its SHA-256.
 */
export class Supergraphs {
  private readonly bySdl = new Map<string, Supergraph>();
  private readonly byHash = new Map<string, Supergraph>();

  constructor(
    private readonly limiter: Limiter<RouterRequest>,
    private readonly logger: Logger,
  ) {}

  of(sdl: string): Supergraph {
    let supergraph = this.bySdl.get(sdl);
    if (supergraph !== undefined) {
      // Used last: out last.
      this.bySdl.delete(sdl);
      this.bySdl.set(sdl, supergraph);
      return supergraph;
    }
    supergraph = this.build(sdl);
    this.bySdl.set(sdl, supergraph);
    this.byHash.set(supergraph.hash, supergraph);
    for (const [oldest, evicted] of this.bySdl) {
      if (this.bySdl.size <= MAX_SUPERGRAPHS) break;
      this.bySdl.delete(oldest);
      this.byHash.delete(evicted.hash);
    }
    return supergraph;
  }

  /** A supergraph still kept, by the SHA-256 of its SDL. */
  withHash(hash: string): Supergraph | undefined {
    return this.byHash.get(hash);
  }

  private build(sdl: string): Supergraph {
    const hash = createHash('sha256').update(sdl).digest('hex');
    try {
      // The Router draws each progressive override's label anew per request (and a coprocessor or Rhai script may set any): every setting of them is priced.
      const source = supergraphPricing(sdl, { overrideLabels: 'both' });
      this.limiter.load(source.schema, source);
      this.limiter.warnIfUnlimited(source.schema, this.logger);
      return { kind: 'accepted', hash, schema: source.schema };
    } catch (error) {
      this.logger.error(
        `graphql-token-bucket: the Router's supergraph (SHA-256 ${hash.slice(0, 12)}…) was not accepted; operations against it are answered RATE_LIMITER_UNAVAILABLE until the Router sends one that passes the checks: ${describeError(error)}`,
      );
      return { kind: 'refused', hash };
    }
  }
}
