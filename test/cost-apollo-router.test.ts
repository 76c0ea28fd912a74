// The estimate and the response's price against Apollo Router's own cost
// tests: every expectation comparable without federation (51 of them) is
// reproduced exactly. Apollo Router's fixtures are under the Elastic License,
// so they are read from a checkout beside this one
// (`../shared/fixtures/apollo-router-cost`, or APOLLO_ROUTER_COST_FIXTURES),
// never copied here; without them this file is skipped.
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { buildSchema, getOperationAST, parse, validate } from 'graphql';
import { describe, expect, it } from 'vitest';
import { CostModel, tokenBucketDirectiveTypeDefs } from '../src/index.js';

const directory = process.env['APOLLO_ROUTER_COST_FIXTURES'] ?? resolve(import.meta.dirname, '..', '..', 'shared', 'fixtures', 'apollo-router-cost');
const present = existsSync(join(directory, 'cases.json'));

interface Case {
  id: string;
  schema: string;
  query?: string;
  queryText?: string;
  variables: Record<string, unknown>;
  listSize: number;
  estimated: number;
  actual?: number;
  response?: string;
  comparableWithoutFederation: boolean;
}

const read = (file: string): string => readFileSync(join(directory, file), 'utf8');
const cases: Case[] = present ? (JSON.parse(read('cases.json')) as Case[]).filter((c) => c.comparableWithoutFederation) : [];

/** The schema with its root types' whole complexity charged to one bucket, `cost`, as Apollo Router's number is one operation's. */
function schemaOf(file: string) {
  const sdl = `${read(file)}\n${tokenBucketDirectiveTypeDefs}`;
  const plain = buildSchema(sdl, { assumeValidSDL: true });
  const roots = [plain.getQueryType(), plain.getMutationType(), plain.getSubscriptionType()].flatMap((t) => (t ? [`extend type ${t.name} @tokenBucket(name: "cost")`] : []));
  return buildSchema(`${sdl}\n${roots.join('\n')}`, { assumeValidSDL: true });
}

describe.skipIf(!present)("Apollo Router's cost tests", () => {
  it('are all there: 51 expectations comparable without federation', () => {
    expect(cases).toHaveLength(51);
  });

  it.each(cases.map((c) => [c.id, c] as const))('%s', (_, c) => {
    const schema = schemaOf(c.schema);
    const document = parse(c.queryText ?? read(c.query!));
    expect(validate(schema, document)).toEqual([]);
    const operation = getOperationAST(document)!;
    const model = new CostModel(schema, { defaultListSize: c.listSize });
    expect(model.costOf(document, operation, c.variables).get('cost') ?? 0).toBe(c.estimated);
    if (c.actual !== undefined && c.response !== undefined) {
      const { data } = JSON.parse(read(c.response)) as { data: unknown };
      // Apollo Router's actual cost is not capped by its estimate: compare uncapped.
      const uncapped = new Map([['cost', Number.MAX_SAFE_INTEGER]]);
      expect(model.actualCostOf(document, operation, c.variables, data, uncapped).get('cost')).toBe(c.actual);
    }
  });
});
