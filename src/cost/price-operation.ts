import type { SelectionSetNode } from 'graphql';
import type { Work } from './budget.js';
import { FieldPrices, add, addVector, max } from './field-prices.js';
import type { Acc, FieldPriceInput, Measure } from './field-prices.js';
import type { Guard, Level, Levels, Part } from './levels.js';
import { KeyEntry } from './own-keys.js';
import type { Excluded, OwnGroup, OwnKeys } from './own-keys.js';
import type { CompositeCost, FieldCost, SizedContext } from './schema-costs.js';
import { substituteNearest } from './size-terms.js';
import type { SizeTerms } from './size-terms.js';
import { classesMeeting, classesOf, within } from './type-tables.js';

export type { Measure } from './field-prices.js';

/*
 * The estimate: what an operation costs before it runs.
 *
 * Invariant, in one sentence: every selection set and fragment of the
 * document is collected once into a level, and a level is priced at most
 * once per sized context and per class of types it can tell apart, its
 * parts (fragments, conditions on other abstract types) priced by reference
 * and never copied — so pricing work and memory grow with the document,
 * never with the number of types its conditions name or the places a
 * fragment is spread (past a fixed work budget, the operation is refused).
 *
 * In detail: every level (a selection set collected on the type validation
 * gives it, levels.ts) is priced once per sized context on each type it can
 * be told apart on, and on a type only through what it reads of it: its own
 * keys once per combination of their field shapes (types that define them
 * alike share one price) and per type a condition names, each part (a
 * fragment, a condition on another interface or union) by its own price,
 * never copied. An interface or union costs its most expensive possible
 * type: the most of its level over the types its conditions name and, for
 * the others, over the classes of its possible types, each part counting the
 * most it costs on that class.
 *
 * The walk keeps its own stack of reused frames, so that however deep an
 * operation nests the call stack stays flat and nothing lives per level but
 * the memo.
 */

export interface EstimateInput extends FieldPriceInput {
  readonly frames: Frames;
}

/** A level's own keys and parts on one type; or, for a class of an abstract level, on a type standing for it, each part at its class maxima. */
const AT = 0;
/** Per class of an abstract level, the most it costs on a type of the class. */
const MAX = 1;

// What a frame waits for from the frame above it.
const NOTHING = 0;
const KEY = 1;
const PART = 2;
const PART_CLASSES = 3;
const EXCLUDED_KEY = 4;
const EXACT = 5;
const CLASS = 6;

type Result = Measure | readonly (Measure | null)[];

class Frame {
  kind = AT;
  level: Level | null = null;
  type: CompositeCost | null = null;
  context: SizedContext | null = null;
  /** AT on a type: the memo key within the level; -1 for a class. */
  key = -1;
  /** For a class of an abstract level, its index; -1 on a type. */
  classIndex = -1;
  outerCut = Infinity;
  waiting = NOTHING;
  /** Met again (a part, below one, below an interface or union, or content at several places): its result is kept. */
  shared = false;
  sum: Acc;
  /** A group's sum apart from the level's (an abstract level keeps each group's), and a part's hoisted keys: made when first needed. */
  group: Acc | null = null;
  excluded: Acc | null = null;
  // AT: the groups of its own keys, then its parts.
  groups: readonly OwnGroup[] = [];
  g = 0;
  k = 0;
  without = false;
  groupOpen = false;
  groupSignature = '';
  groupCut = Infinity;
  parts: readonly Part[] = [];
  p = 0;
  /** 0: the part's price; 1: its hoisted keys, taken out. */
  partPhase = 0;
  hoisted: Excluded | null = null;
  x = 0;
  hoistedSignature = '';
  hoistedCut = Infinity;
  // A key waiting for its sub-selection.
  entry: KeyEntry | null = null;
  field: FieldCost | null = null;
  /** The type that field is selected on. */
  parent: CompositeCost | null = null;
  fieldContext: SizedContext | null = null;
  sign = 1;
  into: Acc | null = null;
  // MAX
  maxKey = '';
  size = -1;
  result: (Measure | null)[] = [];
  exact: readonly CompositeCost[] = [];
  exactSet: ReadonlySet<CompositeCost> = new Set();
  e = 0;
  c = 0;

  constructor(width: number) {
    this.sum = { v: new Float64Array(width), t: null };
  }
}

/** Frames kept between pricings of one model (pricing is synchronous: one at a time). */
export class Frames {
  readonly frames: Frame[] = [];
}

export class Estimate {
  readonly touched: Uint8Array;
  private readonly fields: FieldPrices;
  private readonly width: number;
  private readonly work: Work;
  private readonly levels: Levels;
  private readonly own: OwnKeys;
  private readonly typeCount: number;
  /** The price of a level met again while it is being priced (a fragment inside itself): nothing, as graphql-js skips a fragment it visited. */
  private readonly skipped: Measure;
  private readonly contexts = new Map<SizedContext | null, number>([[null, 0]]);
  /** A level on a type, by level, then type and context (a level on its own type without context, the common case, directly). */
  private readonly atMemo = new Map<Level, Measure | Map<number, Measure>>();
  /** An abstract level's class maxima, by level, context and size. */
  private readonly classMemo = new Map<string, readonly (Measure | null)[]>();
  /** A group of a level's own keys, and a part's hoisted keys, by their shapes on a type and context. */
  private readonly groupMemo = new Map<object, Map<string, Measure>>();
  /** Levels being priced, by where their frame is on the stack. */
  private readonly open = new Map<Level, number>();
  private readonly openElsewhere = new Map<string, number>();
  private readonly frames: Frame[];
  private top = -1;
  /** Where a key is priced before it is added. */
  private readonly scratch: Float64Array;
  /** The lowest frame a fragment cycle was cut at, below the current frame (Infinity: none): a result that depends on it is not kept. */
  private cut = Infinity;
  private result: Result | null = null;

  constructor(input: EstimateInput) {
    this.fields = new FieldPrices(input);
    this.touched = this.fields.touched;
    this.width = this.fields.width;
    this.work = input.work;
    this.levels = input.levels;
    this.own = input.levels.own;
    this.typeCount = input.costs.types.size;
    this.skipped = { v: new Float64Array(this.width), t: null };
    this.scratch = new Float64Array(this.width);
    this.frames = input.frames.frames;
    // Frames of another width (none: one model, one width) are not reused.
    if (this.frames.length > 0 && this.frames[0]!.sum.v.length !== this.width) this.frames.length = 0;
  }

  /** The measure of an operation's root selection set on its root type. */
  price(selectionSet: SelectionSetNode, root: CompositeCost): Measure {
    this.levels.work = this.work;
    const level = this.levels.levelOf([selectionSet], root);
    const known = this.callAt(level, root, null, level.repeated);
    if (known !== null) return known;
    while (this.top >= 0) {
      const frame = this.frames[this.top]!;
      if (frame.kind === AT) this.stepAt(frame);
      else this.stepMax(frame);
    }
    return this.result as Measure;
  }

  private contextId(context: SizedContext | null): number {
    let id = this.contexts.get(context);
    if (id === undefined) this.contexts.set(context, (id = this.contexts.size));
    return id;
  }

  /** A level's price on `type`: at once when known, else null with its frame pushed (its result comes to the frame below). */
  private callAt(level: Level, type: CompositeCost, context: SizedContext | null, shared: boolean): Measure | null {
    const id = this.contextId(context);
    const key = type === level.type && id === 0 ? 0 : 1 + id * this.typeCount + type.index;
    const known = this.atMemo.get(level);
    if (known !== undefined) {
      const measure = 'v' in known ? (key === 0 ? known : undefined) : known.get(key);
      if (measure !== undefined) return measure;
    }
    const cycle = key === 0 ? this.open.get(level) : this.openElsewhere.get(`${level.id}:${key}`);
    if (cycle !== undefined) {
      this.cut = Math.min(this.cut, cycle);
      return this.skipped;
    }
    const frame = this.push(AT, level, type, context);
    frame.key = key;
    frame.shared = shared || level.repeated;
    if (key === 0) this.open.set(level, this.top);
    else this.openElsewhere.set(`${level.id}:${key}`, this.top);
    return null;
  }

  /** An abstract level's most per class: at once when known, else null with its frame pushed. */
  private callClasses(level: Level, context: SizedContext | null, size: number): readonly (Measure | null)[] | null {
    const key = `${level.id}:${this.contextId(context)}:${size}`;
    const known = this.classMemo.get(key);
    if (known !== undefined) return known;
    const cycle = this.openElsewhere.get(key);
    if (cycle !== undefined) {
      this.cut = Math.min(this.cut, cycle);
      return classesOf(level.type).members.map(() => null);
    }
    const frame = this.push(MAX, level, level.type, context);
    frame.shared = true;
    frame.maxKey = key;
    frame.size = size;
    frame.result = classesOf(level.type).members.map(() => null);
    const own = this.own.of(level);
    // Told apart by a field the type does not declare (validation off): every possible type on its own.
    frame.exact = level.undeclared ? level.type.possibleTypes! : own.named.filter((named) => within(named, level.type));
    frame.exactSet = new Set(frame.exact);
    this.openElsewhere.set(key, this.top);
    return null;
  }

  private push(kind: number, level: Level, type: CompositeCost, context: SizedContext | null): Frame {
    this.work.spend(1);
    const index = ++this.top;
    let frame = this.frames[index];
    if (frame === undefined) this.frames[index] = frame = new Frame(this.width);
    frame.kind = kind;
    frame.level = level;
    frame.type = type;
    frame.context = context;
    frame.classIndex = -1;
    frame.shared = false;
    frame.waiting = NOTHING;
    frame.outerCut = this.cut;
    this.cut = Infinity;
    if (kind === AT) {
      clear(frame.sum);
      frame.groups = this.own.of(level).groupsAt(type);
      frame.parts = level.parts;
      frame.g = 0;
      frame.k = 0;
      frame.without = false;
      frame.groupOpen = false;
      frame.p = 0;
      frame.partPhase = 0;
    } else {
      frame.e = 0;
      frame.c = 0;
    }
    return frame;
  }

  /** The frame is done: its result goes to the frame below, kept where nothing it read was cut above it. */
  private pop(frame: Frame, result: Result): void {
    const index = this.top--;
    const kept = this.cut >= index && frame.shared;
    this.cut = Math.min(frame.outerCut, this.cut);
    if (frame.kind === AT && frame.classIndex < 0) {
      const level = frame.level!;
      if (frame.key === 0) this.open.delete(level);
      else this.openElsewhere.delete(`${level.id}:${frame.key}`);
      if (kept) this.rememberAt(level, frame.key, result as Measure);
    } else if (frame.kind === MAX) {
      this.openElsewhere.delete(frame.maxKey);
      if (kept) this.classMemo.set(frame.maxKey, result as readonly (Measure | null)[]);
    }
    if (this.top < 0) this.result = result;
    else this.resume(this.frames[this.top]!, result);
  }

  private rememberAt(level: Level, key: number, measure: Measure): void {
    const known = this.atMemo.get(level);
    if (known === undefined && key === 0) {
      this.atMemo.set(level, measure);
      return;
    }
    let byKey: Map<number, Measure>;
    if (known === undefined) this.atMemo.set(level, (byKey = new Map()));
    else if ('v' in known) this.atMemo.set(level, (byKey = new Map([[0, known]])));
    else byKey = known;
    byKey.set(key, measure);
  }

  private stepAt(frame: Frame): void {
    const type = frame.type!;
    const context = frame.context;
    // Its own keys: those every type has, priced once per combination of their shapes, and those its conditions add on this type.
    while (frame.g < frame.groups.length) {
      const group = frame.groups[frame.g]!;
      if (!frame.groupOpen) {
        // On an object type a level is priced once: its keys go straight into its sum.
        const signature = frame.level!.type.possibleTypes === null ? '' : this.own.signature(group, type);
        const known = signature === '' ? undefined : this.groupMemo.get(group)?.get(`${signature}|${this.contextId(context)}`);
        if (known !== undefined) {
          add(frame.sum, known);
          frame.g++;
          continue;
        }
        frame.groupOpen = true;
        frame.groupSignature = signature;
        if (signature !== '') clear((frame.group ??= { v: new Float64Array(this.width), t: null }));
        frame.k = 0;
        frame.without = false;
        frame.groupCut = this.cut;
        this.cut = Infinity;
      }
      const into = frame.groupSignature === '' ? frame.sum : frame.group!;
      while (frame.k < group.keys.length) {
        const entry = group.keys[frame.k]!;
        // A key merged here with occurrences the group for every type priced already: those are taken out again.
        const priced = frame.without ? entry.without! : entry;
        const sign = frame.without ? -1 : 1;
        if (!frame.without && entry.without !== null) frame.without = true;
        else {
          frame.without = false;
          frame.k++;
        }
        if (this.key(frame, KEY, priced, type, context, into, sign * priced.count)) return;
      }
      if (frame.groupSignature !== '') {
        if (this.cut >= this.top) this.remember(group, `${frame.groupSignature}|${this.contextId(context)}`, copy(frame.group!));
        add(frame.sum, frame.group!);
      }
      this.cut = Math.min(frame.groupCut, this.cut);
      frame.groupOpen = false;
      frame.g++;
    }
    while (frame.p < frame.parts.length) {
      const part = frame.parts[frame.p]!;
      if (frame.partPhase === 0) {
        if (!this.applies(frame, part)) {
          frame.p++;
          continue;
        }
        frame.partPhase = 1;
        if (frame.classIndex < 0 || this.own.pricedOnType(part, frame.level!)) {
          const known = this.callAt(part.level, type, context, true);
          if (known === null) {
            frame.waiting = PART;
            return;
          }
          this.partPriced(frame, known);
        } else {
          const known = this.callClasses(part.level, context, -1);
          if (known === null) {
            frame.waiting = PART_CLASSES;
            return;
          }
          this.partClasses(frame, known);
        }
      }
      // Its keys hoisted into this level: its own price of them taken out.
      const hoisted = frame.hoisted;
      if (hoisted !== null) {
        while (frame.x < hoisted.keys.length) {
          const { entries, plain, entry } = hoisted.keys[frame.x++]!;
          let applying = entry;
          if (!plain) {
            const occurrences = entries.filter((e) => e.guard === null || e.guard.has(type)).map((e) => ({ node: e.node, guard: e.guard, at: 0, inner: e.at, from: null }));
            if (occurrences.length === 0) continue;
            applying = new KeyEntry(occurrences, true, null);
          }
          if (this.key(frame, EXCLUDED_KEY, applying, type, context, frame.excluded!, 1)) return;
        }
        if (this.cut >= this.top) this.remember(hoisted, `${frame.hoistedSignature}|${this.contextId(context)}`, copy(frame.excluded!));
        this.cut = Math.min(frame.hoistedCut, this.cut);
        add(frame.sum, frame.excluded!, -1);
        frame.hoisted = null;
      }
      frame.partPhase = 0;
      frame.p++;
    }
    // A result that is not kept is read at once by the frame below, before this frame is used again.
    this.pop(frame, frame.shared ? copy(frame.sum) : frame.sum);
  }

  /** Whether a part applies where the frame prices its level: on its type, or (for a class) on some type of the class. */
  private applies(frame: Frame, part: Part): boolean {
    if (frame.classIndex < 0) return applies(part.guard, frame.type!) && within(frame.type!, part.level.type);
    return part.guard === null && this.meeting(frame, part).length > 0;
  }

  private meeting(frame: Frame, part: Part): readonly number[] {
    const type = frame.level!.type;
    return part.level.type === type ? [frame.classIndex] : classesMeeting(type, part.level.type)[frame.classIndex]!;
  }

  /** A part's price came: added, and what was hoisted out of it is to be taken out, unless it was skipped. */
  private partPriced(frame: Frame, measure: Measure): void {
    add(frame.sum, measure);
    if (measure !== this.skipped) this.openHoisted(frame, frame.parts[frame.p]!);
  }

  /** A part's class maxima came: the most over the classes of it that meet the frame's class is added. */
  private partClasses(frame: Frame, classes: readonly (Measure | null)[]): void {
    const part = frame.parts[frame.p]!;
    let most: Acc | null = null;
    for (const index of this.meeting(frame, part)) {
      const measure = classes[index];
      if (measure === null || measure === undefined) continue;
      if (most === null) most = { v: measure.v.slice(), t: measure.t };
      else max(most, measure);
    }
    if (most !== null) add(frame.sum, most);
    this.openHoisted(frame, part);
  }

  private openHoisted(frame: Frame, part: Part): void {
    if (part.excluded.length === 0) return;
    const hoisted = this.own.excluded(part);
    const signature = this.own.excludedSignature(hoisted, frame.type!);
    const known = this.groupMemo.get(hoisted)?.get(`${signature}|${this.contextId(frame.context)}`);
    if (known !== undefined) {
      add(frame.sum, known, -1);
      return;
    }
    frame.hoisted = hoisted;
    frame.hoistedSignature = signature;
    frame.x = 0;
    clear((frame.excluded ??= { v: new Float64Array(this.width), t: null }));
    frame.hoistedCut = this.cut;
    this.cut = Infinity;
  }

  /**
   * Prices a key into `into` (× `sign`): true when the frame must wait for
   * its sub-selection's frame, pushed above it.
   */
  private key(frame: Frame, waiting: number, entry: KeyEntry, type: CompositeCost, context: SizedContext | null, into: Acc, sign: number): boolean {
    const priced = this.fields.key(entry, type, context, this.scratch);
    if (priced === null || !('level' in priced)) {
      addVector(into, this.scratch, priced, sign);
      return false;
    }
    // Below a frame met again, or priced on several types, so is the sub-selection.
    const shared = frame.shared || frame.classIndex >= 0 || frame.level!.type.possibleTypes !== null;
    const level = priced.level;
    const known = level.type.possibleTypes === null ? this.callAt(level, level.type, priced.childContext, shared) : this.callClasses(level, priced.childContext, priced.size);
    frame.entry = entry;
    frame.field = priced.field;
    frame.parent = priced.parent;
    frame.fieldContext = priced.context;
    frame.into = into;
    frame.sign = sign;
    if (known === null) {
      frame.waiting = waiting;
      return true;
    }
    this.keyPriced(frame, known);
    return false;
  }

  private keyPriced(frame: Frame, result: Result): void {
    const measure = Array.isArray(result) ? this.most(result as readonly (Measure | null)[]) : (result as Measure);
    const terms: SizeTerms = this.fields.finish(frame.field!, frame.parent!, frame.entry!, frame.fieldContext, measure, this.scratch);
    addVector(frame.into!, this.scratch, terms, frame.sign);
  }

  /** The most of class maxima: what the abstract type costs at most. */
  private most(classes: readonly (Measure | null)[]): Measure {
    let most: Acc | null = null;
    for (const measure of classes) {
      if (measure === null) continue;
      if (most === null) most = { v: measure.v.slice(), t: measure.t };
      else max(most, measure);
    }
    return most ?? this.fields.zero;
  }

  private stepMax(frame: Frame): void {
    const level = frame.level!;
    while (frame.e < frame.exact.length) {
      const type = frame.exact[frame.e++]!;
      const known = this.callAt(level, type, frame.context, true);
      if (known === null) {
        frame.waiting = EXACT;
        return;
      }
      this.fold(frame, classesOf(level.type).of.get(type), known);
    }
    const classes = classesOf(level.type).members;
    while (frame.c < classes.length) {
      const c = frame.c++;
      const standIn = classes[c]!.find((member) => !frame.exactSet.has(member));
      if (standIn === undefined) continue;
      const stand = this.push(AT, level, standIn, frame.context);
      stand.classIndex = c;
      stand.shared = true;
      frame.waiting = CLASS;
      return;
    }
    this.pop(frame, frame.result);
  }

  /** Keeps the larger per component in a class (at a known size of the level's own sized fields, each measured there first). */
  private fold(frame: Frame, index: number | undefined, measure: Measure): void {
    if (index === undefined) return;
    let m: Measure = measure;
    if (frame.size >= 0 && measure.t !== null) {
      const v = measure.v.slice();
      m = { v, t: substituteNearest(measure.t, frame.size, v, 0, false) };
    }
    const current = frame.result[index];
    if (current === null || current === undefined) frame.result[index] = m;
    else {
      const most: Acc = { v: current.v.slice(), t: current.t };
      max(most, m);
      frame.result[index] = most;
    }
  }

  /** The frame above `frame` is done with `result`. */
  private resume(frame: Frame, result: Result): void {
    const waiting = frame.waiting;
    frame.waiting = NOTHING;
    switch (waiting) {
      case KEY:
      case EXCLUDED_KEY:
        this.keyPriced(frame, result);
        break;
      case PART:
        this.partPriced(frame, result as Measure);
        break;
      case PART_CLASSES:
        this.partClasses(frame, result as readonly (Measure | null)[]);
        break;
      case EXACT:
        this.fold(frame, classesOf(frame.level!.type).of.get(frame.exact[frame.e - 1]!), result as Measure);
        break;
      case CLASS:
        this.fold(frame, frame.c - 1, result as Measure);
        break;
    }
  }

  private remember(owner: object, key: string, measure: Measure): void {
    let memo = this.groupMemo.get(owner);
    if (memo === undefined) this.groupMemo.set(owner, (memo = new Map()));
    memo.set(key, measure);
  }
}

/** Whether something under `guard` applies on the object type `type`. */
function applies(guard: Guard, type: CompositeCost): boolean {
  return guard === null || guard.has(type);
}

function clear(acc: Acc): void {
  acc.v.fill(0);
  acc.t = null;
}

function copy(acc: Acc): Measure {
  return { v: acc.v.slice(), t: acc.t };
}
