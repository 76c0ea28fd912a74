import type { FieldNode, FragmentDefinitionNode } from 'graphql';
import type { ArgumentPricer } from './argument-costs.js';
import type { Work } from './budget.js';
import type { FetchCounts } from './fetch-counts.js';
import type { Level, Levels } from './levels.js';
import type { ListSizes } from './list-sizes.js';
import type { KeyEntry } from './own-keys.js';
import type { CompositeCost, FieldCost, SchemaCosts, SizedContext } from './schema-costs.js';
import { sat } from './selections.js';
import { childContext } from './sized-contexts.js';
import { addTerms, envelope, scaleTerms, substituteAll, substituteNearest } from './size-terms.js';
import type { SizeTerms } from './size-terms.js';

/*
 * The arithmetic of one response key in the estimate:
 *
 *     count × (weight + sub-selections) + arguments
 *
 * and what the field's rules charge, with size terms where an enclosing
 * connection sizes it (size-terms.ts). The walk (price-operation.ts) prices
 * the sub-selections; this prices the field on top.
 */

/** What a selection set costs per instance of its parent: the complexity then one charge per bucket, plus size terms. */
export interface Measure {
  readonly v: Float64Array;
  readonly t: SizeTerms;
}

/** A measure being summed. */
export interface Acc {
  v: Float64Array;
  t: SizeTerms;
}

/** A key whose sub-selection's level is priced first (on its type, or the most of its possible types at `size`), then `finish`. */
export interface Pending {
  readonly level: Level;
  readonly field: FieldCost;
  /** The type the field is selected on. */
  readonly parent: CompositeCost;
  /** The context the field sits in, and the one its sub-selection is priced in. */
  readonly context: SizedContext | null;
  readonly childContext: SizedContext | null;
  readonly size: number;
}

export interface FieldPriceInput {
  readonly costs: SchemaCosts;
  readonly levels: Levels;
  readonly sizes: ListSizes;
  readonly arguments: ArgumentPricer;
  readonly fragments: ReadonlyMap<string, FragmentDefinitionNode>;
  readonly variables: Readonly<Record<string, unknown>>;
  readonly work: Work;
  /** Federation: the fetches a gateway makes per object beyond the one that returned it. */
  readonly fetches?: FetchCounts | undefined;
}

export class FieldPrices {
  /** 1 where the operation selects a field that charges that bucket. */
  readonly touched: Uint8Array;
  readonly width: number;
  readonly zero: Measure;

  constructor(private readonly input: FieldPriceInput) {
    this.width = input.costs.bucketNames.length + 1;
    this.touched = new Uint8Array(this.width - 1);
    this.zero = { v: new Float64Array(this.width), t: null };
  }

  /**
   * One response key on `type`, into `out` (its terms returned). Its size
   * and arguments are its first selection's (graphql-js runs the first field
   * of a key); where which runs first depends on the type, the largest of
   * them all (`entry.heads`). Priced at once for a leaf (its terms, null);
   * else what to price first (`finish` then completes it).
   */
  key(entry: KeyEntry, type: CompositeCost, context: SizedContext | null, out: Float64Array): SizeTerms | Pending {
    out.fill(0);
    const field = type.fields?.get(entry.name) ?? this.input.costs.metaFields.get(entry.name);
    if (field === undefined) return null;
    this.input.work.spend(1);
    const target = field.target;
    if (target === null || entry.selectionSets === null) {
      if (context === null || !field.isList) {
        // A leaf (most fields): `count × weight + arguments`, and its rules.
        let complexity = field.weight;
        if (field.isList && complexity !== 0) complexity = sat(sat(this.size(entry.heads, field) * field.innerCount) * complexity);
        if (field.arguments !== null) complexity = sat(complexity + this.arguments(entry.heads, field));
        out[0] = complexity;
        this.charge(out, field, complexity);
        return null;
      }
      return this.finish(field, type, entry, context, this.zero, out);
    }
    const inner = context === null && field.sized === null ? null : childContext(context, field);
    const size = field.sized !== null && target.possibleTypes !== null ? this.size(entry.heads, field) : -1;
    return { level: entry.levelOn(target, this.input.levels), field, parent: type, context, childContext: inner, size };
  }

  /** The field on top of its sub-selections' measure, into `out`; its terms returned. */
  finish(field: FieldCost, parent: CompositeCost, entry: KeyEntry, context: SizedContext | null, measured: Measure, out: Float64Array): SizeTerms {
    const width = this.width;
    const heads = entry.heads;
    out.set(measured.v);
    let terms = measured.t;
    // This field's own sizedFields: its size is now known.
    if (field.sized !== null && terms !== null) terms = substituteNearest(terms, this.size(heads, field), out, 0);
    out[0] = sat((out[0] ?? 0) + field.weight);
    // Federation: the entity fetches each object costs the gateway.
    const fetches = this.input.fetches;
    if (field.graphs !== 0n && fetches !== undefined) out[0] = sat((out[0] ?? 0) + fetches.perObject(parent, field, heads[0]!, entry.selectionSets ?? []));
    const sizedBy = field.isList && context !== null ? context.entries.get(field.name)?.vars : undefined;
    if (sizedBy !== undefined && sizedBy.length > 0) {
      // Sized by an enclosing connection whose size is not known here: `max(s, own) × inner × unit`, as size terms.
      if (terms !== null) substituteAll(terms, Number.MAX_VALUE, out, 0); // no schema sizes a field and a path below it
      let own = 0;
      for (const head of heads) own = Math.max(own, this.input.sizes.own(head, field));
      const x = new Float64Array(width);
      for (let i = 0; i < width; i++) {
        x[i] = sat(field.innerCount * (out[i] ?? 0));
        out[i] = own === 0 ? 0 : sat(own * (x[i] ?? 0));
      }
      terms = sizedBy.map((v, i) => ({ v, b: i === 0 ? own : 0, x }));
    } else if (field.isList) {
      const count = sat(this.size(heads, field) * field.innerCount);
      if (count !== 1) {
        for (let i = 0; i < width; i++) {
          const value = out[i] ?? 0;
          if (value !== 0) out[i] = sat(count * value);
        }
        terms = scaleTerms(terms, count);
      }
    }
    if (field.arguments !== null) out[0] = sat((out[0] ?? 0) + this.arguments(heads, field));
    this.charge(out, field, out[0] ?? 0);
    // A bucket charged the field's complexity grows with its size too.
    for (const rule of field.rules) {
      if (rule.cost !== null || terms === null) continue;
      terms = terms.map((t) => {
        const x = t.x.slice();
        x[1 + rule.bucket] = sat((x[1 + rule.bucket] ?? 0) + (x[0] ?? 0));
        return { v: t.v, b: t.b, x };
      });
    }
    return terms;
  }

  private charge(out: Float64Array, field: FieldCost, complexity: number): void {
    for (const rule of field.rules) {
      this.touched[rule.bucket] = 1;
      const i = 1 + rule.bucket;
      out[i] = sat((out[i] ?? 0) + (rule.cost ?? complexity));
    }
  }

  /** The list size the heads give (the largest). */
  private size(heads: readonly FieldNode[], field: FieldCost): number {
    let size = this.input.sizes.of(heads[0]!, field);
    for (let i = 1; i < heads.length; i++) size = Math.max(size, this.input.sizes.of(heads[i]!, field));
    return size;
  }

  private arguments(heads: readonly FieldNode[], field: FieldCost): number {
    let price = this.input.arguments.price(heads[0]!, field.arguments!);
    for (let i = 1; i < heads.length; i++) price = Math.max(price, this.input.arguments.price(heads[i]!, field.arguments!));
    return price;
  }
}

/** `into += k × (v, t)`. */
export function add(into: Acc, measure: Measure, k = 1): void {
  addVector(into, measure.v, measure.t, k);
}

export function addVector(into: Acc, vector: Float64Array, terms: SizeTerms, k: number): void {
  const v = into.v;
  for (let i = 0; i < v.length; i++) {
    const value = vector[i] ?? 0;
    if (value !== 0) v[i] = k > 0 ? sat((v[i] ?? 0) + k * value) : (v[i] ?? 0) + k * value;
  }
  if (terms !== null) into.t = addTerms(into.t, terms, k);
}

/** `into = max(into, measure)`, per component (size terms: an envelope never below either). */
export function max(into: Acc, measure: Measure): void {
  const v = into.v;
  for (let i = 0; i < v.length; i++) {
    const value = measure.v[i] ?? 0;
    if (value > (v[i] ?? 0)) v[i] = value;
  }
  into.t = envelope(into.t, measure.t, v.length);
}
