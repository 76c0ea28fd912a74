// The NestJS recipe: tokenBucketPlugin in the Apollo driver's plugins, the
// identity from the context factory (fed by middleware, which runs before
// Apollo Server; guards run after the limiter), and subscriptions over
// graphql-ws limited with the schema Nest builds.
import { ApolloDriver } from '@nestjs/apollo';
import type { ApolloDriverConfig } from '@nestjs/apollo';
import { Module } from '@nestjs/common';
import type { MiddlewareConsumer, NestModule } from '@nestjs/common';
import { GraphQLModule } from '@nestjs/graphql';
import type { NextFunction, Request, Response } from 'express';
import type { GraphQLSchema } from 'graphql';
import type { Context } from 'graphql-ws';
import { MemoryStore, Rate, TokenBucket, tokenBucketPlugin } from '../../src/index.js';
import { tokenBucketSubscriptions } from '../../src/graphql-ws/index.js';
import { BooksResolver } from './books.resolver.js';

const buckets = [
  new TokenBucket('api', 1000, Rate.perMinute(1000)),
  // 20 searches in a burst, then one every 3 seconds, per user.
  new TokenBucket('search', 20, new Rate(1, 3000)),
  new TokenBucket('live', 10, Rate.perMinute(1)),
];
const store = new MemoryStore(); // or new RedisStore(redis) across replicas

/** Who sent the request, read before Apollo Server runs (your authentication goes here). */
function user(req: Request, _res: Response, next: NextFunction): void {
  (req as Request & { user?: string | undefined }).user = req.header('x-user-id') ?? req.ip;
  next();
}

interface GraphQLContext {
  user: string;
}

// Nest builds the schema itself: graphql-ws's limiter reads it once it exists.
let schema: GraphQLSchema | undefined;

@Module({
  imports: [
    GraphQLModule.forRoot<ApolloDriverConfig>({
      driver: ApolloDriver,
      autoSchemaFile: true,
      transformSchema: (built) => (schema = built),
      context: ({ req }: { req: Request & { user: string } }): GraphQLContext => ({ user: req?.user }),
      plugins: [tokenBucketPlugin<GraphQLContext>({ store, buckets, identify: ({ contextValue }) => contextValue.user, reportCost: true })],
      subscriptions: {
        'graphql-ws': tokenBucketSubscriptions<{ userId?: string } | undefined>({
          store,
          buckets,
          schema: () => {
            if (schema === undefined) throw new Error('the schema is not built yet');
            return schema;
          },
          identify: (ctx: Context<{ userId?: string } | undefined>) => ctx.connectionParams?.userId ?? 'anonymous',
        }),
      },
    }),
  ],
  providers: [BooksResolver],
})
export class AppModule implements NestModule {
  configure(consumer: MiddlewareConsumer): void {
    consumer.apply(user).forRoutes('*path');
  }
}
