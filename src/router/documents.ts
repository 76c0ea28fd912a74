import { GraphQLError, parse } from 'graphql';
import type { DocumentNode } from 'graphql';

/** At most this many parsed operations are kept. */
const MAX_DOCUMENTS = 1_000;
/** And at most this many characters of them in all. */
const MAX_CHARACTERS = 4 * 1024 * 1024;

/**
 * The operations clients send, parsed once each while they are among those
 * used last (as Apollo Server's document store keeps them): the cost model
 * keeps what it learns of a document by the document, so a repeated
 * operation is priced from what it learnt the first time.
 */
export class Documents {
  private readonly parsed = new Map<string, DocumentNode>();
  private characters = 0;

  /** The parsed operation; throws graphql-js's `GraphQLError` for one it cannot parse. */
  parse(query: string): DocumentNode {
    const known = this.parsed.get(query);
    if (known !== undefined) {
      this.parsed.delete(query);
      this.parsed.set(query, known);
      return known;
    }
    const document = parse(query, { noLocation: true });
    if (query.length <= MAX_CHARACTERS) {
      this.parsed.set(query, document);
      this.characters += query.length;
      for (const oldest of this.parsed.keys()) {
        if (this.parsed.size <= MAX_DOCUMENTS && this.characters <= MAX_CHARACTERS) break;
        this.parsed.delete(oldest);
        this.characters -= oldest.length;
      }
    }
    return document;
  }
}

export function isSyntaxError(error: unknown): error is GraphQLError {
  return error instanceof GraphQLError;
}
