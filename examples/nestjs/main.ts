// NestJS 12 with @nestjs/graphql 14 and the Apollo driver (docs/nestjs.md):
// `npx tsc -p examples/nestjs && node examples/nestjs/dist/examples/nestjs/main.js`.
// Type-checked and run by `npm test`.
import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module.js';

const app = await NestFactory.create(AppModule, { logger: ['error', 'warn'] });
const port = Number(process.env.PORT ?? 4000);
await app.listen(port);
console.log(`ready at http://localhost:${port}/graphql and ws://localhost:${port}/graphql`);
