import type { GraphQLError, GraphQLErrorExtensions, SourceLocation } from 'graphql';

/**
 * How Mercurius answers an error a hook throws: its error formatter turns
 * it into a GraphQL error with the thrown error's `extensions`, and a
 * request with no data takes the HTTP status of that error's `statusCode`
 * (as with `mercurius.ErrorWithProps`). A `GraphQLError` thrown as it is
 * would answer 200, so the limiter's errors travel in this shape, keeping
 * their message, extensions and locations.
 */
export class MercuriusRefusal extends Error {
  readonly extensions: GraphQLErrorExtensions;
  readonly statusCode: number;
  readonly nodes: GraphQLError['nodes'];
  readonly source: GraphQLError['source'];
  readonly positions: GraphQLError['positions'];
  readonly path: GraphQLError['path'];
  readonly locations: readonly SourceLocation[] | undefined;

  constructor(error: GraphQLError, statusCode: number) {
    super(error.message);
    this.name = 'MercuriusRefusal';
    // `http` says the status to Apollo Server and Yoga; Mercurius would send it.
    const extensions = { ...error.extensions };
    delete extensions['http'];
    this.extensions = extensions;
    this.statusCode = statusCode;
    this.nodes = error.nodes;
    this.source = error.source;
    this.positions = error.positions;
    this.path = error.path;
    this.locations = error.locations;
  }
}
