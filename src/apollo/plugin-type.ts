import type { GraphQLSchema } from 'graphql';

/**
 * What `tokenBucketPlugin` returns: an Apollo Server plugin, declared with no
 * type of `@apollo/server` in it. This package is an ES module, so its
 * typings see `@apollo/server`'s ESM declarations; a CommonJS project
 * (`"module": "nodenext"`, a NestJS application) sees its CommonJS ones, and
 * the two `HeaderMap` classes are distinct types (each has a private member):
 * one copy's `ApolloServerPlugin` is not the other's. This shape is
 * assignable to both, and `TContext` is inferred from either's. (The plugin
 * has other hooks besides these.)
 */
export interface TokenBucketApolloPlugin<TContext = object> {
  serverWillStart(service: { readonly schema: GraphQLSchema; readonly logger: object }): Promise<{
    schemaDidLoadOrUpdate(schemaContext: { readonly apiSchema: GraphQLSchema; readonly coreSupergraphSdl?: string | undefined }): void;
  }>;
  requestDidStart(requestContext: ApolloRequestContextLike<TContext>): Promise<{
    didResolveOperation(requestContext: ApolloRequestContextLike<TContext>): Promise<void>;
    willSendResponse(requestContext: ApolloRequestContextLike<TContext>): Promise<void>;
  }>;
}

/** The part of Apollo Server's request context the declaration names: the plugin reads it as Apollo Server's own type. */
export interface ApolloRequestContextLike<TContext = object> {
  readonly request: object;
  readonly response: object;
  readonly contextValue: TContext;
}
