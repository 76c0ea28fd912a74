import { GraphQLDirective, GraphQLNonNull, GraphQLScalarType, Kind, getArgumentValues, valueFromASTUntyped, visit, BREAK } from 'graphql';
import type { ConstDirectiveNode, DirectiveNode, GraphQLSchema } from 'graphql';
import { costDirective, listSizeDirective, tokenBucketDirective } from '../directive.js';

/** The spec that defines `@cost` and `@listSize` for Apollo Federation and Apollo Router. */
export const COST_SPEC_URL = 'https://specs.apollo.dev/cost/v0.1';
const COST_SPEC = 'specs.apollo.dev/cost';
const FEDERATION_SPEC = 'specs.apollo.dev/federation';

/**
 * Anything of a schema a directive can be written on: the schema, a named
 * type, a field, an argument, an input field, an enum value. Each has an
 * `astNode` (and the schema and types `extensionASTNodes`) and `extensions`.
 */
export interface Annotated {
  readonly astNode?: { readonly directives?: readonly (ConstDirectiveNode | DirectiveNode)[] | undefined } | null | undefined;
  readonly extensionASTNodes?: readonly { readonly directives?: readonly (ConstDirectiveNode | DirectiveNode)[] | undefined }[] | undefined;
  readonly extensions?: unknown;
}

/** One application of a directive: its arguments, and the form it was written in (for messages). */
export interface Application {
  readonly args: Readonly<Record<string, unknown>>;
  readonly form: 'astNode' | 'extensions.directives';
}

/** The names each directive is read under in a schema, and its own name where that names something else. */
export interface DirectiveNames {
  /** Per directive: the name the schema's `@link` gives it first; empty where the schema declares another directive under its name. */
  readonly read: Readonly<Record<DirectiveRole, readonly string[]>>;
  /**
   * Own names that are not read (the schema declares the name its `@link`
   * gives the directive, or declares another directive under that name):
   * an application under such a name is reported.
   */
  readonly unread: readonly { readonly name: string; readonly why: string }[];
}

/**
 * Where the schema links a spec with `@link(url:, as:, import:)`, the
 * directives go by the names the link gives them, as in every `@link`
 * consumer: `@cost` and `@listSize` from the cost spec or Apollo Federation
 * (which re-exports them), `@tokenBucket` from any URL that imports it or
 * is named after it; an imported one by its alias (or its own name), the
 * directive named after its spec by the link's namespace, anything else as
 * `namespace__name`. Where the schema declares that name, it is the only
 * one read; else (a code-first schema that declares nothing, a subgraph
 * linking Federation without importing `@cost`) the directive's own name
 * is read as well, declared or not.
 *
 * A schema that declares another directive under one of these names (a
 * `@cost` without a `weight` argument, such as graphql-cost-analysis's) has
 * none of ours under it.
 */
export function directiveNames(schema: GraphQLSchema): DirectiveNames {
  let links: readonly Readonly<Record<string, unknown>>[] = [];
  try {
    links = directiveApplications(schema, schema, 'link', null).map((l) => l.args);
  } catch {
    // An unreadable @link names nothing we could use.
  }
  const cost = linked(links, COST_SPEC) ?? linked(links, FEDERATION_SPEC);
  const unread: { name: string; why: string }[] = [];
  const namesOf = (own: DirectiveRole, link: string | null, isThis: (definition: GraphQLDirective) => boolean): string[] => {
    const definition = (name: string): GraphQLDirective | undefined => schema.getDirective(name) ?? undefined;
    const linkedDefinition = link === null ? undefined : definition(link);
    if (link !== null && link !== own && linkedDefinition !== undefined && isThis(linkedDefinition)) {
      unread.push({ name: own, why: `this schema's @link names the directive @${link}` });
      return [link];
    }
    const read: string[] = [];
    if (link !== null && link !== own && linkedDefinition === undefined) read.push(link);
    const ownDefinition = definition(own);
    if (ownDefinition === undefined || isThis(ownDefinition)) read.push(own);
    else unread.push({ name: own, why: `the schema declares another @${own}, which this package does not read; declare ${OWN_SDL[own]} to price with it` });
    return read;
  };
  const takes = (arg: string) => (definition: GraphQLDirective) => definition.args.some((a) => a.name === arg);
  return {
    read: {
      tokenBucket: namesOf('tokenBucket', linkedTokenBucket(links), takes('name')),
      cost: namesOf('cost', cost?.cost ?? null, takes('weight')),
      listSize: namesOf('listSize', cost?.listSize ?? null, (definition) => LIST_SIZE_ARGS.some((arg) => takes(arg)(definition))),
    },
    unread,
  };
}

const LIST_SIZE_ARGS = ['assumedSize', 'slicingArguments', 'sizedFields'];

const OWN_SDL: Readonly<Record<DirectiveRole, string>> = {
  tokenBucket: '@tokenBucket(name: String!, cost: Int) (tokenBucketDirectiveTypeDefs)',
  cost: '@cost(weight: String!) (costDirectiveTypeDefs)',
  listSize: '@listSize (costDirectiveTypeDefs)',
};

/** The name a link gives `@tokenBucket`, under any URL: imported (renamed or not), or the spec named after it. */
function linkedTokenBucket(links: readonly Readonly<Record<string, unknown>>[]): string | null {
  for (const link of links) {
    const url = link['url'];
    const parsed = typeof url === 'string' ? parseSpecUrl(url) : null;
    if (parsed === null) continue;
    const imported = importedNames(link['import']).get('tokenBucket');
    if (imported !== undefined) return imported;
    const as = link['as'];
    if (parsed.name === 'tokenBucket') return typeof as === 'string' && as !== '' ? stripAt(as) : parsed.name;
  }
  return null;
}

function linked(links: readonly Readonly<Record<string, unknown>>[], spec: string): { cost: string; listSize: string } | null {
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

/** The directives whose applications this package reads, by their own names. */
export type DirectiveRole = 'tokenBucket' | 'cost' | 'listSize';

/** A weight as the IBM declaration (`"2.5"`) or Apollo's (`7`, `2.5`) would have it written. */
const Weight = new GraphQLScalarType({
  name: 'CostWeight',
  parseValue: (value) => value,
  parseLiteral(node) {
    if (node.kind === Kind.STRING) return node.value;
    if (node.kind === Kind.INT || node.kind === Kind.FLOAT) return Number(node.value);
    throw new TypeError('a weight is a string or a number');
  },
});

/** What an application in the AST is read against where the schema does not declare the directive. */
const OWN: Readonly<Record<DirectiveRole, GraphQLDirective>> = {
  tokenBucket: tokenBucketDirective,
  cost: new GraphQLDirective({ ...costDirective.toConfig(), args: { weight: { type: new GraphQLNonNull(Weight) } } }),
  listSize: listSizeDirective,
};


/**
 * Every application of the directive `name` on `element`, in every form
 * the ecosystem's schema builders write one:
 *
 * - in its `astNode` and `extensionASTNodes` (SDL; NestJS's and
 *   TypeGraphQL's `@Directive`; Pothos' directives plugin), declared in the
 *   schema or not;
 * - in `extensions.directives`, in graphql-tools' object form
 *   (`{ cost: { weight: 7 } }`, `{ tokenBucket: [{ … }, { … }] }`) and in
 *   the array form (`[{ name: 'cost', args: { weight: 7 } }]`, Pothos'
 *   default); a name written with its `@` (`'@cost'`) counts as well;
 *   an array entry holds `name` and `args` only.
 *
 * An application in the AST is coerced as the schema's declaration of the
 * directive would coerce it, else as the package's own declaration of
 * `role` would (a `weight` written as a string or a number); one in
 * `extensions` is taken as written. Nothing is left out: an argument the
 * declaration does not have, a variable, a value that does not coerce, an
 * entry that is not an object of arguments, each throws an `Error` (whose
 * message the caller prefixes with the directive and the coordinate).
 * With `role` null, AST arguments are read untyped (`@link`).
 */
export function directiveApplications(schema: GraphQLSchema, element: Annotated, name: string, role: DirectiveRole | null): Application[] {
  const found: Application[] = [];
  const definition = schema.getDirective(name) ?? (role === null ? null : OWN[role]);
  // What the schema's declaration takes and this package reads: an argument
  // it reads not (graphql-cost-analysis's `multipliers`) would change nothing.
  const own = role === null ? null : new Set(OWN[role].args.map((a) => a.name));
  const known = definition === null ? null : new Set(definition.args.map((a) => a.name).filter((a) => own === null || own.has(a)));
  const checkNames = (args: Iterable<string>, form: string): void => {
    if (known === null) return;
    for (const arg of args) {
      if (!known.has(arg)) throw new Error(`unknown argument "${arg}" (${form}); the directive takes ${[...known].join(', ')}`);
    }
  };

  for (const node of [element.astNode, ...(element.extensionASTNodes ?? [])]) {
    for (const directive of node?.directives ?? []) {
      if (directive.name.value !== name) continue;
      const argumentNodes = directive.arguments ?? [];
      const argumentNames = argumentNodes.map((a) => a.name.value);
      checkNames(argumentNames, 'astNode');
      const twice = argumentNames.find((arg, i) => argumentNames.indexOf(arg) !== i);
      if (twice !== undefined) throw new Error(`the argument "${twice}" is given twice (astNode)`);
      let variable: string | null = null;
      visit(directive, {
        Variable(v) {
          variable = v.name.value;
          return BREAK;
        },
      });
      if (variable !== null) throw new Error(`the argument holds the variable $${variable}, which a schema cannot give a value (astNode)`);
      let args: Record<string, unknown>;
      if (definition === null) {
        args = Object.fromEntries(argumentNodes.map((a) => [a.name.value, valueFromASTUntyped(a.value)]));
      } else {
        try {
          args = getArgumentValues(definition, directive);
        } catch (error) {
          throw new Error(`${error instanceof Error ? error.message : String(error)} (astNode)`, { cause: error });
        }
      }
      found.push({ args, form: 'astNode' });
    }
  }

  const extensions = element.extensions;
  const directives: unknown = extensions !== null && typeof extensions === 'object' ? (extensions as Record<string, unknown>)['directives'] : undefined;
  const named = (key: unknown): boolean => key === name || key === `@${name}`;
  const add = (args: unknown, form: 'extensions.directives'): void => {
    if (args === undefined || args === null) args = {};
    if (typeof args !== 'object' || args === null || Array.isArray(args)) {
      throw new Error(`${form} holds ${describeValue(args)} where an object of arguments belongs`);
    }
    checkNames(Object.keys(args), form);
    found.push({ args: args as Record<string, unknown>, form });
  };
  if (Array.isArray(directives)) {
    for (const entry of directives as unknown[]) {
      if (entry === null || typeof entry !== 'object' || !named((entry as { name?: unknown }).name)) continue;
      // An entry is { name, args }: arguments under another key would be read as none.
      const other = Object.keys(entry).find((key) => key !== 'name' && key !== 'args');
      if (other !== undefined) throw new Error(`an extensions.directives entry holds "${other}", which is not name or args`);
      add((entry as { args?: unknown }).args, 'extensions.directives');
    }
  } else if (directives !== null && typeof directives === 'object') {
    for (const key of Object.keys(directives)) {
      if (!named(key)) continue;
      const given = (directives as Record<string, unknown>)[key];
      if (Array.isArray(given)) for (const args of given as unknown[]) add(args, 'extensions.directives');
      else if (given !== undefined && given !== null) add(given, 'extensions.directives');
    }
  }
  return found;
}

/** A value as a message shows it. */
export function describeValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number') return String(value);
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'function') return 'a function';
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
