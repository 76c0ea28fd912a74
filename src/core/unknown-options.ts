/**
 * A misspelt option (`refundUnusedCosts`) would otherwise do nothing, silently.
 * Throws a `TypeError` naming the first key of `options` that `known` lacks,
 * the option it most likely meant, and every valid one.
 */
export function rejectUnknownOptions(options: object, known: Readonly<Record<string, true>>, owner: string): void {
  for (const name of Object.keys(options)) {
    if (Object.hasOwn(known, name)) continue;
    const valid = Object.keys(known);
    const meant = closest(name, valid);
    const hint = meant === undefined ? '' : ` (did you mean "${meant}"?)`;
    throw new TypeError(`${owner} has no option ${JSON.stringify(name)}${hint}; its options are ${valid.join(', ')}`);
  }
}

/** The valid name within two edits of `name` (letter case aside), if one is. */
function closest(name: string, valid: readonly string[]): string | undefined {
  const lower = name.toLowerCase();
  let best: { name: string; distance: number } | undefined;
  for (const candidate of valid) {
    const distance = editDistance(lower, candidate.toLowerCase(), 2);
    if (distance <= 2 && (best === undefined || distance < best.distance)) best = { name: candidate, distance };
  }
  return best?.name;
}

/** Levenshtein distance of `a` and `b`, or `limit + 1` once it is known to exceed `limit`. */
function editDistance(a: string, b: string, limit: number): number {
  if (Math.abs(a.length - b.length) > limit) return limit + 1;
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    let rowBest = i;
    for (let j = 1; j <= b.length; j++) {
      const value = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
      current.push(value);
      rowBest = Math.min(rowBest, value);
    }
    if (rowBest > limit) return limit + 1;
    previous = current;
  }
  return previous[b.length]!;
}
