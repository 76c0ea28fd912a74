// A code-first resolver: @Directive puts @tokenBucket on the fields, where the limiter reads it.
import { setTimeout as sleep } from 'node:timers/promises';
import { Args, Directive, Field, ID, Int, ObjectType, Query, Resolver, Subscription } from '@nestjs/graphql';

@ObjectType()
export class Book {
  @Field(() => ID)
  id!: string;

  @Field(() => String)
  title!: string;
}

const books: Book[] = Array.from({ length: 50 }, (_, i) => ({ id: String(i + 1), title: `Book ${i + 1}` }));

@Resolver(() => Book)
export class BooksResolver {
  // Each book costs 1 of "api": `first` says how many.
  @Query(() => [Book])
  @Directive('@tokenBucket(name: "api")')
  books(@Args('first', { type: () => Int, defaultValue: 10 }) first: number): Book[] {
    return books.slice(0, Math.max(0, first));
  }

  @Query(() => [Book])
  @Directive('@tokenBucket(name: "search", cost: 1)')
  search(@Args('term', { type: () => String }) term: string): Book[] {
    return books.filter((book) => book.title.includes(term));
  }

  @Subscription(() => String, { resolve: (clock: string) => clock })
  @Directive('@tokenBucket(name: "live", cost: 1)')
  async *clock(): AsyncGenerator<string> {
    for (;;) {
      yield new Date().toISOString();
      await sleep(1000);
    }
  }
}
