import { Kind } from 'graphql';
import type { FieldNode, ValueNode, VariableDefinitionNode } from 'graphql';
import type { ArgumentCost, InputCost } from './schema-costs.js';
import { findArgument, sat } from './selections.js';

const hasOwn = Object.prototype.hasOwnProperty;

interface VariableCost {
  readonly input: InputCost;
  readonly cost: number | null;
  readonly total: number;
}

/**
 * Prices the arguments a field is given, as the IBM specification and
 * Apollo Router do: a scalar or enum costs its `@cost` (the argument's or
 * input field's, else its type's, else 0); an input object its `@cost`
 * (default 1) plus its fields'; a list its `@cost` (default 0) plus each
 * element's; null nothing. Variables are priced by the values the request
 * sends (a variable it leaves out, by the operation's default for it).
 *
 * Values are walked with an explicit work list, never recursion, and a
 * variable's cost is computed once per definition it is used with, however
 * many fields use it.
 */
export class ArgumentPricer {
  private readonly defaults = new Map<string, ValueNode>();
  private readonly variableCosts = new Map<string, VariableCost[]>();
  // The work list, reused: values (AST or JSON), their input types and the definition's @cost.
  private readonly values: unknown[] = [];
  private readonly ast: boolean[] = [];
  private readonly inputs: InputCost[] = [];
  private readonly costs: (number | null)[] = [];

  /** `variables`: what the request sent, or null when they do not coerce (then the operation never runs). */
  constructor(
    private readonly variables: Readonly<Record<string, unknown>> | null,
    definitions: readonly VariableDefinitionNode[] | undefined,
  ) {
    for (const definition of definitions ?? []) {
      if (definition.defaultValue !== undefined) this.defaults.set(definition.variable.name.value, definition.defaultValue);
    }
  }

  /** The cost of the arguments `node` gives, 0 when it gives none of `args`. */
  price(node: FieldNode, args: readonly ArgumentCost[]): number {
    let total = 0;
    for (const arg of args) {
      const value = findArgument(node, arg.name);
      if (value !== undefined) total = sat(total + this.walk(value, true, arg.input, arg.cost));
    }
    return total;
  }

  private walk(value: unknown, ast: boolean, input: InputCost, cost: number | null): number {
    const base = this.values.length;
    this.push(value, ast, input, cost);
    let total = 0;
    while (this.values.length > base) {
      const v = this.values.pop();
      const isAst = this.ast.pop() === true;
      const type = this.inputs.pop()!;
      const own = this.costs.pop() ?? null;
      total = sat(total + (isAst ? this.astValue(v as ValueNode, type, own) : this.jsonValue(v, type, own)));
    }
    return total;
  }

  private push(value: unknown, ast: boolean, input: InputCost, cost: number | null): void {
    this.values.push(value);
    this.ast.push(ast);
    this.inputs.push(input);
    this.costs.push(cost);
  }

  /** What this value costs by itself; what it contains goes on the work list. */
  private astValue(node: ValueNode, input: InputCost, cost: number | null): number {
    if (node.kind === Kind.NULL) return 0;
    if (node.kind === Kind.VARIABLE) return this.variable(node.name.value, input, cost);
    switch (input.kind) {
      case 'leaf':
        return cost ?? input.cost;
      case 'list':
        // A single value where a list is expected is a list of one.
        if (node.kind === Kind.LIST) for (const item of node.values) this.push(item, true, input.of, cost);
        else this.push(node, true, input.of, cost);
        return cost ?? 0;
      case 'object':
        if (node.kind !== Kind.OBJECT) return 0;
        for (const field of node.fields) {
          const definition = input.fields.get(field.name.value);
          if (definition !== undefined) this.push(field.value, true, definition.input, definition.cost);
        }
        return cost ?? 1;
    }
  }

  private jsonValue(value: unknown, input: InputCost, cost: number | null): number {
    if (value === null || value === undefined) return 0;
    switch (input.kind) {
      case 'leaf':
        // A custom scalar holding an object is one value, not walked.
        return cost ?? input.cost;
      case 'list':
        if (Array.isArray(value)) for (const item of value as unknown[]) this.push(item, false, input.of, cost);
        else this.push(value, false, input.of, cost);
        return cost ?? 0;
      case 'object':
        if (typeof value !== 'object' || Array.isArray(value)) return 0;
        for (const key of Object.keys(value)) {
          const definition = input.fields.get(key);
          if (definition !== undefined) this.push((value as Record<string, unknown>)[key], false, definition.input, definition.cost);
        }
        return cost ?? 1;
    }
  }

  private variable(name: string, input: InputCost, cost: number | null): number {
    let known = this.variableCosts.get(name);
    for (const entry of known ?? []) if (entry.input === input && entry.cost === cost) return entry.total;
    let total = 0;
    if (this.variables !== null && hasOwn.call(this.variables, name)) {
      // Walked on its own work list segment: it holds no further variables.
      total = this.walk(this.variables[name], false, input, cost);
    } else {
      const fallback = this.defaults.get(name);
      if (fallback !== undefined) total = this.walk(fallback, true, input, cost);
    }
    if (known === undefined) this.variableCosts.set(name, (known = []));
    known.push({ input, cost, total });
    return total;
  }
}
