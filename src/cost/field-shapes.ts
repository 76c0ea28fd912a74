import type { FieldCost, InputCost } from './schema-costs.js';

/**
 * Numbers for field shapes: equal for two fields that price every selection
 * of them alike (everything the walks read of a field), so that whether two
 * types price a set of field names alike is a comparison of numbers. One per
 * cost model: the numbers mean nothing across schemas.
 */
export class FieldShapes {
  private readonly shapes = new WeakMap<FieldCost, number>();
  private readonly keys = new Map<string, number>();
  private readonly inputKeys = new Map<InputCost, string>();

  of(field: FieldCost | undefined): number {
    if (field === undefined) return -1;
    let shape = this.shapes.get(field);
    if (shape === undefined) {
      const slicing = field.slicing.map((s) => {
        let fallback: string;
        try {
          fallback = JSON.stringify(s.argument.defaultValue, (_, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v)) ?? 'u';
        } catch {
          fallback = `#${this.keys.size}`; // a default that cannot be written out is its own
        }
        return `${s.argument.name}.${s.path.join('.')}:${s.literal ?? ''}:${String(s.argument.type)}=${fallback}`;
      });
      const key = [
        field.name,
        field.weight,
        field.typeWeighted ? 't' : 'f',
        field.listDepth,
        field.innerCount,
        field.target?.index ?? -1,
        field.assumedSize ?? 'd',
        // A sized context is told apart by identity: one per field that declares it.
        field.sized === null ? 'n' : `#${this.keys.size}`,
        slicing.join(','),
        chargeKey(field, this.inputKeys),
      ].join('|');
      shape = this.keys.get(key);
      if (shape === undefined) this.keys.set(key, (shape = this.keys.size));
      this.shapes.set(field, shape);
    }
    return shape;
  }
}

/**
 * The part of a field's shape that every walk reads alike: its bucket rules
 * and its arguments' costs. `inputKeys` numbers input objects, so keys are
 * comparable only among those made with the same map.
 */
export function chargeKey(field: FieldCost, inputKeys: Map<InputCost, string>): string {
  const rules = field.rules.map((r) => `${r.bucket}:${r.cost ?? 'c'}`).join(',');
  const args = (field.arguments ?? []).map((a) => `${a.name}:${a.cost ?? 'n'}:${inputKey(a.input, inputKeys)}`).join(',');
  // Federation: the subgraphs a field is fetched from decide the entity fetches below it.
  const graphs = field.graphs === 0n ? '' : `|${field.graphs}:${field.requiredGraphs?.join(',') ?? ''}`;
  return `${rules}|${args}${graphs}`;
}

/** Equal for input costs that price any value alike: leaves by cost, lists by their items, input objects by type (one object each). */
function inputKey(input: InputCost, inputKeys: Map<InputCost, string>): string {
  let key = inputKeys.get(input);
  if (key === undefined) {
    key = input.kind === 'leaf' ? `l${input.cost}` : input.kind === 'list' ? `[${inputKey(input.of, inputKeys)}]` : `o${inputKeys.size}`;
    inputKeys.set(input, key);
  }
  return key;
}
