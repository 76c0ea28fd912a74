import { GraphQLFloat, GraphQLInt, getNamedType, getNullableType, isInputObjectType, isInterfaceType, isListType, isObjectType, isScalarType } from 'graphql';
import type { GraphQLArgument, GraphQLField, GraphQLInputType, GraphQLInterfaceType, GraphQLNamedType, GraphQLObjectType } from 'graphql';
import { named } from './schema-annotations.js';
import type { SizedContext, SizedEntry, SlicingArgument } from './schema-costs.js';

// What `@listSize` says about a list field, checked and compiled at
// start-up: the arguments that size it (`slicingArguments`, paths into input
// objects included) and the fields that take its size (`sizedFields`).
// `what` names the directive and the field in errors (`@listSize on Query.rows`).

export const NO_SLICING: readonly SlicingArgument[] = Object.freeze([]);
const FIRST_VARIABLE: readonly number[] = Object.freeze([0]);
const NO_VARIABLES: readonly number[] = Object.freeze([]);

/**
 * The arguments that size the field: those `@listSize(slicingArguments:)`
 * names, else `first` and `last`. A path (`"input.page.first"`) walks
 * input object fields only: a step into a list is refused, since the
 * elements of a list do not give one size (`"pages.first"` where
 * `pages: [Page]` would read none of them); so is a named argument that
 * is an input object (no size) or a list of lists (whose inner elements
 * would not be counted). One that is not an `Int`
 * (nor a list, counted by its elements) is noted for a start-up warning:
 * its value is read as a size by every JavaScript reading, and a resolver
 * may read it otherwise.
 */
export function slicingArgumentsOf(
  field: GraphQLField<unknown, unknown>,
  declared: readonly string[] | null,
  coordinate: string,
  what: string,
  inexact: Set<string>,
): readonly SlicingArgument[] {
  const slicing: SlicingArgument[] = [];
  const add = (argument: GraphQLArgument, path: readonly string[], name: string): void => {
    let type = getNullableType(argument.type);
    let at = argument.name;
    for (const key of path) {
      if (isListType(type)) {
        throw new Error(`${what}: slicing argument "${name}" passes through a list (${at} is ${String(type)}), whose elements do not give one size; slice by a value outside the list`);
      }
      const inputField = isInputObjectType(type) ? type.getFields()[key] : undefined;
      if (inputField === undefined) {
        throw new Error(`${what}: slicing argument "${name}": ${at} (${String(type)}) has no input field "${key}"`);
      }
      type = getNullableType(inputField.type);
      at = `${at}.${key}`;
    }
    if (declared !== null) {
      // What sizes nothing, or sizes less than the elements a resolver reads.
      const items = isListType(type) ? getNullableType(type.ofType as GraphQLInputType) : null;
      if (isInputObjectType(type)) {
        throw new Error(`${what}: slicing argument "${name}" is an input object (${at}: ${String(type)}), which is no size: name the field in it that is ("${name}.first")`);
      }
      if (items !== null && isListType(items)) {
        throw new Error(`${what}: slicing argument "${name}" is a list of lists (${at}: ${String(type)}): only its outer elements would be counted`);
      }
    }
    if (!isListType(type) && !(isScalarType(type) && type.name === GraphQLInt.name)) inexact.add(`${coordinate}(${name}: ${String(type)})`);
    slicing.push({ argument, path, literal: literalKind(argument, path) });
  };
  if (declared !== null) {
    for (const name of declared) {
      const [argName = '', ...path] = name.split('.');
      const argument = field.args.find((a) => a.name === argName);
      if (argument === undefined) throw new Error(`${what}: slicing argument "${name}" is not an argument of the field`);
      add(argument, path, name);
    }
  } else {
    for (const argument of field.args) {
      if (argument.name === 'first' || argument.name === 'last') add(argument, [], argument.name);
    }
  }
  return slicing.length === 0 ? NO_SLICING : Object.freeze(slicing);
}

/** The start-up warning that names the slicing arguments `slicingArgumentsOf` found not to be `Int`s. */
export function inexactSlicingWarnings(inexact: ReadonlySet<string>): string[] {
  if (inexact.size === 0) return [];
  return [
    `graphql-token-bucket: slicing arguments that are not Int: ${named([...inexact])}. ` +
      'A size is read from such a value as the largest of Number, parseFloat and parseInt (of a string, of what an object converts to, of a list\'s first element); ' +
      'a resolver that reads it otherwise may do more work than is charged: declare them Int',
  ];
}

/**
 * `sizedFields: ["edges", "results { page }"]`: `edges` and the `page`
 * inside `results` take the field's size (variable 0); `results` itself
 * only leads there.
 */
export function sizedFieldsContext(type: GraphQLNamedType, paths: readonly string[], what: string): SizedContext {
  interface Node {
    leaf: boolean;
    children: Map<string, Node>;
  }
  const root = new Map<string, Node>();
  for (const path of paths) {
    const tokens = path.match(/[_A-Za-z][_0-9A-Za-z]*|[{}]|[^\s,]/g) ?? [];
    const levels: Map<string, Node>[] = [root];
    let last: Node | null = null;
    tokens.forEach((token, i) => {
      const level = levels[levels.length - 1];
      if (token === '{') {
        if (last === null) throw new Error(`${what}: sizedFields "${path}" opens a selection without a field`);
        levels.push(last.children);
        last = null;
      } else if (token === '}') {
        if (levels.length === 1) throw new Error(`${what}: sizedFields "${path}" closes a selection it did not open`);
        levels.pop();
        last = null;
      } else if (/^[_A-Za-z]/.test(token) && level !== undefined) {
        let node = level.get(token);
        if (node === undefined) {
          node = { leaf: false, children: new Map() };
          level.set(token, node);
        }
        if (tokens[i + 1] !== '{') node.leaf = true;
        last = node;
      } else {
        throw new Error(`${what}: sizedFields "${path}" is not a list of field names and nested selections`);
      }
    });
    if (levels.length !== 1) throw new Error(`${what}: sizedFields "${path}" leaves a selection open`);
  }

  const build = (level: Map<string, Node>, on: GraphQLNamedType): SizedContext => {
    const entries = new Map<string, SizedEntry>();
    const fields = isObjectType(on) || isInterfaceType(on) ? (on as GraphQLObjectType | GraphQLInterfaceType).getFields() : null;
    for (const [name, node] of level) {
      const field = fields?.[name];
      if (fields !== null && field === undefined) throw new Error(`${what}: sized field "${name}" is not a field of ${on.name}`);
      if (node.leaf && node.children.size > 0) {
        throw new Error(`${what}: sizedFields names "${name}" both as a sized field and as a path into one`);
      }
      const sub = node.children.size > 0 ? build(node.children, field === undefined ? on : getNamedType(field.type)) : null;
      entries.set(name, { vars: node.leaf ? FIRST_VARIABLE : NO_VARIABLES, sub });
    }
    return { entries };
  };
  return build(root, type);
}

/** Only the built-in scalars themselves (not a custom scalar named `Int`) have a known `parseLiteral`. */
function literalKind(argument: GraphQLArgument, path: readonly string[]): 'Int' | 'Float' | null {
  if (path.length > 0) return null;
  const type = getNullableType(argument.type);
  return type === GraphQLInt ? 'Int' : type === GraphQLFloat ? 'Float' : null;
}
