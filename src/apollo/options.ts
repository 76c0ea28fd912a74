import type { BaseContext, GraphQLRequestContext } from '@apollo/server';
import type { LimiterOptions } from '../core/options.js';

/**
 * The Apollo Server plugin's options: `identify` is given the request
 * context (`contextValue`, `request.http`, …) and the bucket.
 */
export type TokenBucketPluginOptions<TContext extends BaseContext = BaseContext> = LimiterOptions<GraphQLRequestContext<TContext>>;
