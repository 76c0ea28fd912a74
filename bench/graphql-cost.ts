import { Kind, buildSchema, parse, validate, visit } from 'graphql';
import type { DocumentNode, FragmentDefinitionNode, OperationDefinitionNode, SelectionSetNode } from 'graphql';
import { CostModel, tokenBucketDirectiveTypeDefs } from '../src/index.js';

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
