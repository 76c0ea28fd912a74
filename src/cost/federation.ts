import { printSchemaWithDirectives } from '@graphql-tools/utils';
import { Kind, buildASTSchema, parse, visit } from 'graphql';
import type { DocumentNode, GraphQLDirective, GraphQLSchema } from 'graphql';
import { importedNames, parseSpecUrl } from './cost-directives.js';
import type { FederationModel } from './entity-fetches.js';
import type { PlannedFetches } from './fetch-counts.js';
import { directiveArguments, readJoinDirectives } from './join-directives.js';
import { QueryPlans, plannerUnavailable } from './query-plans.js';
import type { RequiredSelections } from './required-selections.js';
import { readStitchingInfo } from './stitching-info.js';
import type { StitchingInfo } from './stitching-info.js';

/**
 * The schema a federated graph is priced against, and what its gateway
 * fetches besides: what its `@requires` fields need fetched first, which
 * subgraphs serve each field, and the gateway's fetches per object — from
 * its query plans where they are known before it runs them, else bounded.
 */
export interface PricingSource {
  readonly schema: GraphQLSchema;
  readonly requires?: RequiredSelections | undefined;
  /** Per field (`'Product.reviews'`), the subgraphs that resolve it, one bit each (as many bits as subgraphs). */
  readonly graphs?: ReadonlyMap<string, bigint> | undefined;
  /** How each subgraph finds each entity: what bounds a gateway's fetches where its plan is not known. */
  readonly federation?: FederationModel | undefined;
  /** The gateway's query plans (Apollo Gateway's, made by its own planner from the supergraph). */
  readonly plans?: PlannedFetches | undefined;
  /** Why plans cannot be made here (the planner is not installed): then the bound prices every operation. */
  readonly withoutPlans?: string | undefined;
}

const JOIN_SPEC = 'specs.apollo.dev/join';
const TOKEN_BUCKET = 'tokenBucket';

export interface SupergraphPricingOptions {
  /**
   * How the gateway sets the labels of progressive overrides
   * (`@override(label:)`): `'unset'` (default) plans with none set, as
   * Apollo Gateway does; `'both'` prices each object at the most of the
   * plans of every setting of them, each label set or not, for a router
   * that sets them per request (Apollo Router draws each `percent(n)` label
   * anew): beyond `MAX_PLANNED_LABELS` labels, by the bound.
   */
  overrideLabels?: 'unset' | 'both' | undefined;
}

/** How `supergraphPricing` plans by default: as Apollo Gateway does, with no progressive override's label set. */
export const DEFAULT_OVERRIDE_LABELS = 'unset';

/**
 * A supergraph SDL (Apollo Gateway's `coreSupergraphSdl`, the `sdl` Apollo
 * Router sends) as the cost model reads it. The API schema a gateway serves
 * has every directive stripped; the supergraph keeps `@cost` and `@listSize`
 * under the names its `@link` gives them, `@tokenBucket` wherever
 * `@composeDirective` brought it (under any URL: the directive imported as
 * `@tokenBucket`, renamed or not), and the `@join__*` directives that say
 * where each part is served. Each operation's entity fetches are those of
 * the plan Apollo's query planner (`@apollo/query-planner`, the gateway's
 * own) makes for it from this supergraph; where it cannot be loaded (it
 * comes with `@apollo/gateway`; elsewhere, install it), by a bound on them
 * (`withoutPlans` says why).
 *
 * Throws a `GraphQLError` (a syntax or schema error) for an SDL that is not
 * a supergraph graphql-js can build.
 */
export function supergraphPricing(sdl: string, options: SupergraphPricingOptions = {}): PricingSource {
  for (const key of Object.keys(options)) {
    if (key !== 'overrideLabels') throw new TypeError(`supergraphPricing: unknown option "${key}" (options: overrideLabels)`);
  }
  const overrideLabels = options.overrideLabels ?? DEFAULT_OVERRIDE_LABELS;
  if (overrideLabels !== 'unset' && overrideLabels !== 'both') {
    throw new TypeError(`supergraphPricing option "overrideLabels" must be 'unset' or 'both', got ${JSON.stringify(overrideLabels)}`);
  }
  let document = parse(sdl, { noLocation: true });
  const links = schemaLinks(document);
  let joinNamespace = 'join';
  let tokenBucketName: string | null = null;
  for (const link of links) {
    const spec = typeof link['url'] === 'string' ? parseSpecUrl(link['url']) : null;
    if (spec === null) continue;
    const as = typeof link['as'] === 'string' && link['as'] !== '' ? link['as'] : spec.name;
    if (spec.identity === JOIN_SPEC) joinNamespace = as;
    const imported = importedNames(link['import']).get(TOKEN_BUCKET);
    if (imported !== undefined) tokenBucketName = imported;
    else if (spec.name === TOKEN_BUCKET && tokenBucketName === null) tokenBucketName = as;
  }
  if (tokenBucketName !== null && tokenBucketName !== TOKEN_BUCKET && !declares(document, TOKEN_BUCKET)) {
    document = renameDirective(document, tokenBucketName, TOKEN_BUCKET);
  }
  const { graphs, requires, model, labels } = readJoinDirectives(document, joinNamespace);
  const schema = buildASTSchema(document);
  const withoutPlans = plannerUnavailable();
  const plans = withoutPlans === undefined ? new QueryPlans(sdl, schema, overrideLabels === 'both' ? [...labels] : []) : undefined;
  return { schema, requires, graphs, federation: model, plans, withoutPlans };
}

/**
 * A schema stitched from subgraphs (Hive Gateway's unified schema) as the
 * cost model reads it: the schema itself, which keeps the subgraphs'
 * directives, and from its stitching information the selection each field
 * needs besides its keys (its `@requires`), the subgraphs that serve each
 * field and how each finds each entity. Hive Gateway plans as it runs: its
 * fetches are bounded.
 */
export function stitchedPricing(schema: GraphQLSchema): PricingSource {
  const pricing = withOwnDirectiveNames(schema);
  const info = (schema.extensions as { stitchingInfo?: StitchingInfo } | undefined)?.stitchingInfo;
  const byField = info?.fieldNodesByField;
  if (info === undefined || byField === null || typeof byField !== 'object') return { schema: pricing };
  const { graphs, requires, model } = readStitchingInfo(schema, info);
  return { schema: pricing, requires, graphs, federation: model };
}

/** What tells each directive apart by its arguments, when no `@link` says which is which. */
const SHAPES: readonly { name: string; is: (directive: GraphQLDirective) => boolean }[] = [
  { name: TOKEN_BUCKET, is: (d) => d.args.length === 2 && d.args.some((a) => a.name === 'name') && d.args.some((a) => a.name === 'cost') },
  { name: 'cost', is: (d) => d.args.length === 1 && d.args[0]?.name === 'weight' },
  { name: 'listSize', is: (d) => d.args.some((a) => a.name === 'assumedSize') && d.args.some((a) => a.name === 'slicingArguments') },
];

/**
 * A stitched schema keeps the subgraphs' directives under the names they
 * imported them by (`@weight` for `@cost`) but not the `@link` that says so:
 * a directive that is the only one of its shape is read under its own name
 * (the schema rebuilt from its SDL for pricing), so a renamed import is
 * never silently left unpriced.
 */
function withOwnDirectiveNames(schema: GraphQLSchema): GraphQLSchema {
  const renames: [string, string][] = [];
  for (const { name, is } of SHAPES) {
    if (schema.getDirective(name) !== undefined) continue;
    const candidates = schema.getDirectives().filter(is);
    if (candidates.length === 1 && candidates[0] !== undefined) renames.push([candidates[0].name, name]);
  }
  if (renames.length === 0) return schema;
  let document = parse(printSchemaWithDirectives(schema), { noLocation: true });
  for (const [from, to] of renames) document = renameDirective(document, from, to);
  return buildASTSchema(document, { assumeValidSDL: true });
}

/** The arguments of every `@link` on the schema definition and its extensions. */
function schemaLinks(document: DocumentNode): Record<string, unknown>[] {
  const links: Record<string, unknown>[] = [];
  for (const definition of document.definitions) {
    if (definition.kind !== Kind.SCHEMA_DEFINITION && definition.kind !== Kind.SCHEMA_EXTENSION) continue;
    for (const directive of definition.directives ?? []) {
      if (directive.name.value === 'link') links.push(directiveArguments(directive));
    }
  }
  return links;
}

function declares(document: DocumentNode, name: string): boolean {
  return document.definitions.some((d) => d.kind === Kind.DIRECTIVE_DEFINITION && d.name.value === name);
}

function renameDirective(document: DocumentNode, from: string, to: string): DocumentNode {
  const renamed = (node: { name: { value: string } }) => (node.name.value === from ? { ...node, name: { ...node.name, value: to } } : undefined);
  return visit(document, { DirectiveDefinition: renamed, Directive: renamed });
}
