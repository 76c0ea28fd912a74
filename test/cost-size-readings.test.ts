// SPEC §2, "Since 0.4: sizes, every standard reading": a size is never
// below `Number(v)`, `parseFloat(v)` or `parseInt(v)` of the value — of a
// string, of what an object converts to, of a list's first element — tried
// through a real Apollo Server whose resolvers make as many rows as they
// read, the charge reported next to the rows they made.
import fc from 'fast-check';
import { GraphQLError, GraphQLScalarType } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tokenBucketDirectiveTypeDefs } from '../src/directive.js';
import { MemoryStore, Rate, TokenBucket } from '../src/index.js';
import type { ResponseBody } from './support/graphql.js';
import { serveLimited } from './support/limited-servers.js';
import type { LimitedServer } from './support/limited-servers.js';

/** Rows a resolver makes at most; past it, the resolver refuses with the number it read (the charge is then checked against that). */
const MOST_ROWS = 20_000;

const READINGS = {
  NUMBER: (value: unknown) => Number(value),
  PARSE_FLOAT: (value: unknown) => Number.parseFloat(String(value)),
  PARSE_INT: (value: unknown) => Number.parseInt(String(value)),
} as const;
type Reading = keyof typeof READINGS;

const typeDefs = `${tokenBucketDirectiveTypeDefs}
  scalar Size
  enum Reading { NUMBER PARSE_FLOAT PARSE_INT }
  type Query @tokenBucket(name: "api") {
    byString(first: String, read: Reading!): [Row]
    byFloat(first: Float, read: Reading!): [Row]
    byId(first: ID, read: Reading!): [Row]
    bySize(first: Size, read: Reading!): [Row]
  }
  type Row { n: Int }
`;

/** What a resolver reads in `first`, the way `read` says: as many rows as `Array.from({ length })` makes of it. */
function rows(_: unknown, { first, read }: { first: unknown; read: Reading }): { n: number }[] {
  const reading = READINGS[read](first);
  const length = Number.isFinite(reading) && reading > 0 ? Math.floor(reading) : 0;
  if (length > MOST_ROWS) throw new GraphQLError(`would make ${length} rows`, { extensions: { rows: length } });
  return Array.from({ length }, (_v, n) => ({ n }));
}

const resolvers = {
  // A scalar that passes whatever JSON the client sends through to the resolver.
  Size: new GraphQLScalarType({ name: 'Size', parseValue: (value) => value }),
  Query: { byString: rows, byFloat: rows, byId: rows, bySize: rows },
};

let server: LimitedServer;
let client = 0;
beforeAll(async () => {
  server = await serveLimited('Apollo Server', typeDefs, resolvers, {
    store: new MemoryStore(),
    buckets: [new TokenBucket('api', 1e15, Rate.perSecond(1e9))],
    reportCost: true,
  });
});
afterAll(() => server.stop());

interface Outcome {
  /** The charge, or null when the operation was refused before it ran. */
  readonly cost: number | null;
  /** Rows the resolver made, or would have made past `MOST_ROWS`. */
  readonly rows: number;
}

async function ask(field: string, type: string, first: unknown, read: Reading): Promise<Outcome> {
  const { status, body } = await server.post(
    { query: `query ($first: ${type}) { ${field}(first: $first, read: ${read}) { n } }`, variables: { first } },
    `client-${client++}`,
  );
  const answer = body as ResponseBody & { data?: Record<string, unknown[] | null> | null };
  if (status === 429) return { cost: null, rows: 0 };
  expect(status, JSON.stringify(body)).toBe(200);
  const report = answer.extensions?.['rateLimit'] as Record<string, { cost: number }> | undefined;
  const refused = answer.errors?.[0]?.extensions?.['rows'];
  return { cost: report?.['api']?.cost ?? 0, rows: typeof refused === 'number' ? refused : (answer.data?.[field]?.length ?? 0) };
}

describe('a size a resolver reads with parseInt', () => {
  it('charges "0x4E20 rows", "+0x4E20" and "20000e-9" for the 20,000 rows parseInt makes of them', async () => {
    for (const first of ['0x4E20 rows', '+0x4E20', '20000e-9', ' -0x0', '0X4e20!']) {
      const outcome = await ask('byString', 'String', first, 'PARSE_INT');
      expect(outcome.rows, first).toBe(Number.parseInt(first) > 0 ? 20_000 : 0);
      expect(outcome.cost, first).toBeGreaterThanOrEqual(outcome.rows);
    }
  });

  it('charges a float written with an exponent for what parseInt reads in its text', async () => {
    // String(9e-7) is "9e-7": parseInt reads 9, where Number and parseFloat read less than one.
    const outcome = await ask('byFloat', 'Float', 9e-7, 'PARSE_INT');
    expect(outcome).toEqual({ cost: 9, rows: 9 });
  });

  it("charges a list for what parseInt reads in its first element's text", async () => {
    const outcome = await ask('bySize', 'Size', ['0x4E20', 'x'], 'PARSE_INT'); // String(list) is "0x4E20,x"
    expect(outcome.rows).toBe(20_000);
    expect(outcome.cost).toBeGreaterThanOrEqual(20_000);
  });
});

/** Text a resolver may be given: each piece of the grammars of `Number`, `parseFloat` and `parseInt`, in any order. */
const numericText = fc
  .array(
    fc.oneof(
      fc.constantFrom(' ', '\t', '\n', '+', '-', '0x', '0X', '0b', '0o', '.', 'e', 'E', 'e-', 'e+', 'n', '_', ',', 'Infinity', 'rows', 'x'),
      fc.integer({ min: 0, max: 99_999 }).map(String),
      fc.constantFrom('4E20', 'ff', '1F', '7'),
    ),
    { maxLength: 6 },
  )
  .map((pieces) => pieces.join(''));

/** A value of every JSON kind, nested lists included. */
const jsonValue = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    numericText,
    fc.double({ noNaN: true }),
    fc.integer({ min: -1, max: MOST_ROWS }),
    fc.double({ min: 1e-9, max: 1e-6, noNaN: true }),
    fc.constantFrom(true, false, null, -0, 0),
    fc.array(tie('value'), { maxLength: 3 }),
    fc.dictionary(fc.constantFrom('n', 'first', 'valueOf'), tie('value'), { maxKeys: 2 }),
  ),
})).value;

const readings = fc.constantFrom<Reading>('NUMBER', 'PARSE_FLOAT', 'PARSE_INT');

describe('property: the charge is never below the rows any standard reading makes', () => {
  it('of strings, as String and as ID', async () => {
    await fc.assert(
      fc.asyncProperty(numericText, readings, fc.constantFrom(['byString', 'String'], ['byId', 'ID']), async (first, read, [field, type]) => {
        const outcome = await ask(field!, type!, first, read);
        if (outcome.cost !== null) expect(outcome.cost, `${field}(first: ${JSON.stringify(first)}) read by ${read}`).toBeGreaterThanOrEqual(outcome.rows);
      }),
      { numRuns: 120 },
    );
  }, 120_000);

  it('of floats', async () => {
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.double({ noNaN: true, noDefaultInfinity: true }), fc.double({ min: 1e-9, max: 1e-6, noNaN: true })), readings, async (first, read) => {
        const outcome = await ask('byFloat', 'Float', first, read);
        if (outcome.cost !== null) expect(outcome.cost, `byFloat(first: ${first}) read by ${read}`).toBeGreaterThanOrEqual(outcome.rows);
      }),
      { numRuns: 80 },
    );
  }, 120_000);

  it('of every JSON kind given to a scalar that passes it through', async () => {
    await fc.assert(
      fc.asyncProperty(jsonValue, readings, async (first, read) => {
        const outcome = await ask('bySize', 'Size', first, read);
        if (outcome.cost !== null) expect(outcome.cost, `bySize(first: ${JSON.stringify(first)}) read by ${read}`).toBeGreaterThanOrEqual(outcome.rows);
      }),
      { numRuns: 150 },
    );
  }, 120_000);
});
