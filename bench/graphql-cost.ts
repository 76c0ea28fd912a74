import { Kind, buildSchema, parse, validate, visit } from 'graphql';
import type { DocumentNode, FragmentDefinitionNode, OperationDefinitionNode, SelectionSetNode } from 'graphql';
import { CostModel, tokenBucketDirectiveTypeDefs } from '../src/index.js';
import type { Benchmark, BenchReport, TargetCheck } from './benchmark.js';
import { hostileReport, runHostileBench } from './cost-hostile.js';
import { formatTable } from './benchmark.js';
import { median, timePricing } from './pricing-runs.js';

/*
 * Time of the static cost analysis (`CostModel.costOf`) in this process, on
 * operations of about a thousand fields: what the plugin adds to every
 * request before its one Redis call. The document is parsed and validated
 * once, as Apollo Server's document cache does; variables are coerced on
 * every call, as the plugin does.
 */

/** A schema with every construct the analysis handles: lists sized by arguments and `@listSize`, `@cost`, an interface, a union. */
const COST_SCHEMA = `${tokenBucketDirectiveTypeDefs}
directive @listSize(assumedSize: Int, slicingArguments: [String!], sizedFields: [String!], requireOneSlicingArgument: Boolean = true) on FIELD_DEFINITION
directive @cost(weight: String!) on ARGUMENT_DEFINITION | ENUM | FIELD_DEFINITION | INPUT_FIELD_DEFINITION | OBJECT | SCALAR

type Query @tokenBucket(name: "api") {
  items(first: Int = 10): [Item!]! @tokenBucket(name: "list", cost: 1)
  node(id: ID!): Node
  search(text: String!, first: Int): [SearchResult!]! @tokenBucket(name: "search", cost: 5)
}

interface Node { id: ID! }

type Item implements Node {
  id: ID!
  name: String!
  price: Float! @tokenBucket(name: "price", cost: 1)
  seller: User
  related(first: Int = 5): [Item!]!
  reviews: [Review!]! @listSize(assumedSize: 20)
}

type User implements Node {
  id: ID!
  name: String!
  items(first: Int): [Item!]! @tokenBucket(name: "list", cost: 1)
}

type Review implements Node {
  id: ID!
  stars: Int!
  author: User @cost(weight: "2")
}

union SearchResult = Item | User
`;

/** 1,000 aliased top-level list fields, each selecting a limited field. */
function flatOperation(aliases: number): string {
  const fields = Array.from({ length: aliases }, (_, i) => `  a${i}: items(first: ${(i % 20) + 1}) { price }`);
  return `query Flat {\n${fields.join('\n')}\n}`;
}

const NESTED_FRAGMENTS = `
fragment ItemParts on Item {
  id
  name
  price
  reviews @include(if: $withReviews) { stars author { name } }
}

fragment UserParts on User {
  id
  name
  items(first: 2) { ...ItemParts }
}`;

/** One aliased block of the nested operation: nested lists, variables, fragments, inline fragments, a union and an interface. */
function nestedBlock(i: number): string {
  return `
  b${i}: items(first: $n) {
    ...ItemParts
    related(first: ${(i % 4) + 1}) {
      id
      price
      ... on Item { seller { ...UserParts } }
    }
    seller { id name }
  }
  s${i}: search(text: "q${i}", first: 3) {
    ... on Item { id price }
    ... on User { name items(first: 2) { price } }
  }
  n${i}: node(id: "${i}") {
    id
    ... on Item { price reviews { stars } }
    ...UserParts
  }`;
}

/** Blocks of `nestedBlock` until the document holds at least `fields` field selections. */
function nestedOperation(fields: number): string {
  const blocks: string[] = [];
  for (;;) {
    blocks.push(nestedBlock(blocks.length));
    const text = `query Nested($n: Int = 5, $withReviews: Boolean = true) {${blocks.join('')}\n}\n${NESTED_FRAGMENTS}`;
    if (countFields(parse(text)) >= fields) return text;
  }
}

/** Field selections written in the document (operation and fragments). */
function countFields(document: DocumentNode): number {
  let count = 0;
  visit(document, {
    Field() {
      count++;
    },
  });
  return count;
}

/** Field selections once every fragment spread is expanded in place. */
function countExpandedFields(document: DocumentNode, operation: OperationDefinitionNode): number {
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const definition of document.definitions) {
    if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments.set(definition.name.value, definition);
  }
  const count = (selectionSet: SelectionSetNode): number => {
    let total = 0;
    for (const selection of selectionSet.selections) {
      if (selection.kind === Kind.FIELD) total += 1 + (selection.selectionSet ? count(selection.selectionSet) : 0);
      else if (selection.kind === Kind.INLINE_FRAGMENT) total += count(selection.selectionSet);
      else {
        const fragment = fragments.get(selection.name.value);
        if (fragment) total += count(fragment.selectionSet);
      }
    }
    return total;
  };
  return count(operation.selectionSet);
}

export interface CostOperationFigures {
  name: string;
  description: string;
  /** Field selections written in the document. */
  fields: number;
  /** Field selections with every fragment spread expanded. */
  expandedFields: number;
  /** What `costOf` returns, per bucket. */
  costs: Record<string, number>;
  calls: number;
  /** Wall time per call: what a request waits, descheduling by other processes included. */
  meanUs: number;
  p50Us: number;
  p99Us: number;
  maxUs: number;
  /** CPU time (user + sys) of this process per call: the work itself, robust to a busy machine. */
  cpuMeanUs: number;
  cpuP99Us: number;
}

export interface CostBenchOptions {
  /** Untimed calls first, per operation. */
  warmupCalls: number;
  /** Timed calls, per operation, unless `maxSeconds` runs out first. */
  calls: number;
  maxSeconds: number;
}

export const DEFAULT_COST_BENCH_OPTIONS: Readonly<CostBenchOptions> = { warmupCalls: 500, calls: 5000, maxSeconds: 3 };

interface CostCase {
  name: string;
  description: string;
  source: string;
  variables: Record<string, unknown>;
}

export function runCostAnalysisBench(overrides: Partial<CostBenchOptions> = {}): CostOperationFigures[] {
  const options = { ...DEFAULT_COST_BENCH_OPTIONS, ...overrides };
  const schema = buildSchema(COST_SCHEMA);
  const model = new CostModel(schema);
  const cases: CostCase[] = [
    { name: 'flat', description: '1,000 aliased list fields, each { price }', source: flatOperation(1000), variables: {} },
    {
      name: 'nested',
      description: 'aliased nested lists, fragments, inline fragments, a union, an interface, variables',
      source: nestedOperation(1000),
      variables: { n: 5, withReviews: true },
    },
  ];

  return cases.map(({ name, description, source, variables }) => {
    const document = parse(source);
    const errors = validate(schema, document);
    if (errors.length > 0) throw new Error(`cost bench operation ${name} is invalid: ${errors.map((e) => e.message).join('; ')}`);
    const operation = document.definitions.find((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION);
    if (!operation) throw new Error(`cost bench operation ${name} has no operation`);

    let costs = new Map<string, number>();
    for (let i = 0; i < options.warmupCalls; i++) costs = model.costOf(document, operation, variables);

    const samples: number[] = [];
    const cpuSamples: number[] = [];
    const deadline = performance.now() + options.maxSeconds * 1000;
    while (samples.length < options.calls && performance.now() < deadline) {
      const cpu = process.cpuUsage();
      const start = performance.now();
      model.costOf(document, operation, variables);
      samples.push((performance.now() - start) * 1000);
      const used = process.cpuUsage(cpu);
      cpuSamples.push(used.user + used.system);
    }
    return {
      name,
      description,
      fields: countFields(document),
      expandedFields: countExpandedFields(document, operation),
      costs: Object.fromEntries(costs),
      calls: samples.length,
      meanUs: mean(samples),
      p50Us: quantile(samples, 0.5),
      p99Us: quantile(samples, 0.99),
      maxUs: quantile(samples, 1),
      cpuMeanUs: mean(cpuSamples),
      cpuP99Us: quantile(cpuSamples, 0.99),
    };
  });
}

function mean(values: readonly number[]): number {
  return values.reduce((sum, v) => sum + v, 0) / values.length;
}

function quantile(values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
}

/*
 * Aliases × a fragment × distinct sizes: 2,000 aliases of a sized
 * connection, each with its own size, spreading one 2,000-field fragment of
 * sized fields. Priced per (alias, size) this is 4 million field visits;
 * the model prices the fragment once, as a function of the size. Timed
 * against graphql-js `validate` on the same document in the same run: both
 * walk the whole document once.
 */
const CONNECTION_SCHEMA = `${tokenBucketDirectiveTypeDefs}
directive @listSize(assumedSize: Int, slicingArguments: [String!], sizedFields: [String!], requireOneSlicingArgument: Boolean = true) on FIELD_DEFINITION
type Query @tokenBucket(name: "api") {
  conn(first: Int): Conn @listSize(slicingArguments: ["first"], sizedFields: ["edges"])
}
type Conn { edges(first: Int): [Edge] total: Int }
type Edge { cursor: String node: Node }
type Node { id: ID }
`;

/** `count` aliases of `conn(first: i)`, each spreading a fragment of `fields` sized fields (with sizes of their own when `ownSizes`). */
export function aliasesTimesFragment(count: number, fields: number, ownSizes: boolean): string {
  const fragment = Array.from({ length: fields }, (_, i) => `e${i}: edges${ownSizes ? `(first: ${i})` : ''} { cursor }`).join(' ');
  const aliases = Array.from({ length: count }, (_, i) => `a${i}: conn(first: ${i}) { ...F }`).join(' ');
  return `{ ${aliases} }\nfragment F on Conn { ${fragment} }`;
}

export const TARGET_PRICE_TO_VALIDATE = 3;

export interface AliasesTimesFragmentFigures {
  name: string;
  description: string;
  aliases: number;
  fragmentFields: number;
  /** Wall time of one call, per run, in ms; runs interleave validate and price on a freshly parsed document. */
  validateMs: number[];
  priceMs: number[];
  /** Median price time ÷ median validate time. */
  ratio: number;
  costs: Record<string, number>;
}

export function runAliasesTimesFragmentBench({ count = 2000, fields = 2000, runs = 5 } = {}): AliasesTimesFragmentFigures[] {
  const schema = buildSchema(CONNECTION_SCHEMA);
  return [false, true].map((ownSizes) => {
    const source = aliasesTimesFragment(count, fields, ownSizes);
    const times = timePricing('aliases × fragment', schema, runs, () => ({ source, model: new CostModel(schema) }), (model, document, operation) =>
      model.costOf(document, operation),
    );
    return {
      name: ownSizes ? 'aliases × fragment, own sizes' : 'aliases × fragment',
      description: `${count} aliases conn(first: i) × a ${fields}-field fragment of sizedFields edges${ownSizes ? ' (first: j)' : ''}`,
      aliases: count,
      fragmentFields: fields,
      validateMs: times.validateMs,
      priceMs: times.priceMs,
      ratio: times.ratio,
      costs: Object.fromEntries(times.priced),
    };
  });
}

/*
 * Pricing against graphql-js `validate` of the same document, on the shapes
 * that made pricing cost more than the work it prices: every walk is to stay
 * within a small constant of validation, whatever the number of possible
 * types of an interface.
 */

/** An interface `Node` of `types` implementations, each with `f(x: Int)`; `conn` returns an interface whose `items` it sizes. */
function wideSchema(types: number): string {
  const implementations = Array.from({ length: types }, (_, i) => `type T${i} implements Node & Stamped { id: ID f(x: Int): Int at: Int }`).join('\n');
  return `${tokenBucketDirectiveTypeDefs}
directive @listSize(assumedSize: Int, slicingArguments: [String!], sizedFields: [String!], requireOneSlicingArgument: Boolean = true) on FIELD_DEFINITION
type Query @tokenBucket(name: "api") {
  node(id: ID): Node
  conn(first: Int): Paged @listSize(slicingArguments: ["first"], sizedFields: ["items"])
}
interface Node { id: ID }
interface Stamped { at: Int }
interface Paged { items: [Leaf] }
type Leaf { id: ID }
type PageA implements Paged { items: [Leaf] extra: Leaf }
type PageB implements Paged { items: [Leaf] }
${implementations}
`;
}

export interface PricingCaseFigures {
  name: string;
  description: string;
  validateMs: number[];
  priceMs: number[];
  /** Median price time ÷ median validate time. */
  ratio: number;
  target: number;
  costs: Record<string, number>;
}

interface PricingCase {
  name: string;
  description: string;
  schema: string;
  source: string;
  target: number;
  /** Prices the operation: the estimate, or the response with the estimate taken first (untimed). */
  price: (model: CostModel, document: DocumentNode, operation: OperationDefinitionNode) => Map<string, number>;
  /** Federation: the subgraphs that resolve each field (the model then prices entity fetches). */
  graphs?: ReadonlyMap<string, bigint>;
  /** Work done before the timed call, such as the estimate a refund prices the response against. */
  prepare?: (model: CostModel, document: DocumentNode, operation: OperationDefinitionNode) => void;
}

export function pricingCases(scale = 1): PricingCase[] {
  const aliases = Math.round(2000 * scale);
  const responseData = Object.fromEntries(Array.from({ length: aliases }, (_, i) => [`a${i}`, { id: String(i) }]));
  const abstractAliases = Math.round(16000 * scale);
  const namedAliases = Math.round(8000 * scale);
  const conditions = Math.min(2000, Math.round(2000 * scale));
  const conditionSets = Math.round(1000 * scale);
  const conditionsFragment = `fragment F on Node { ${Array.from({ length: 65 }, (_, i) => `... on T${i} { id }`).join(' ')} }`;
  const conditionsSource = `{ ${Array.from({ length: conditionSets }, (_, i) => `a${i}: node { ...F ... on T1 { f(x: ${i}) } }`).join(' ')} }\n${conditionsFragment}`;
  const conditionsData = Object.fromEntries(Array.from({ length: conditionSets }, (_, i) => [`a${i}`, { id: String(i), f: null }]));
  const plainBeside = Math.round(500 * scale);
  const plainBesideSource = `{ node { ${Array.from({ length: plainBeside }, (_, i) => `a${i}: id`).join(' ')} ${Array.from({ length: plainBeside }, (_, i) => `... on T${i} { f }`).join(' ')} } }`;
  // Each condition selecting one of the plain keys again (merged on its type alone).
  const plainAgainSource = `{ node { ${Array.from({ length: plainBeside }, (_, i) => `a${i}: id`).join(' ')} ${Array.from({ length: plainBeside }, (_, i) => `... on T${i} { a${i}: id f }`).join(' ')} } }`;
  // graphql-js writes every key it collects: an object that fits every type the conditions name.
  const plainBesideData = { node: { ...Object.fromEntries(Array.from({ length: plainBeside }, (_, i) => [`a${i}`, String(i)])), f: null } };
  return [
    {
      name: 'response walk, aliases × 2,000 types',
      description: `actualCostOf (refundUnusedCost) of ${aliases} aliases aI: node(id: "I") { id } on an interface of 2,000 types`,
      schema: wideSchema(2000),
      source: `{ ${Array.from({ length: aliases }, (_, i) => `a${i}: node(id: "${i}") { id }`).join(' ')} }`,
      target: 5,
      prepare: (model, document, operation) => void model.costOf(document, operation),
      price: (model, document, operation) => model.actualCostOf(document, operation, undefined, responseData),
    },
    {
      name: 'aliases × fragment × sizes, abstract',
      description: `costOf of a fragment of ${abstractAliases} aliases aI: conn(first: I) { items { id } }, conn an interface sized by sizedFields`,
      schema: wideSchema(4),
      source: `{ ...F }\nfragment F on Query { ${Array.from({ length: abstractAliases }, (_, i) => `a${i}: conn(first: ${i}) { items { id } }`).join(' ')} }`,
      target: TARGET_PRICE_TO_VALIDATE,
      price: (model, document, operation) => model.costOf(document, operation),
    },
    {
      name: 'one named type of 4,000',
      description: `costOf of ${namedAliases} aliases aI: node { ... on T1 { f(x: I) } } on an interface of 4,000 types`,
      schema: wideSchema(4000),
      source: `{ ${Array.from({ length: namedAliases }, (_, i) => `a${i}: node { ... on T1 { f(x: ${i}) } }`).join(' ')} }`,
      target: TARGET_PRICE_TO_VALIDATE,
      price: (model, document, operation) => model.costOf(document, operation),
    },
    {
      name: 'entity fetches, 2,000 type conditions',
      description: `costOf of node { ... on TI { aI: f } } for ${conditions} types of a federated interface of 2,000, f from another subgraph`,
      schema: wideSchema(2000),
      source: `{ node { ${Array.from({ length: conditions }, (_, i) => `... on T${i} { a${i}: f }`).join(' ')} } }`,
      graphs: new Map([['Query.node', 1n], ...Array.from({ length: 2000 }, (_, i): [string, bigint][] => [[`T${i}.id`, 3n], [`T${i}.f`, 2n]]).flat()]),
      target: TARGET_PRICE_TO_VALIDATE,
      price: (model, document, operation) => model.costOf(document, operation),
    },
    {
      name: 'another interface of 2,000 types',
      description: `costOf of ${conditionSets} aliases aI: node { ... on Stamped { at } ... on T1 { f(x: I) } }, every type of Node a Stamped`,
      schema: wideSchema(2000),
      source: `{ ${Array.from({ length: conditionSets }, (_, i) => `a${i}: node { ... on Stamped { at } ... on T1 { f(x: ${i}) } }`).join(' ')} }`,
      target: TARGET_PRICE_TO_VALIDATE,
      price: (model, document, operation) => model.costOf(document, operation),
    },
    {
      name: 'plain fields beside N type conditions',
      description: `costOf of node { a0: id … ${plainBeside} aliases … ... on T0 { f } … } with ${plainBeside} conditions on types of an interface of 2,000`,
      schema: wideSchema(2000),
      source: plainBesideSource,
      target: TARGET_PRICE_TO_VALIDATE,
      price: (model, document, operation) => model.costOf(document, operation),
    },
    {
      name: 'response walk, plain fields beside N type conditions',
      description: `actualCostOf (refundUnusedCost) of node { a0: id … ${plainBeside} aliases … ... on T0 { f } … } with ${plainBeside} conditions on types of an interface of 2,000, the object fitting them all`,
      schema: wideSchema(2000),
      source: plainBesideSource,
      target: TARGET_PRICE_TO_VALIDATE,
      prepare: (model, document, operation) => void model.costOf(document, operation),
      price: (model, document, operation) => model.actualCostOf(document, operation, undefined, plainBesideData),
    },
    {
      name: 'response walk, plain fields beside N type conditions, each selecting one again',
      description: `actualCostOf (refundUnusedCost) of node { a0: id … ${plainBeside} aliases … ... on T0 { a0: id f } … } with ${plainBeside} conditions on types of an interface of 2,000, the object fitting them all`,
      schema: wideSchema(2000),
      source: plainAgainSource,
      target: TARGET_PRICE_TO_VALIDATE,
      prepare: (model, document, operation) => void model.costOf(document, operation),
      price: (model, document, operation) => model.actualCostOf(document, operation, undefined, plainBesideData),
    },
    {
      name: 'a 65-type fragment of 2,000 in sets',
      description: `costOf of ${conditionSets} aliases aI: node { ...F ... on T1 { f(x: I) } }, F naming 65 types of an interface of 2,000`,
      schema: wideSchema(2000),
      source: conditionsSource,
      target: TARGET_NAMED_TYPES,
      price: (model, document, operation) => model.costOf(document, operation),
    },
    {
      name: 'response walk, a 65-type fragment of 2,000',
      description: `actualCostOf of the same ${conditionSets} aliases, each answered as a T1 { id f }`,
      schema: wideSchema(2000),
      source: conditionsSource,
      target: 1.5 * TARGET_NAMED_TYPES,
      prepare: (model, document, operation) => void model.costOf(document, operation),
      price: (model, document, operation) => model.actualCostOf(document, operation, undefined, conditionsData),
    },
  ];
}

/**
 * A set that names many types of an interface is priced once on each of
 * them (the response walk also plans each to tell which ones an object's
 * keys fit): what it costs grows with the types named, 65 here, never with
 * the interface's size (priced on all 2,000, this took 76 and 89 times
 * validate).
 */
const TARGET_NAMED_TYPES = 10;

export function runPricingBench({ runs = 5, scale = 1 } = {}): PricingCaseFigures[] {
  return pricingCases(scale).map((c) => {
    const schema = buildSchema(c.schema);
    const times = timePricing(c.name, schema, runs, () => ({ source: c.source, model: new CostModel(schema, { graphs: c.graphs }) }), c.price, {
      prepare: c.prepare,
    });
    return {
      name: c.name,
      description: c.description,
      validateMs: times.validateMs,
      priceMs: times.priceMs,
      ratio: times.ratio,
      target: c.target,
      costs: Object.fromEntries(times.priced),
    };
  });
}

/** Target of the 1,000-field operations, as in the GraphQL benchmark. */
const TARGET_OPERATION_US = 1000;

/** For `bench/run.ts`: the cost analysis on its own (`--only cost`); needs no Redis. */
export const costBenchmark: Benchmark = {
  name: 'cost',
  description:
    'CostModel.costOf: ~1,000-field operations; 2,000 aliases × a 2,000-field fragment, pricing on interfaces of thousands of types, and 200 KB hostile documents (time and heap), against graphql-js validate',
  async run(): Promise<BenchReport> {
    const operations = runCostAnalysisBench();
    const quadratic = runAliasesTimesFragmentBench();
    const pricing = runPricingBench();
    const hostile = runHostileBench();
    const hostileLines = hostileReport(hostile);
    const us = (value: number): string => (value >= 100 ? Math.round(value).toLocaleString('en-US') : value.toFixed(1));
    const ms = (values: readonly number[]): string => values.map((v) => v.toFixed(1)).join(' ');
    const lines = [
      'CostModel.costOf in this process, document parsed and validated once, variables coerced per call:',
      '',
      ...formatTable(
        ['operation', 'fields', 'expanded', 'calls', 'CPU mean µs', 'CPU p99 µs', 'wall p50 µs', 'wall p99 µs'],
        operations.map((c) => [c.name, String(c.fields), String(c.expandedFields), String(c.calls), us(c.cpuMeanUs), us(c.cpuP99Us), us(c.p50Us), us(c.p99Us)]),
      ),
      '',
      'Aliases × a fragment × distinct sizes: validate and costOf on the same freshly parsed document, interleaved, ms per run:',
      '',
      ...formatTable(
        ['case', 'validate ms', 'costOf ms', 'costOf / validate (medians)', 'api'],
        quadratic.map((q) => [q.name, ms(q.validateMs), ms(q.priceMs), `${q.ratio.toFixed(2)}x`, String(q.costs['api'] ?? '')]),
      ),
      ...quadratic.map((q) => `  ${q.name}: ${q.description}`),
      '',
      'Pricing on wide interfaces: validate and the pricing call on the same freshly parsed document, interleaved, ms per run:',
      '',
      ...formatTable(
        ['case', 'validate ms', 'price ms', 'price / validate (medians)', 'api'],
        pricing.map((p) => [p.name, ms(p.validateMs), ms(p.priceMs), `${p.ratio.toFixed(2)}x`, String(p.costs['api'] ?? '')]),
      ),
      ...pricing.map((p) => `  ${p.name}: ${p.description}`),
      '',
      ...hostileLines.lines,
    ];
    const targets: TargetCheck[] = [
      {
        label: `cost analysis of a ~1,000-field operation < ${TARGET_OPERATION_US / 1000} ms`,
        pass: operations.every((c) => c.cpuMeanUs < TARGET_OPERATION_US),
        detail: operations.map((c) => `${c.name} ${us(c.cpuMeanUs)} µs CPU mean`).join('; '),
      },
      ...quadratic.map((q) => ({
        label: `${q.name}: costOf <= ${TARGET_PRICE_TO_VALIDATE}x graphql-js validate`,
        pass: q.ratio <= TARGET_PRICE_TO_VALIDATE,
        detail: `${q.ratio.toFixed(2)}x (${median(q.priceMs).toFixed(1)} ms vs ${median(q.validateMs).toFixed(1)} ms, medians of ${q.priceMs.length} runs)`,
      })),
      ...pricing.map((p) => ({
        label: `${p.name}: <= ${p.target}x graphql-js validate`,
        pass: p.ratio <= p.target,
        detail: `${p.ratio.toFixed(2)}x (${median(p.priceMs).toFixed(1)} ms vs ${median(p.validateMs).toFixed(1)} ms, medians of ${p.priceMs.length} runs)`,
      })),
    ];
    targets.push(...hostileLines.targets);
    return { lines, targets, figures: { operations, aliasesTimesFragment: quadratic, pricing, hostile } };
  },
};
