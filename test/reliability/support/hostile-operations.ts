// A fast-check generated corpus of hostile operations against the hostile
// schema: random selections (aliases, fragments, inline fragments on
// interfaces and unions, @skip/@include on literals and variables, sizes
// that are huge, negative, null, missing or invalid, in literals and in
// variables; Int, Float, BigInt and String sizes), plus crafted extremes:
// thousands of aliases, lists of lists, nesting as deep as graphql-js parses,
// exponential fragment fan-out, long fragment chains, variables nested
// deeper than graphql-js coerces, introspection.
import fc from 'fast-check';
import { parse } from 'graphql';

export interface HostileOperation {
  /** What kind of hostility, for the figures. */
  kind: string;
  query: string;
  variables: Record<string, unknown>;
  /** The request body as text, for variables JSON.stringify cannot write (it recurses); sent on its own. */
  body?: string;
}

type TypeName = 'Query' | 'Mutation' | 'Item' | 'Tag' | 'Node' | 'Owner' | 'Page';

type SizeType = 'Int' | 'Float' | 'BigInt' | 'String';

interface FieldSpec {
  name: string;
  /** Slicing arguments the field takes. */
  sizes: readonly ('first' | 'last')[];
  /** Their type; Int unless said. */
  sizeType?: SizeType;
  /** Fixed arguments always passed. */
  fixed?: string;
  returns: TypeName | null;
}

const FIELDS: Record<TypeName, readonly FieldSpec[]> = {
  Query: [
    { name: 'items', sizes: ['first', 'last'], returns: 'Item' },
    { name: 'item', sizes: [], fixed: 'id: "1"', returns: 'Item' },
    { name: 'search', sizes: ['first'], fixed: 'term: "x"', returns: 'Item' },
    { name: 'nodes', sizes: ['first'], returns: 'Node' },
    { name: 'page', sizes: ['first'], returns: 'Page' },
    { name: 'echo', sizes: [], fixed: 'text: "hi"', returns: null },
    { name: 'matrix', sizes: ['first'], returns: 'Item' },
    { name: 'byFloat', sizes: ['first'], sizeType: 'Float', returns: 'Item' },
    { name: 'byBig', sizes: ['first'], sizeType: 'BigInt', returns: 'Item' },
    { name: 'byString', sizes: ['first'], sizeType: 'String', returns: 'Item' },
    { name: 'scores', sizes: ['first'], returns: null },
    { name: '__typename', sizes: [], returns: null },
  ],
  Mutation: [
    { name: 'touch', sizes: ['first'], returns: 'Item' },
    { name: '__typename', sizes: [], returns: null },
  ],
  Item: [
    { name: 'id', sizes: [], returns: null },
    { name: 'name', sizes: [], returns: null },
    { name: 'children', sizes: ['first'], returns: 'Node' },
    { name: 'tags', sizes: ['first'], returns: 'Tag' },
    { name: 'owner', sizes: [], returns: 'Owner' },
  ],
  Tag: [
    { name: 'id', sizes: [], returns: null },
    { name: 'label', sizes: [], returns: null },
    { name: 'children', sizes: ['first'], returns: 'Node' },
  ],
  Node: [
    { name: 'id', sizes: [], returns: null },
    { name: '__typename', sizes: [], returns: null },
    { name: 'children', sizes: ['first'], returns: 'Node' },
  ],
  Owner: [{ name: '__typename', sizes: [], returns: null }],
  Page: [
    { name: 'items', sizes: [], returns: 'Item' },
    { name: 'total', sizes: [], returns: null },
  ],
};

/** Object types a type's inline fragments may name. */
const INLINE: Partial<Record<TypeName, readonly TypeName[]>> = { Node: ['Item', 'Tag'], Owner: ['Item', 'Tag'], Item: ['Node'], Tag: ['Node'] };
/** Named fragments: F0 on Item, F1 on Node (which may spread F0); where each may be spread. */
const SPREADS: Partial<Record<TypeName, readonly number[]>> = { Item: [0, 1], Tag: [1], Node: [0, 1], Owner: [0, 1] };

type Size =
  | { kind: 'absent' }
  | { kind: 'literal'; text: string }
  | { kind: 'variable'; type: SizeType; value: unknown };
type Condition = { directive: 'skip' | 'include'; value: boolean | 'missing'; viaVariable: boolean } | null;
type Plan =
  | { kind: 'field'; spec: FieldSpec; sizes: Size[]; condition: Condition; sub: Plan[] }
  | { kind: 'inline'; on: TypeName | null; condition: Condition; sub: Plan[] }
  | { kind: 'spread'; fragment: number; condition: Condition };

const sizeArb: fc.Arbitrary<Size> = fc.oneof(
  { weight: 3, arbitrary: fc.constant<Size>({ kind: 'absent' }) },
  { weight: 4, arbitrary: fc.integer({ min: 0, max: 4 }).map<Size>((v) => ({ kind: 'literal', text: String(v) })) },
  { weight: 2, arbitrary: fc.constantFrom('2147483647', '-1', '-2147483648', 'null', '1000').map<Size>((text) => ({ kind: 'literal', text })) },
  {
    weight: 3,
    arbitrary: fc
      .oneof(
        { weight: 6, arbitrary: fc.integer({ min: 0, max: 4 }) },
        { weight: 4, arbitrary: fc.constantFrom<unknown>(2147483647, -1, -2147483648, null, undefined) },
        // Not an Int: the request fails variable coercion (400), after the plugin has priced it.
        { weight: 1, arbitrary: fc.constantFrom<unknown>(1e20, 2.5, '3') },
      )
      .map<Size>((value) => ({ kind: 'variable', type: 'Int', value })),
  },
);

/** Sizes of the other types: fractions, BigInts written as numbers and strings, numeric and other strings. */
const typedSizeArbs: Record<Exclude<SizeType, 'Int'>, fc.Arbitrary<Size>> = {
  Float: fc.oneof(
    fc.constant<Size>({ kind: 'absent' }),
    fc.constantFrom('2.5', '0.5', '3.999', '-1.5', 'null', '1e3', '4').map<Size>((text) => ({ kind: 'literal', text })),
    fc.constantFrom<unknown>(2.5, 0.4, -3, null, 1e9, 7).map<Size>((value) => ({ kind: 'variable', type: 'Float', value })),
  ),
  BigInt: fc.oneof(
    fc.constant<Size>({ kind: 'absent' }),
    fc.constantFrom('4', '"7"', '0', '-2', '"50000"', '9007199254740993').map<Size>((text) => ({ kind: 'literal', text })),
    fc.constantFrom<unknown>('12', 3, '-4', '0').map<Size>((value) => ({ kind: 'variable', type: 'BigInt', value })),
  ),
  String: fc.oneof(
    fc.constant<Size>({ kind: 'absent' }),
    fc.constantFrom('"3"', '"many"', '"2.5"', '""', '"-1"', '"1e2"').map<Size>((text) => ({ kind: 'literal', text })),
    fc.constantFrom<unknown>('4', 'x', '0.5', null).map<Size>((value) => ({ kind: 'variable', type: 'String', value })),
  ),
};

/** One selection in five carries @skip or @include; a few name a variable the request leaves out. */
const conditionArb: fc.Arbitrary<Condition> = fc.oneof(
  { weight: 4, arbitrary: fc.constant<Condition>(null) },
  {
    weight: 1,
    arbitrary: fc.record({
      directive: fc.constantFrom<'skip' | 'include'>('skip', 'include'),
      value: fc.oneof({ weight: 40, arbitrary: fc.boolean() }, { weight: 1, arbitrary: fc.constant<'missing'>('missing') }),
      viaVariable: fc.boolean(),
    }),
  },
);

const selectionCache = new Map<string, fc.Arbitrary<Plan[]>>();

/** Up to 4 selections on `type`, nested at most `depth` levels further. */
function selectionArb(type: TypeName, depth: number): fc.Arbitrary<Plan[]> {
  const cacheKey = `${type}/${depth}`;
  const cached = selectionCache.get(cacheKey);
  if (cached !== undefined) return cached;
  const options: fc.Arbitrary<Plan>[] = [];
  for (const spec of FIELDS[type]) {
    if (spec.returns !== null && depth <= 0) continue;
    options.push(
      fc.record({
        kind: fc.constant<'field'>('field'),
        spec: fc.constant(spec),
        sizes: fc.tuple(...spec.sizes.map(() => (spec.sizeType === undefined || spec.sizeType === 'Int' ? sizeArb : typedSizeArbs[spec.sizeType]))),
        condition: conditionArb,
        sub: spec.returns === null ? fc.constant<Plan[]>([]) : selectionArb(spec.returns, depth - 1),
      }),
    );
  }
  if (depth > 0) {
    for (const on of INLINE[type] ?? []) {
      options.push(fc.record({ kind: fc.constant<'inline'>('inline'), on: fc.constant(on), condition: conditionArb, sub: selectionArb(on, depth - 1) }));
    }
    options.push(fc.record({ kind: fc.constant<'inline'>('inline'), on: fc.constant(null), condition: conditionArb, sub: selectionArb(type, depth - 1) }));
  }
  for (const fragment of SPREADS[type] ?? []) {
    options.push(fc.record({ kind: fc.constant<'spread'>('spread'), fragment: fc.constant(fragment), condition: conditionArb }));
  }
  const arbitrary = fc.array(fc.oneof(...options), { minLength: 1, maxLength: 4 });
  selectionCache.set(cacheKey, arbitrary);
  return arbitrary;
}

interface RandomOperation {
  mutation: boolean;
  root: Plan[];
  fragments: [Plan[], Plan[]];
}

const randomOperationArb: fc.Arbitrary<RandomOperation> = fc.record({
  mutation: fc.integer({ min: 0, max: 9 }).map((n) => n === 0),
  query: selectionArb('Query', 4),
  mutationRoot: selectionArb('Mutation', 4),
  fragments: fc.tuple(selectionArb('Item', 2), selectionArb('Node', 2)),
}).map(({ mutation, query, mutationRoot, fragments }) => ({ mutation, root: mutation ? mutationRoot : query, fragments }));

/** Turns plans into GraphQL text, declaring exactly the variables and fragments used. */
class Printer {
  private readonly declarations: string[] = [];
  readonly variables: Record<string, unknown> = {};
  private aliases = 0;
  private readonly used = new Set<number>();
  /** The fragment being printed: a spread of itself (or, in F0, of F1, which may spread F0) would be a cycle. */
  private inside: number | null = null;

  constructor(private readonly fragments: readonly [Plan[], Plan[]]) {}

  operation(mutation: boolean, root: Plan[]): string {
    const body = this.selections(root);
    const fragmentText: string[] = [];
    // F1 may spread F0, so F1 is printed first to learn whether F0 is needed.
    if (this.used.has(1)) fragmentText.push(`fragment F1 on Node ${this.inFragment(1)}`);
    if (this.used.has(0)) fragmentText.push(`fragment F0 on Item ${this.inFragment(0)}`);
    const header = `${mutation ? 'mutation' : 'query'} Hostile${this.declarations.length > 0 ? `(${this.declarations.join(', ')})` : ''}`;
    return [`${header} ${body}`, ...fragmentText].join('\n');
  }

  private inFragment(fragment: 0 | 1): string {
    this.inside = fragment;
    const text = this.selections(this.fragments[fragment]);
    this.inside = null;
    return text;
  }

  private selections(plans: readonly Plan[]): string {
    return `{ ${plans.map((plan) => this.selection(plan)).join(' ')} }`;
  }

  private selection(plan: Plan): string {
    const directive = this.condition(plan.condition);
    switch (plan.kind) {
      case 'field': {
        const args = [plan.spec.fixed, ...plan.spec.sizes.map((name, i) => this.size(name, plan.sizes[i]!))].filter(Boolean);
        const alias = plan.spec.returns !== null || args.length > 0 ? `f${(this.aliases += 1)}: ` : '';
        const sub = plan.spec.returns === null ? '' : ` ${this.selections(plan.sub)}`;
        return `${alias}${plan.spec.name}${args.length > 0 ? `(${args.join(', ')})` : ''}${directive}${sub}`;
      }
      case 'inline':
        return `...${plan.on === null ? '' : ` on ${plan.on}`}${directive} ${this.selections(plan.sub)}`;
      case 'spread':
        if (this.inside === 0 || this.inside === plan.fragment) return `__typename${directive}`;
        this.used.add(plan.fragment);
        return `...F${plan.fragment}${directive}`;
    }
  }

  private size(name: string, size: Size): string | undefined {
    switch (size.kind) {
      case 'absent':
        return undefined;
      case 'literal':
        return `${name}: ${size.text}`;
      case 'variable': {
        const variable = `v${this.declarations.length}`;
        this.declarations.push(`$${variable}: ${size.type}`);
        if (size.value !== undefined) this.variables[variable] = size.value;
        return `${name}: $${variable}`;
      }
    }
  }

  private condition(condition: Condition): string {
    if (condition === null) return '';
    if (!condition.viaVariable && condition.value !== 'missing') return ` @${condition.directive}(if: ${condition.value})`;
    const variable = `b${this.declarations.length}`;
    this.declarations.push(`$${variable}: Boolean!`);
    if (condition.value !== 'missing') this.variables[variable] = condition.value;
    return ` @${condition.directive}(if: $${variable})`;
  }
}

function printRandom(op: RandomOperation): HostileOperation {
  const printer = new Printer(op.fragments);
  const query = printer.operation(op.mutation, op.root);
  return { kind: op.mutation ? 'random mutation' : 'random query', query, variables: printer.variables };
}

/** Thousands of aliases of one field. */
const aliasBombArb: fc.Arbitrary<HostileOperation> = fc
  .record({
    count: fc.integer({ min: 1_000, max: 5_000 }),
    field: fc.constantFrom('item { id }', 'items(first: 1) { id }', 'search(term: "x") { id }', 'echo(text: "x")', 'items(first: 2147483647) { id }', 'nodes { __typename }'),
  })
  .map(({ count, field }) => ({
    kind: `${count} aliases`,
    query: `{ ${Array.from({ length: count }, (_, i) => `a${i}: ${field}`).join(' ')} }`,
    variables: {},
  }));

/** `children` nested `depth` times with one size everywhere, as a literal or a variable. */
const deepArb: fc.Arbitrary<HostileOperation> = fc
  .record({
    depth: fc.integer({ min: 3, max: 40 }),
    size: fc.constantFrom<unknown>(0, 1, 2, 3, 2147483647, -1, null, undefined),
    viaVariable: fc.boolean(),
  })
  .map(({ depth, size, viaVariable }) => {
    const arg = size === undefined ? '' : viaVariable ? '(first: $n)' : `(first: ${size === null ? 'null' : String(size)})`;
    let inner = '{ id }';
    for (let i = 0; i < depth; i++) inner = `{ id children${arg} ${inner} }`;
    return {
      kind: `nesting ${depth} deep`,
      query: `query Deep${viaVariable && size !== undefined ? '($n: Int)' : ''} { nodes${arg} ${inner} }`,
      variables: viaVariable && size !== undefined ? { n: size } : {},
    };
  });

/** Each fragment spreads the next one twice: 2^depth expansions if walked naively. */
const fanOutArb: fc.Arbitrary<HostileOperation> = fc.integer({ min: 5, max: 30 }).map((depth) => {
  const fragments = Array.from({ length: depth }, (_, i) =>
    i === depth - 1 ? `fragment G${i} on Item { id }` : `fragment G${i} on Item { a: owner { ...G${i + 1}Owner } b: owner { ...G${i + 1}Owner } }`,
  );
  const owners = Array.from({ length: depth - 1 }, (_, i) => `fragment G${i + 1}Owner on Owner { ... on Item { ...G${i + 1} } }`);
  return { kind: `fragment fan-out, depth ${depth}`, query: [`{ item { ...G0 } }`, ...fragments, ...owners].join('\n'), variables: {} };
});

/** Lists of lists: every level of `matrix` multiplies. */
const matrixArb: fc.Arbitrary<HostileOperation> = fc
  .record({ rows: fc.constantFrom('0', '1', '5', '100', '2147483647', '-1', 'null'), children: fc.constantFrom('0', '2', '50') })
  .map(({ rows, children }) => ({
    kind: 'list of lists',
    query: `{ m: matrix(first: ${rows}) { id children(first: ${children}) { id } } s: scores(first: ${children}) }`,
    variables: {},
  }));

/** The deepest operation graphql-js's parser takes here (Apollo Server parses deeper in its stack: it may refuse, with a 400). */
function parseLimit(build: (depth: number) => string): number {
  let deepest = 1;
  for (let step = 4096; step >= 1; step = Math.floor(step / 2)) {
    try {
      parse(build(deepest + step));
      deepest += step;
    } catch {
      // too deep for the parser
    }
  }
  return deepest;
}

/**
 * `children` nested as deep as graphql-js parses. The inner sizes are 0, so
 * execution stays shallow (graphql-js's own recursion is not the limiter's
 * to test) while pricing walks every level; or huge, so the operation is
 * priced and denied.
 */
function deepToTheLimit(): HostileOperation[] {
  const build = (size: string) => (depth: number) => `{ nodes(first: 1) { ${'children(first: SIZE) { '.repeat(depth).replaceAll('SIZE', size)}id${' }'.repeat(depth)} } }`;
  return ['0', '2147483647'].flatMap((size) => {
    const limit = parseLimit(build(size));
    return [limit, limit - 200, 1000].map((depth) => ({ kind: `nesting to the parse limit (${depth})`, query: build(size)(depth), variables: {} }));
  });
}

/** Fragment C0 spreads C1 … spreads C(n-1): graphql-js validates chains up to a few hundred long. */
const chainArb: fc.Arbitrary<HostileOperation> = fc.integer({ min: 10, max: 600 }).map((n) => {
  const fragments = Array.from({ length: n }, (_, i) =>
    i === n - 1 ? `fragment C${i} on Item { id children(first: 2) { id } }` : `fragment C${i} on Item { id owner { ... on Item { ...C${i + 1} } } }`,
  );
  return { kind: `fragment chain ${n} long`, query: [`{ items(first: 2) { ...C0 } }`, ...fragments].join('\n'), variables: {} };
});

/** An input object variable nested deeper than graphql-js coerces: Apollo Server answers 400. */
function deepVariable(): HostileOperation {
  const depth = 20_000;
  let value: Record<string, unknown> = { n: 1 };
  for (let i = 0; i < depth; i++) value = { inner: value };
  const query = 'query DeepVariable($v: Nested) { nested(input: $v) }';
  const body = `{"query":${JSON.stringify(query)},"variables":{"v":${'{"inner":'.repeat(depth)}{"n":1}${'}'.repeat(depth)}}}`;
  return { kind: `variable nested ${depth} deep`, query, variables: { v: value }, body };
}

const INTROSPECTION: readonly HostileOperation[] = [
  '{ __schema { types { name fields { name type { name ofType { name ofType { name } } } } } } }',
  '{ __schema { types { name fields { name args { name type { name } } } interfaces { name } possibleTypes { name } } } }',
  '{ __type(name: "Item") { name fields { name type { name fields { name type { name fields { name } } } } } } }',
  '{ __schema { queryType { name } } items { id } }',
  '{ __typename }',
  '{ a: __schema { types { name } } b: __schema { types { name } } c: __schema { types { name } } }',
].map((query) => ({ kind: 'introspection', query, variables: {} }));

/** The corpus: `random` random operations and a few dozen crafted ones, reproducible from `seed`. */
export function hostileCorpus(seed: number, random: number): HostileOperation[] {
  return [
    ...fc.sample(randomOperationArb, { numRuns: random, seed }).map(printRandom),
    ...fc.sample(aliasBombArb, { numRuns: 12, seed: seed + 1 }),
    ...fc.sample(deepArb, { numRuns: 24, seed: seed + 2 }),
    ...fc.sample(fanOutArb, { numRuns: 8, seed: seed + 3 }),
    ...fc.sample(matrixArb, { numRuns: 12, seed: seed + 4 }),
    ...fc.sample(chainArb, { numRuns: 8, seed: seed + 5 }),
    ...deepToTheLimit(),
    deepVariable(),
    ...INTROSPECTION,
  ];
}

/** Splits operations into HTTP requests: mostly single, some batches of 2 to 5. */
export function intoRequests<T>(operations: readonly T[], seed: number): T[][] {
  const sizes = fc.sample(fc.oneof({ weight: 3, arbitrary: fc.constant(1) }, { weight: 2, arbitrary: fc.integer({ min: 2, max: 5 }) }), {
    numRuns: operations.length,
    seed,
  });
  const requests: T[][] = [];
  for (let at = 0, i = 0; at < operations.length; i++) {
    const n = sizes[i] ?? 1;
    requests.push(operations.slice(at, at + n));
    at += n;
  }
  return requests;
}
