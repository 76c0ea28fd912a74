// NestJS applications as a NestJS user writes them (@nestjs/graphql with the
// Apollo driver, code-first and schema-first), limited by tokenBucketPlugin
// over HTTP and tokenBucketSubscriptions over graphql-ws.
import 'reflect-metadata';
import { ApolloDriver } from '@nestjs/apollo';
import type { ApolloDriverConfig } from '@nestjs/apollo';
import { DefaultValuePipe, Injectable, Module, UseGuards } from '@nestjs/common';
import type { CanActivate, ExecutionContext, MiddlewareConsumer, NestMiddleware, NestModule } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { INestApplication } from '@nestjs/common';
import { Args, Context, Directive, Field, GqlExecutionContext, GraphQLModule, ID, Int, ObjectType, Query, Resolver, Subscription } from '@nestjs/graphql';
import type { Request, Response, NextFunction } from 'express';
import type { GraphQLSchema } from 'graphql';
import type { Context as SocketContext } from 'graphql-ws';
import { tokenBucketSubscriptions } from '../../src/graphql-ws/index.js';
import { Rate, TokenBucket, tokenBucketDirectiveTypeDefs, tokenBucketPlugin } from '../../src/index.js';
import type { BucketStore, TokenBucketRules } from '../../src/index.js';

export const buckets = {
  api: new TokenBucket('api', 100, Rate.perHour(1)),
  search: new TokenBucket('search', 10, Rate.perHour(1)),
  live: new TokenBucket('live', 2, Rate.perHour(1)),
};

/** Every resolver that ran. */
export const runs: string[] = [];

/** What a request carries once the application knows who sent it. */
export interface AuthenticatedRequest extends Request {
  user?: { id: string };
}

/** The GraphQL context the context factory builds: the request, and the user read from it. */
export interface RequestContext {
  req: AuthenticatedRequest;
  user: string | undefined;
}

const books = Array.from({ length: 30 }, (_, i) => ({ id: String(i + 1), title: `Book ${i + 1}`, pages: 100 + i }));

@ObjectType()
export class Book {
  @Field(() => ID)
  id!: string;

  @Field()
  title!: string;

  /** graphql-query-complexity's convention, which Nest writes into the field's extensions: its weight. */
  @Field(() => Int, { complexity: 3 })
  pages!: number;
}

/** Middleware: runs before Apollo Server, so req.user is set when identify runs. */
@Injectable()
export class UserMiddleware implements NestMiddleware {
  use(req: AuthenticatedRequest, _res: Response, next: NextFunction): void {
    const id = req.headers['x-user-id'];
    if (typeof id === 'string' && id !== '') req.user = { id };
    next();
  }
}

/** A guard that sets req.user: it runs inside the resolver's call, after the limiter has priced the operation. */
@Injectable()
export class UserGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const { req } = GqlExecutionContext.create(context).getContext<RequestContext>();
    const id = req.headers['x-guarded-user'];
    if (typeof id === 'string') req.user = { id };
    return true;
  }
}

@Resolver(() => Book)
export class BooksResolver {
  @Query(() => [Book])
  @Directive('@tokenBucket(name: "api")')
  books(@Args('first', { type: () => Int, defaultValue: 10 }) first: number): Book[] {
    runs.push(`books:${first}`);
    return books.slice(0, Math.max(0, first));
  }

  @Query(() => [Book])
  @Directive('@tokenBucket(name: "search", cost: 5)')
  search(@Args('term') term: string): Book[] {
    runs.push('search');
    return books.filter((b) => b.title.includes(term));
  }

  /** A size a pipe fills in, inside the resolver's call: the schema says it with `assumedSize`. */
  @Query(() => [Book])
  @Directive('@tokenBucket(name: "api")')
  @Directive('@listSize(assumedSize: 30, slicingArguments: ["first"], requireOneSlicingArgument: false)')
  shelf(@Args('first', { type: () => Int, nullable: true }, new DefaultValuePipe(30)) first: number): Book[] {
    runs.push(`shelf:${first}`);
    return books.slice(0, Math.max(0, first));
  }

  @Query(() => Int)
  @Directive('@tokenBucket(name: "api")')
  @Directive('@cost(weight: "7")')
  report(): number {
    runs.push('report');
    return 7;
  }

  @Query(() => String)
  @UseGuards(UserGuard)
  @Directive('@tokenBucket(name: "api", cost: 1)')
  whoami(@Context() context: RequestContext): string {
    runs.push('whoami');
    return context.req.user?.id ?? 'nobody';
  }

  @Subscription(() => Int, { resolve: (n: number) => n })
  @Directive('@tokenBucket(name: "live", cost: 1)')
  ticks(): AsyncIterator<number> {
    runs.push('ticks');
    return (async function* () {
      yield 1;
      yield 2;
    })();
  }
}

/** The same schema, written as SDL (schema-first). */
export const typeDefs = `${tokenBucketDirectiveTypeDefs}
type Book { id: ID! title: String! }
type Query {
  books(first: Int = 10): [Book!]! @tokenBucket(name: "api")
  search(term: String!): [Book!]! @tokenBucket(name: "search", cost: 5)
}
`;

@Resolver('Query')
export class SchemaFirstResolver {
  @Query('books')
  books(@Args('first') first: number): Book[] {
    runs.push(`books:${first}`);
    return books.slice(0, Math.max(0, first));
  }

  @Query('search')
  search(@Args('term') term: string): Book[] {
    runs.push('search');
    return books.filter((b) => b.title.includes(term));
  }
}

/** A plain code-first resolver with no directive: priced by `rules`. */
@Resolver(() => Book)
export class UnannotatedResolver {
  @Query(() => [Book])
  books(@Args('first', { type: () => Int, defaultValue: 10 }) first: number): Book[] {
    runs.push(`books:${first}`);
    return books.slice(0, Math.max(0, first));
  }
}

export interface NestAppOptions {
  store: BucketStore;
  /** More providers: `@Plugin()` classes Nest adds to Apollo Server's plugins, after the driver's `plugins`. */
  providers?: (new (...args: never[]) => unknown)[];
  /** `code-first` (default), `schema-first`, or `rules` (code-first, no directive). */
  form?: 'code-first' | 'schema-first' | 'rules';
  /** Serve subscriptions over graphql-ws, limited by tokenBucketSubscriptions. */
  subscriptions?: boolean;
  rules?: TokenBucketRules;
}

export interface NestApp {
  app: INestApplication;
  /** `http://127.0.0.1:<port>/graphql` */
  url: string;
  /** `ws://127.0.0.1:<port>/graphql` */
  wsUrl: string;
  /** What `identify` was given, per call. */
  identified: { user: string | undefined; guardedUser: string | undefined }[];
}

/** Builds and starts a NestJS application on a free port. */
export async function startNestApp(options: NestAppOptions): Promise<NestApp> {
  const identified: NestApp['identified'] = [];
  const form = options.form ?? 'code-first';
  const limits = { store: options.store, buckets: Object.values(buckets), ...(options.rules ? { rules: options.rules } : {}) };
  // Nest builds the schema itself: tokenBucketSubscriptions reads it once it exists.
  let schema: GraphQLSchema | undefined;

  @Module({
    imports: [
      GraphQLModule.forRoot<ApolloDriverConfig>({
        driver: ApolloDriver,
        ...(form === 'schema-first' ? { typeDefs } : { autoSchemaFile: true }),
        // Identity from the context factory: what middleware put on the request.
        context: ({ req }: { req: AuthenticatedRequest }): RequestContext => ({ req, user: req?.user?.id }),
        transformSchema: (built: GraphQLSchema) => (schema = built),
        plugins: [
          tokenBucketPlugin<RequestContext>({
            ...limits,
            identify: ({ contextValue }, bucket) => {
              identified.push({ user: contextValue.user, guardedUser: contextValue.req.user?.id });
              if (contextValue.user === undefined) throw new Error(`no user for bucket ${bucket.name}`);
              return contextValue.user;
            },
          }),
        ],
        ...(options.subscriptions
          ? {
              subscriptions: {
                'graphql-ws': tokenBucketSubscriptions<Record<string, unknown> | undefined>({
                  ...limits,
                  schema: () => {
                    if (schema === undefined) throw new Error('the schema is not built yet');
                    return schema;
                  },
                  identify: (ctx: SocketContext<Record<string, unknown> | undefined>) => String(ctx.connectionParams?.['user']),
                }),
              },
            }
          : {}),
      }),
    ],
    providers: [...(form === 'schema-first' ? [SchemaFirstResolver] : form === 'rules' ? [UnannotatedResolver] : [BooksResolver, UserGuard]), ...(options.providers ?? [])],
  })
  class AppModule implements NestModule {
    configure(consumer: MiddlewareConsumer): void {
      consumer.apply(UserMiddleware).forRoutes('*path');
    }
  }

  const app = await NestFactory.create(AppModule, { logger: false });
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as { port: number };
  return { app, url: `http://127.0.0.1:${port}/graphql`, wsUrl: `ws://127.0.0.1:${port}/graphql`, identified };
}
