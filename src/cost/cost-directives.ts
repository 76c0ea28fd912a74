import { getDirective } from '@graphql-tools/utils';
import type { GraphQLSchema } from 'graphql';

/** The spec that defines `@cost` and `@listSize` for Apollo Federation and Apollo Router. */
export const COST_SPEC_URL = 'https://specs.apollo.dev/cost/v0.1';
const COST_SPEC = 'specs.apollo.dev/cost';
const FEDERATION_SPEC = 'specs.apollo.dev/federation';

/** The names `@cost` and `@listSize` go by in a schema; null where the schema does not declare that directive. */
export interface CostDirectiveNames {
  readonly cost: string | null;
  readonly listSize: string | null;
}

/**
 * Where the schema links the cost spec (or Apollo Federation, which
 * re-exports its directives) with `@link(url:, as:, import:)`, the
 * directives go by the names the link gives them, as in every `@link`
 * consumer: an imported one by its alias (or its own name), `@cost` in the
 * cost spec by the link's namespace, anything else as `namespace__name`.
 * Without such a link, `@cost` and `@listSize` are read under their own
 * names, as IBM's specification declares them.
 *
 * Only a directive the schema declares counts: another `@cost` without a
 * `weight` argument is not this one.
 */
export function costDirectiveNames(schema: GraphQLSchema): CostDirectiveNames {
  let links: readonly Record<string, unknown>[] = [];
  try {
    links = getDirective(schema, schema, 'link') ?? [];
  } catch {
    // An unreadable @link names nothing we could use.
  }
  const names = linked(links, COST_SPEC) ?? linked(links, FEDERATION_SPEC);
  const isCost = (name: string): boolean => schema.getDirective(name)?.args.some((a) => a.name === 'weight') === true;
  const isListSize = (name: string): boolean => schema.getDirective(name) !== undefined;
  // A link that names a directive the schema does not declare (a subgraph
  // linking Federation without importing @cost) leaves the plain names.
  const cost = names !== null && isCost(names.cost) ? names.cost : isCost('cost') ? 'cost' : null;
  const listSize = names !== null && isListSize(names.listSize) ? names.listSize : isListSize('listSize') ? 'listSize' : null;
  return { cost, listSize };
}

function linked(links: readonly Record<string, unknown>[], spec: string): { cost: string; listSize: string } | null {
  for (const link of links) {
    const url = link['url'];
    if (typeof url !== 'string') continue;
    const parsed = parseSpecUrl(url);
    if (parsed === null || parsed.identity !== spec) continue;
    const as = link['as'];
    const namespace = typeof as === 'string' && as !== '' ? stripAt(as) : parsed.name;
    const imports = importedNames(link['import']);
    return {
      // The directive named after its spec takes the namespace's name itself.
      cost: imports.get('cost') ?? (parsed.name === 'cost' ? namespace : `${namespace}__cost`),
      listSize: imports.get('listSize') ?? `${namespace}__listSize`,
    };
  }
  return null;
}

/** `https://specs.apollo.dev/cost/v0.1` → identity `specs.apollo.dev/cost`, name `cost`. */
export function parseSpecUrl(url: string): { identity: string; name: string } | null {
  const bare = url.replace(/[?#].*$/, '').replace(/^[a-z]+:\/\//i, '').replace(/\/+$/, '');
  const segments = bare.split('/');
  if (segments.length > 1 && /^v\d+\.\d+$/.test(segments[segments.length - 1] ?? '')) segments.pop();
  const name = segments[segments.length - 1];
  if (segments.length < 2 || name === undefined || name === '') return null;
  return { identity: segments.join('/'), name };
}

/** `import: ["@listSize", { name: "@cost", as: "@weight" }]` → listSize → listSize, cost → weight. */
export function importedNames(value: unknown): Map<string, string> {
  const names = new Map<string, string>();
  const list = Array.isArray(value) ? (value as unknown[]) : value == null ? [] : [value];
  for (const item of list) {
    if (typeof item === 'string') {
      names.set(stripAt(item), stripAt(item));
    } else if (item !== null && typeof item === 'object') {
      const { name, as } = item as { name?: unknown; as?: unknown };
      if (typeof name !== 'string') continue;
      names.set(stripAt(name), typeof as === 'string' && as !== '' ? stripAt(as) : stripAt(name));
    }
  }
  return names;
}

function stripAt(name: string): string {
  return name.startsWith('@') ? name.slice(1) : name;
}
