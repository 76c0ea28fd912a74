// What `npm publish` would ship, and that the built entry points load the
// way a user's Node loads them. (The SDL file's text is checked against
// `tokenBucketDirectiveTypeDefs` in directive.test.ts.)
import { execFile } from 'node:child_process';
import { copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { EXAMPLE_QUERY, compose, subgraphTypeDefs } from './support/federation.js';

const run = promisify(execFile);
const root = fileURLToPath(new URL('..', import.meta.url));

/**
 * A directory for a project of its own with no node_modules above it, where
 * Node would find packages the project does not have (another checkout's
 * /tmp/node_modules, say): the temporary directory, or the next one that qualifies.
 */
function isolatedParent(): string {
  const clean = (dir: string): boolean => {
    for (let d = resolve(dir); ; d = dirname(d)) {
      if (existsSync(join(d, 'node_modules'))) return false;
      if (dirname(d) === d) return true;
    }
  };
  const found = [tmpdir(), '/var/tmp', '/dev/shm'].find((dir) => existsSync(dir) && clean(dir));
  if (found === undefined) throw new Error(`every temporary directory has a node_modules above it (${tmpdir()}): set TMPDIR to one that has none`);
  return found;
}

let files: string[] = [];

/** The packed files under `dir`/node_modules, beside links to these packages of this checkout. */
function installPacked(dir: string, packages: readonly string[]): void {
  const pkg = join(dir, 'node_modules', 'graphql-token-bucket');
  mkdirSync(pkg, { recursive: true });
  for (const file of files) {
    mkdirSync(join(pkg, file, '..'), { recursive: true });
    cpSync(join(root, file), join(pkg, file));
  }
  for (const name of packages) {
    mkdirSync(join(dir, 'node_modules', name, '..'), { recursive: true });
    symlinkSync(join(root, 'node_modules', name), join(dir, 'node_modules', name), 'dir');
  }
}

beforeAll(async () => {
  await run('npm', ['run', 'build'], { cwd: root });
  // The build just ran; prepack would only run it again.
  const { stdout } = await run('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: root, maxBuffer: 16 * 1024 * 1024 });
  const [pack] = JSON.parse(stdout) as { files: { path: string }[] }[];
  files = pack!.files.map((f) => f.path);
}, 600_000);

/** Runs an ES module in a fresh Node process and returns what it prints. */
async function node(cwd: string, source: string): Promise<string> {
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', source], { cwd });
  return stdout.trim();
}

describe('the published package', () => {
  it('ships the built entry points, the Lua script and the directive SDL', () => {
    for (const file of [
      'dist/src/index.js',
      'dist/src/index.d.ts',
      'dist/src/client.js',
      'dist/src/client.d.ts',
      'dist/src/apollo-client.js',
      'dist/src/apollo-client.d.ts',
      'dist/src/envelop/index.js',
      'dist/src/envelop/index.d.ts',
      'dist/src/graphql-ws/index.js',
      'dist/src/graphql-ws/index.d.ts',
      'dist/src/mercurius/index.js',
      'dist/src/mercurius/index.d.ts',
      'dist/src/router/index.js',
      'dist/src/router/index.d.ts',
      'dist/src/router/cli.js',
      'lua/acquire.lua',
      'lua/floordiv.lua',
      'schema/token-bucket.graphql',
      'schema/cost.graphql',
      'package.json',
    ]) {
      expect(files).toContain(file);
    }
  });

  it('ships no tests, no TypeScript sources and nothing outside its directories', () => {
    expect(files.filter((f) => f.startsWith('test/') || f.startsWith('src/') || f.startsWith('dist/test/'))).toEqual([]);
    expect(files.filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))).toEqual([]);
    expect(files.filter((f) => !/^(dist\/src\/|lua\/|schema\/(token-bucket|cost)\.graphql$|package\.json$|README\.md$|LICENSE)/.test(f))).toEqual([]);
  });

  it('resolves the package root and ./client through its exports, as a user imports them', async () => {
    const out = await node(
      root,
      `const pkg = await import('graphql-token-bucket');
       const client = await import('graphql-token-bucket/client');
       const { isDirective } = await import('graphql');
       console.log(JSON.stringify({
         plugin: typeof pkg.tokenBucketPlugin, store: typeof pkg.RedisStore, memory: typeof pkg.MemoryStore,
         same: pkg.getRetryAfter === client.getRetryAfter,
         retryAfter: client.getRetryAfter({ errors: [{ message: 'x', extensions: { code: client.RATE_LIMITED, retryAfter: 1.5 } }] }),
         directives: [pkg.tokenBucketDirective, pkg.costDirective, pkg.listSizeDirective].map((d) => isDirective(d) && d.name),
         typeDefs: [typeof pkg.tokenBucketDirectiveTypeDefs, typeof pkg.costDirectiveTypeDefs],
       }));`,
    );
    expect(JSON.parse(out)).toEqual({
      plugin: 'function',
      store: 'function',
      memory: 'function',
      same: true,
      retryAfter: 1.5,
      // Made with the application's own graphql: one instance.
      directives: ['tokenBucket', 'cost', 'listSize'],
      typeDefs: ['string', 'string'],
    });
  });

  it('resolves ./apollo-client through its exports, as a user imports it', async () => {
    const out = await node(
      root,
      `const link = await import('graphql-token-bucket/apollo-client');
       const { ApolloLink } = await import('@apollo/client');
       console.log(JSON.stringify({
         link: link.retryAfterLink() instanceof ApolloLink,
         defaults: [link.DEFAULT_MAX_RETRIES, link.DEFAULT_MAX_WAIT_SECONDS],
       }));`,
    );
    expect(JSON.parse(out)).toEqual({ link: true, defaults: [3, 60] });
  });

  it('declares the Redis clients optional peer dependencies', () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
      peerDependencies: Record<string, string>;
      peerDependenciesMeta: Record<string, { optional?: boolean }>;
    };
    for (const name of ['ioredis', 'redis', 'iovalkey']) {
      expect(pkg.peerDependencies[name], name).toBeDefined();
      expect(pkg.peerDependenciesMeta[name], name).toEqual({ optional: true });
    }
  });

  it("declares Apollo's query planner and the federation internals it runs on optional peer dependencies", () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
      peerDependencies: Record<string, string>;
      peerDependenciesMeta: Record<string, { optional?: boolean }>;
      dependencies: Record<string, string>;
    };
    for (const name of ['@apollo/query-planner', '@apollo/federation-internals']) {
      expect(pkg.peerDependencies[name], name).toBe('^2.7.0');
      expect(pkg.peerDependenciesMeta[name], name).toEqual({ optional: true });
      expect(Object.keys(pkg.dependencies)).not.toContain(name);
    }
  });

  it('loads the query planner on first use only, never as an import', () => {
    for (const file of files.filter((f) => f.endsWith('.js'))) {
      const source = readFileSync(join(root, file), 'utf8');
      expect(source, file).not.toMatch(/from\s*['"]@apollo\/(query-planner|federation-internals|gateway)['"]/);
    }
  });

  it('declares @apollo/client 4 an optional peer dependency', () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
      peerDependencies: Record<string, string>;
      peerDependenciesMeta: Record<string, { optional?: boolean }>;
      dependencies: Record<string, string>;
    };
    expect(pkg.peerDependencies['@apollo/client']).toBe('^4.0.0');
    expect(pkg.peerDependenciesMeta['@apollo/client']).toEqual({ optional: true });
    expect(Object.keys(pkg.dependencies)).not.toContain('@apollo/client');
  });

  it('builds the Apollo Client link from @apollo/client and the client helpers only', () => {
    const source = readFileSync(join(root, 'dist/src/apollo-client.js'), 'utf8');
    const specifiers = [...source.matchAll(/^\s*(?:import|export)\b[^'"]*?from\s*['"]([^'"]+)['"]/gm)].map((m) => m[1]);
    expect(specifiers.sort()).toEqual(['./client.js', '@apollo/client/errors', '@apollo/client/link', '@apollo/client/utilities']);
    expect(source).not.toMatch(/\bimport\s*\(|\brequire\s*\(/);
  });

  it('loads and retries with only @apollo/client in reach: no server code, no rxjs or graphql of its own', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gtb-apollo-client-'));
    try {
      copyFileSync(join(root, 'dist/src/apollo-client.js'), join(dir, 'apollo-client.js'));
      copyFileSync(join(root, 'dist/src/client.js'), join(dir, 'client.js'));
      writeFileSync(join(dir, 'package.json'), '{ "type": "module" }');
      // Apollo Client finds its own dependencies beside its real path; the link finds nothing else.
      mkdirSync(join(dir, 'node_modules', '@apollo'), { recursive: true });
      symlinkSync(join(root, 'node_modules', '@apollo', 'client'), join(dir, 'node_modules', '@apollo', 'client'), 'dir');
      const out = await node(
        dir,
        `import { createServer } from 'node:http';
         import { ApolloClient, ApolloLink, HttpLink, InMemoryCache, gql } from '@apollo/client';
         import { retryAfterLink } from './apollo-client.js';
         let requests = 0;
         const server = createServer((req, res) => {
           requests += 1;
           req.resume().on('end', () => {
             const refused = requests === 1;
             res.writeHead(refused ? 429 : 200, { 'content-type': 'application/graphql-response+json' });
             res.end(JSON.stringify(refused
               ? { errors: [{ message: 'Rate limit exceeded', extensions: { code: 'RATE_LIMITED', retryAfter: 0.05 } }] }
               : { data: { ping: 1 } }));
           });
         });
         await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
         const uri = 'http://127.0.0.1:' + server.address().port + '/';
         const client = new ApolloClient({ cache: new InMemoryCache(), link: ApolloLink.from([retryAfterLink(), new HttpLink({ uri })]) });
         const { data } = await client.query({ query: gql\`{ ping }\`, fetchPolicy: 'no-cache' });
         server.close();
         console.log(JSON.stringify({ data, requests }));`,
      );
      expect(JSON.parse(out)).toEqual({ data: { ping: 1 }, requests: 2 });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('loads the built client alone, with no other file and no node_modules in reach', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gtb-client-'));
    try {
      copyFileSync(join(root, 'dist/src/client.js'), join(dir, 'client.js'));
      writeFileSync(join(dir, 'package.json'), '{ "type": "module" }');
      const out = await node(
        dir,
        `import { getRetryAfter } from './client.js';
         console.log(JSON.stringify([
           getRetryAfter({ errors: [{ message: 'x', extensions: { code: 'RATE_LIMITED', retryAfter: null } }] }),
           getRetryAfter({ graphQLErrors: [{ message: 'x', extensions: { code: 'RATE_LIMITED', retryAfter: 2 } }] }),
         ]));`,
      );
      expect(JSON.parse(out)).toEqual([null, 2]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('resolves ./envelop and ./graphql-ws through its exports', async () => {
    const out = await node(
      root,
      `const envelop = await import('graphql-token-bucket/envelop');
       const ws = await import('graphql-token-bucket/graphql-ws');
       console.log(JSON.stringify([typeof envelop.useTokenBucket, typeof ws.tokenBucketSubscriptions, envelop.DEFAULT_CHARGE_EACH_EVENT, ws.DEFAULT_CHARGE_EACH_EVENT]));`,
    );
    expect(JSON.parse(out)).toEqual(['function', 'function', false, false]);
  });

  it('resolves ./mercurius through its exports', async () => {
    const out = await node(root, `const m = await import('graphql-token-bucket/mercurius'); console.log(JSON.stringify([typeof m.mercuriusTokenBucket, m.DEFAULT_CHARGE_EACH_EVENT]));`);
    expect(JSON.parse(out)).toEqual(['function', false]);
  });

  it('serves ./mercurius with only graphql, its own dependency, mercurius and fastify installed', async () => {
    // A project of its own, as the test below: Mercurius and Fastify find
    // their own dependencies beside their real paths; nothing else is in reach.
    const dir = mkdtempSync(join(isolatedParent(), 'gtb-mercurius-'));
    try {
      installPacked(dir, ['graphql', '@graphql-tools/utils', 'mercurius', 'fastify']);
      writeFileSync(join(dir, 'package.json'), '{ "type": "module" }');
      const out = await node(
        dir,
        `const absent = [];
         for (const name of ['@apollo/server', '@envelop/core', 'graphql-ws', 'ioredis', 'redis', 'iovalkey', '@opentelemetry/api']) {
           try { await import(name); } catch (error) { if (error.code === 'ERR_MODULE_NOT_FOUND') absent.push(name); }
         }
         const { default: Fastify } = await import('fastify');
         const { default: mercurius } = await import('mercurius');
         const pkg = await import('graphql-token-bucket');
         const { mercuriusTokenBucket } = await import('graphql-token-bucket/mercurius');
         const app = Fastify();
         await app.register(mercurius, { schema: pkg.tokenBucketDirectiveTypeDefs + ' type Query { a: Int @tokenBucket(name: "a", cost: 1) }', resolvers: { Query: { a: () => 1 } } });
         await app.register(mercuriusTokenBucket, { store: new pkg.MemoryStore(), buckets: [new pkg.TokenBucket('a', 1, pkg.Rate.perHour(1))], identify: () => 'me' });
         const answers = [];
         for (let i = 0; i < 2; i++) {
           const response = await app.inject({ method: 'POST', url: '/graphql', payload: { query: '{ a }' } });
           answers.push([response.statusCode, response.json().errors?.[0]?.extensions?.code ?? 'ok']);
         }
         await app.close();
         console.log(JSON.stringify({ absent, answers }));`,
      );
      expect(JSON.parse(out)).toEqual({
        absent: ['@apollo/server', '@envelop/core', 'graphql-ws', 'ioredis', 'redis', 'iovalkey', '@opentelemetry/api'],
        answers: [
          [200, 'ok'],
          [429, 'RATE_LIMITED'],
        ],
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('type-checks and runs in a CommonJS TypeScript project ("module": "nodenext"), every entry point required', async () => {
    // A NestJS application is such a project. This package is an ES module:
    // its typings see @apollo/server's ESM declarations where the project
    // sees the CommonJS ones, whose HeaderMap is another class; and Node
    // requires it only from 20.19 and 22.12 on (engines).
    const dir = mkdtempSync(join(isolatedParent(), 'gtb-commonjs-'));
    try {
      installPacked(dir, [
        'graphql', '@graphql-tools/utils', '@apollo/server', '@apollo/client', '@envelop/core', 'graphql-ws', 'mercurius', 'fastify', 'ws',
        '@nestjs/apollo', '@nestjs/graphql', '@nestjs/common', '@nestjs/core', 'reflect-metadata', '@types/node', '@types/ws',
      ]);
      writeFileSync(join(dir, 'package.json'), '{ "type": "commonjs" }');
      writeFileSync(
        join(dir, 'tsconfig.json'),
        JSON.stringify({
          compilerOptions: { module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', strict: true, skipLibCheck: true, esModuleInterop: true, types: ['node'], outDir: 'out' },
          files: ['main.ts'],
        }),
      );
      writeFileSync(
        join(dir, 'main.ts'),
        `import { ApolloServer } from '@apollo/server';
import { ApolloDriver } from '@nestjs/apollo';
import type { ApolloDriverConfig } from '@nestjs/apollo';
import { GraphQLModule } from '@nestjs/graphql';
import { envelop, useSchema } from '@envelop/core';
import Fastify from 'fastify';
import mercurius from 'mercurius';
import { buildSchema } from 'graphql';
import { makeServer } from 'graphql-ws';
import { MemoryStore, Rate, TokenBucket, tokenBucketDirectiveTypeDefs, tokenBucketPlugin } from 'graphql-token-bucket';
import { getRetryAfter } from 'graphql-token-bucket/client';
import { retryAfterLink } from 'graphql-token-bucket/apollo-client';
import { useTokenBucket } from 'graphql-token-bucket/envelop';
import { tokenBucketSubscriptions } from 'graphql-token-bucket/graphql-ws';
import { mercuriusTokenBucket } from 'graphql-token-bucket/mercurius';

const typeDefs = tokenBucketDirectiveTypeDefs + ' type Query { a: Int @tokenBucket(name: "api", cost: 1) }';
const schema = buildSchema(typeDefs);
const limits = { store: new MemoryStore(), buckets: [new TokenBucket('api', 1, Rate.perHour(1))], identify: () => 'me' };
// The context type is inferred from Apollo Server's, as in an ES module.
new ApolloServer<{ userId: string }>({ typeDefs, plugins: [tokenBucketPlugin({ ...limits, identify: ({ contextValue }) => contextValue.userId })] });
GraphQLModule.forRoot<ApolloDriverConfig>({ driver: ApolloDriver, typeDefs, plugins: [tokenBucketPlugin(limits)] });
envelop({ plugins: [useSchema(schema), useTokenBucket(limits)] });
makeServer({ schema, ...tokenBucketSubscriptions({ ...limits, schema: () => schema }) });

async function main(): Promise<void> {
  const app = Fastify();
  await app.register(mercurius, { schema: typeDefs, resolvers: { Query: { a: () => 1 } } });
  await app.register(mercuriusTokenBucket, limits);
  const statuses: number[] = [];
  for (let i = 0; i < 2; i++) statuses.push((await app.inject({ method: 'POST', url: '/graphql', payload: { query: '{ a }' } })).statusCode);
  await app.close();
  const retryAfter = getRetryAfter({ errors: [{ message: 'x', extensions: { code: 'RATE_LIMITED', retryAfter: 2 } }] });
  console.log(JSON.stringify({ statuses, retryAfter, link: typeof retryAfterLink() }));
}
void main();
`,
      );
      await run(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', dir]).catch((error: { stdout?: string }) => {
        throw new Error(`tsc failed:\n${error.stdout ?? String(error)}`);
      });
      const { stdout } = await run(process.execPath, [join(dir, 'out', 'main.js')], { cwd: dir });
      expect(JSON.parse(stdout)).toEqual({ statuses: [200, 429], retryAfter: 2, link: 'object' });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 300_000);

  it('says in engines the Node versions that can require() it', () => {
    // require() of an ES module needs Node 20.19 or 22.12; no CommonJS build
    // is shipped, so that two copies of the package cannot meet in one process.
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { engines: Record<string, string> };
    expect(pkg.engines).toEqual({ node: '^20.19.0 || >=22.12.0' });
  });

  it("records metrics with the user's @opentelemetry/api, through a MeterProvider registered after the limiter was made", async () => {
    const out = await node(
      root,
      `const pkg = await import('graphql-token-bucket');
       const { tokenBucketSubscriptions } = await import('graphql-token-bucket/graphql-ws');
       const { buildSchema } = await import('graphql');
       const { metrics } = await import('@opentelemetry/api');
       const { MeterProvider, MetricReader } = await import('@opentelemetry/sdk-metrics');
       const schema = buildSchema(pkg.tokenBucketDirectiveTypeDefs + ' type Query { a: Int @tokenBucket(name: "a", cost: 1) }');
       const hooks = tokenBucketSubscriptions({ schema, store: new pkg.MemoryStore(), buckets: [new pkg.TokenBucket('a', 1, pkg.Rate.perHour(1))], identify: () => 'me' });
       class Reader extends MetricReader { async onForceFlush() {} async onShutdown() {} }
       const reader = new Reader();
       metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }));
       const ctx = { connectionParams: {}, extra: {} };
       await hooks.onSubscribe(ctx, '1', { query: '{ a }' });
       await hooks.onSubscribe(ctx, '2', { query: '{ a }' });
       const { resourceMetrics } = await reader.collect();
       const counter = resourceMetrics.scopeMetrics.find((s) => s.scope.name === 'graphql-token-bucket').metrics.find((m) => m.descriptor.name === 'graphql.token_bucket.decisions');
       console.log(JSON.stringify(counter.dataPoints.map((p) => [p.attributes['graphql.token_bucket.result'], p.value]).sort()));`,
    );
    expect(JSON.parse(out)).toEqual([
      ['allowed', 1],
      ['denied', 1],
    ]);
  });

  it('loads the root, ./envelop and ./graphql-ws with only graphql and its own dependency installed', async () => {
    // A project of its own: the packed files under node_modules, beside graphql
    // and @graphql-tools/utils only (no @apollo/server, @envelop/core,
    // graphql-ws, ioredis, redis, iovalkey or @opentelemetry/api anywhere Node looks): the
    // decisions below record no metrics, and fail for none.
    const dir = mkdtempSync(join(isolatedParent(), 'gtb-peers-'));
    try {
      installPacked(dir, ['graphql', '@graphql-tools/utils']);
      writeFileSync(join(dir, 'package.json'), '{ "type": "module" }');
      const out = await node(
        dir,
        `const absent = [];
         for (const name of ['@apollo/server', '@envelop/core', 'graphql-ws', 'ioredis', 'redis', 'iovalkey', '@opentelemetry/api']) {
           try { await import(name); } catch (error) { if (error.code === 'ERR_MODULE_NOT_FOUND') absent.push(name); }
         }
         const { buildSchema } = await import('graphql');
         const pkg = await import('graphql-token-bucket');
         const { useTokenBucket } = await import('graphql-token-bucket/envelop');
         const { tokenBucketSubscriptions } = await import('graphql-token-bucket/graphql-ws');
         const schema = buildSchema(pkg.tokenBucketDirectiveTypeDefs + ' type Query { a: Int } type Subscription { s: Int @tokenBucket(name: "s", cost: 1) }');
         const options = { store: new pkg.MemoryStore(), buckets: [new pkg.TokenBucket('s', 1, pkg.Rate.perHour(1))], identify: () => 'me' };
         const plugin = pkg.tokenBucketPlugin(options);
         const yoga = useTokenBucket(options);
         const hooks = tokenBucketSubscriptions({ ...options, schema });
         // Two subscriptions over one graphql-ws context: the second finds the bucket empty.
         const ctx = { connectionParams: {}, extra: {} };
         const first = await hooks.onSubscribe(ctx, '1', { query: 'subscription { s }' });
         const second = await hooks.onSubscribe(ctx, '2', { query: 'subscription { s }' });
         console.log(JSON.stringify({
           absent,
           plugin: typeof plugin.requestDidStart, envelop: typeof yoga.onExecute,
           first: first ?? 'admitted', second: second.map((e) => e.extensions.code),
         }));`,
      );
      expect(JSON.parse(out)).toEqual({
        absent: ['@apollo/server', '@envelop/core', 'graphql-ws', 'ioredis', 'redis', 'iovalkey', '@opentelemetry/api'],
        plugin: 'function',
        envelop: 'function',
        first: 'admitted',
        second: ['RATE_LIMITED'],
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('serves ./router and runs the graphql-token-bucket-router command with only graphql and its own dependency installed', async () => {
    const dir = mkdtempSync(join(isolatedParent(), 'gtb-router-'));
    try {
      installPacked(dir, ['graphql', '@graphql-tools/utils']);
      writeFileSync(join(dir, 'package.json'), '{ "type": "module" }');
      const pkg = join(dir, 'node_modules', 'graphql-token-bucket');
      const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { bin: Record<string, string> };
      const bin = join(pkg, manifest.bin['graphql-token-bucket-router']!);
      expect(readFileSync(bin, 'utf8').startsWith('#!/usr/bin/env node\n')).toBe(true);
      const help = await run(process.execPath, [bin, '--help'], { cwd: dir });
      expect(help.stdout).toMatch(/^Usage: graphql-token-bucket-router --config <module>/);
      const sdl = compose(subgraphTypeDefs(), { products: 'http://p', reviews: 'http://r', inventory: 'http://i' });
      const out = await node(
        dir,
        `const absent = [];
         for (const name of ['@apollo/server', '@envelop/core', 'graphql-ws', 'ioredis', 'redis', 'iovalkey', '@opentelemetry/api']) {
           try { await import(name); } catch (error) { if (error.code === 'ERR_MODULE_NOT_FOUND') absent.push(name); }
         }
         const http = await import('node:http');
         const { MemoryStore, TokenBucket, Rate } = await import('graphql-token-bucket');
         const { routerCoprocessor } = await import('graphql-token-bucket/router');
         const handler = routerCoprocessor({ store: new MemoryStore(), buckets: [new TokenBucket('api', 30, Rate.perHour(1))], identify: () => 'me' });
         const server = http.createServer(handler).listen(0, '127.0.0.1');
         await new Promise((resolve) => server.once('listening', resolve));
         const payload = { version: 1, stage: 'SupergraphRequest', control: 'continue', id: 'a', headers: {}, body: { query: '{ products(first: 3) { id price } }' }, context: { entries: {} }, sdl: ${JSON.stringify(sdl)} };
         const controls = [];
         for (let i = 0; i < 3; i++) {
           const response = await fetch('http://127.0.0.1:' + server.address().port, { method: 'POST', body: JSON.stringify(payload) });
           controls.push((await response.json()).control);
         }
         server.close();
         console.log(JSON.stringify({ absent, controls }));`,
      );
      // 3 × (a product 1 + its price 3) = 12 tokens each: two fit in 30.
      expect(JSON.parse(out)).toEqual({
        absent: ['@apollo/server', '@envelop/core', 'graphql-ws', 'ioredis', 'redis', 'iovalkey', '@opentelemetry/api'],
        controls: ['continue', 'continue', { break: 429 }],
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("prices a supergraph without Apollo's query planner installed: by the bound, saying why", async () => {
    const sdl = compose(subgraphTypeDefs(), { products: 'http://products', reviews: 'http://reviews', inventory: 'http://inventory' });
    const dir = mkdtempSync(join(isolatedParent(), 'gtb-no-planner-'));
    try {
      const pkg = join(dir, 'node_modules', 'graphql-token-bucket');
      mkdirSync(pkg, { recursive: true });
      for (const file of files) {
        mkdirSync(join(pkg, file, '..'), { recursive: true });
        cpSync(join(root, file), join(pkg, file));
      }
      mkdirSync(join(dir, 'node_modules', '@graphql-tools'), { recursive: true });
      symlinkSync(join(root, 'node_modules', 'graphql'), join(dir, 'node_modules', 'graphql'), 'dir');
      symlinkSync(join(root, 'node_modules', '@graphql-tools', 'utils'), join(dir, 'node_modules', '@graphql-tools', 'utils'), 'dir');
      writeFileSync(join(dir, 'package.json'), '{ "type": "module" }');
      const out = await node(
        dir,
        `const absent = [];
         for (const name of ['@apollo/query-planner', '@apollo/federation-internals', '@apollo/gateway']) {
           try { await import(name); } catch (error) { if (error.code === 'ERR_MODULE_NOT_FOUND') absent.push(name); }
         }
         const { parse, getOperationAST } = await import('graphql');
         const { CostModel, supergraphPricing } = await import('graphql-token-bucket');
         const source = supergraphPricing(${JSON.stringify(sdl)});
         const model = new CostModel(source.schema, { ...source, rules: new Map([['Query', [{ bucket: 'api', cost: null }]]]) });
         const document = parse(${JSON.stringify(EXAMPLE_QUERY)});
         console.log(JSON.stringify({ absent, plans: source.plans === undefined, why: source.withoutPlans, cost: model.costOf(document, getOperationAST(document), {}).get('api') }));`,
      );
      const answer = JSON.parse(out) as { absent: string[]; plans: boolean; why: string; cost: number };
      expect(answer.absent).toEqual(['@apollo/query-planner', '@apollo/federation-internals', '@apollo/gateway']);
      expect(answer.plans).toBe(true);
      expect(answer.why).toMatch(/Cannot find module '@apollo\/query-planner'/);
      // The bound on this graph is its plan: 3 × 23 (see test/support/federation.ts).
      expect(answer.cost).toBe(69);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
