/**
 * Packing sequences into calls under a token budget (rows × longest row ≤ budget, right padding).
 *
 * @module
 */

/**
 * Groups row indices so that each group's `count × max length` stays within `budget`; rows are taken
 * longest first so that similar lengths share a call (less padding). A row longer than the budget
 * gets a group of its own.
 */
export function packRows(lengths: readonly number[], budget: number): number[][] {
  const order = lengths.map((_, i) => i).sort((a, b) => lengths[b] - lengths[a] || a - b);
  const groups: number[][] = [];
  let current: number[] = [];
  let width = 0;
  for (const i of order) {
    const w = Math.max(width, lengths[i]);
    if (current.length > 0 && (current.length + 1) * w > budget) {
      groups.push(current);
      current = [];
    }
    width = current.length === 0 ? lengths[i] : w;
    current.push(i);
  }
  if (current.length > 0) groups.push(current);
  return groups;
}
